"""The throughput prediction (issue 12, predictions that hold): its terms behave, it is
what FATM reports for its own plan, it reads its constants from the calibration, and it
is deterministic. No timings: every figure here is computed from a synthetic profile."""

from __future__ import annotations

import dataclasses
import json

import pytest

from spadeopt import api
from spadeopt.errors import OptimizeError
from spadeopt.optimize.fatm import (
    OperatorProfile,
    collapsed_links,
    fuse_auto,
    predict_plan,
    problem_for,
    unattributed_call_s,
)
from spadeopt.optimize.predict import DEFAULT_MODEL, PerfModel, model_from_calibration, predict
from spadeopt.optimize.problem import FusionProblem, LinearCommModel

FREE = LinearCommModel(0.0)


def _pipeline(n: int, u: float = 0.2, rate: float = 1000.0) -> FusionProblem:
    """``n`` operators in a line, each ``u`` cores at ``rate`` tuples/s."""
    names = [f"o{i}" for i in range(n)]
    links = [(names[i], names[i + 1], rate, 50.0) for i in range(n - 1)]
    return FusionProblem.build(names, dict.fromkeys(names, u), links, FREE)


def test_more_busy_pes_than_cores_predict_less_than_the_same_work_within_the_cores():
    p = _pipeline(6)
    two = [("a", ["o0", "o1", "o2"], 0), ("b", ["o3", "o4", "o5"], 0)]
    six = [(f"p{i}", [f"o{i}"], 0) for i in range(6)]
    model = PerfModel(sched=0.05, busy=0.0)
    within, over = predict(p, two, 1, 2, 1000.0, model), predict(p, six, 1, 2, 1000.0, model)
    assert over.rate < within.rate
    assert over.node_capacity[0] == pytest.approx(2 / (1 + 0.05 * 4)) and within.node_capacity[0] == 2
    assert over.busy_pes == {0: 6} and "node 0" in over.bottleneck
    # without the scheduling term (and free communication) the same work predicts the same rate
    plain = PerfModel()
    assert predict(p, six, 1, 2, 1000.0, plain).rate == pytest.approx(predict(p, two, 1, 2, 1000.0, plain).rate)


def test_a_pe_is_one_process_and_cannot_use_more_than_pe_cap_cores():
    p = _pipeline(4)  # 0.8 cores of work at 1000/s
    one = [("all", ["o0", "o1", "o2", "o3"], 0)]
    got = predict(p, one, 1, 4, 1000.0, PerfModel())
    assert got.rate == pytest.approx(1000.0 / 0.8, rel=1e-6) and "PE all" in got.bottleneck
    assert got.pe_load["all"] == pytest.approx(1.0, rel=1e-6)


def test_call_cost_oper_scale_and_comm_scale_lower_the_prediction():
    names = ["a", "b"]
    comm = LinearCommModel(1e-5)
    p = FusionProblem.build(names, {"a": 0.1, "b": 0.1}, [("a", "b", 1000.0, 10.0)], comm)
    fused, split = [("x", names, 0)], [("x", ["a"], 0), ("y", ["b"], 0)]
    base = predict(p, fused, 1, 1, 1000.0, PerfModel()).rate
    assert predict(p, fused, 1, 1, 1000.0, PerfModel(call_s=1e-4)).rate < base
    assert predict(p, fused, 1, 1, 1000.0, PerfModel(oper_scale=0.5)).rate == pytest.approx(2 * base, rel=1e-6)
    assert predict(p, split, 1, 1, 1000.0, PerfModel(comm_scale=2)).rate < predict(p, split, 1, 1, 1000.0,
                                                                                   PerfModel()).rate
    # a collapsed link costs no call, and the inlined operator saves its per-tuple overhead
    collapsed = frozenset({("a", "b")})
    model = PerfModel(call_s=1e-4, collapse_saves_s=5e-5)
    assert predict(p, fused, 1, 1, 1000.0, model, collapsed=collapsed).rate > predict(p, fused, 1, 1, 1000.0,
                                                                                      model).rate


def test_a_plan_that_does_not_cover_the_app_is_refused():
    p = _pipeline(3)
    with pytest.raises(OptimizeError, match="cover"):
        predict(p, [("a", ["o0", "o1"], 0)], 1, 2, 1000.0, PerfModel())
    with pytest.raises(OptimizeError, match="node"):
        predict(p, [("a", ["o0", "o1", "o2"], 3)], 1, 2, 1000.0, PerfModel())


def _chain(n: int = 6, work_us: float = 20.0, rate: float = 10_000.0, one_pe: bool = False):
    graph, _ = api.load_graph("apps/chain.py", {"n": str(n)})
    load = {op.name: work_us * 1e-6 * rate for op in graph.operators}
    links = tuple((s.src.op, s.dst.op, rate, 100.0) for s in graph.streams)
    return graph, OperatorProfile(graph.name, graph.fingerprint, load, links, rate, one_pe_run=one_pe)


def test_fatm_reports_the_prediction_of_its_own_plan_and_records_the_model():
    graph, prof = _chain()
    comm = LinearCommModel(2e-6)
    model = PerfModel(oper_scale=0.8, sched=0.02, busy=0.0, source="test")
    auto = fuse_auto(graph, prof, comm, 1, 2, rate="max", model=model)
    assert auto.explain["rate"]["predicted"] == predict_plan(graph, prof, auto.plan, comm, model).rate > 0
    # the model as given, predicting with the batch FATM chose for the plan (optimize.batching)
    assert auto.explain["prediction"]["model"] == {**model.to_json(), "run_batch": float(auto.plan.batch)}
    assert auto.explain["batch"]["tuples"] == auto.plan.batch == 512  # 120 us a source tuple: the default
    assert set(auto.explain["prediction"]["pe_load"]) == {pe.pe_id for pe in auto.plan.pes}
    # the same model evaluated on another strategy's plan (FALL: one PE, one core at most)
    fall = api.make_plan(graph, "all", 1, 2)
    got = predict_plan(graph, prof, fall, comm, model)
    assert got.pe_load[fall.pes[0].pe_id] == pytest.approx(model.pe_cap, rel=1e-6)


def test_the_prediction_and_explain_are_deterministic():
    graph, prof = _chain()
    comm = LinearCommModel(2e-6)
    docs = [json.dumps(fuse_auto(graph, prof, comm, 1, 2, rate="max").explain, sort_keys=True) for _ in range(2)]
    assert docs[0] == docs[1]
    assert json.loads(docs[0])["prediction"]["model"] == {**DEFAULT_MODEL.to_json(), "run_batch": 512.0}


def test_a_one_pe_profile_measures_the_unattributed_call_cost():
    graph, prof = _chain(n=4, work_us=10.0, one_pe=True)  # 6 operators x 0.1 core at 10,000/s
    internal = 10_000.0 * len(graph.streams)
    assert unattributed_call_s(prof, DEFAULT_MODEL) == pytest.approx((1.0 - 0.6) / internal)
    other = OperatorProfile(prof.app, prof.fingerprint, prof.load, prof.links, prof.source_rate)
    assert unattributed_call_s(other, PerfModel(call_s=3e-7)) == 3e-7
    # FALL of a one-PE profile predicts exactly the profiled rate when nothing else differs
    fall = dataclasses.replace(api.make_plan(graph, "all", 1, 2), collapse=False)
    got = predict_plan(graph, prof, fall, FREE, PerfModel())
    assert got.rate == pytest.approx(prof.source_rate, rel=1e-6)


def test_collapsed_links_follow_codegens_run_rule():
    graph, _ = api.load_graph("apps/chain.py", {"n": "4"})
    fall = api.make_plan(graph, "all", 1, 2)
    assert collapsed_links(graph, fall) == {("op0", "op1"), ("op1", "op2"), ("op2", "op3")}
    none = api.make_plan(graph, "none", 1, 2)
    assert collapsed_links(graph, none) == frozenset()


def test_perf_model_comes_from_the_calibration_or_the_defaults():
    assert model_from_calibration({}, "cal.json") is DEFAULT_MODEL
    got = model_from_calibration({"perf_model": {"sched": 0.1, "call_s": 1e-7}}, "cal.json")
    assert got.sched == 0.1 and got.call_s == 1e-7 and "cal.json" in got.source
    assert got.oper_scale == DEFAULT_MODEL.oper_scale  # what the block does not set stays the default
    assert got.split_dynamic_s == DEFAULT_MODEL.split_dynamic_s
    for bad in ({"sched": -1}, {"nope": 1}, {"pe_cap": 0}, {"sched": True}, [1]):
        with pytest.raises(OptimizeError, match="perf_model"):
            model_from_calibration({"perf_model": bad}, "cal.json")


def test_problem_for_the_prediction_keeps_every_stream():
    graph, prof = _chain()
    problem = problem_for(graph, prof, FREE, 1.0, 1.0)
    assert len(problem.links) == len(graph.streams)


# ---- issue 27 item 6: communication in a flat-out run; a profile taken on a busy machine ----

def test_link_batches_follow_the_share_of_the_source_rate_each_link_carries():
    from spadeopt.optimize.predict import link_batches

    # src -> route -> {a (a tenth), b (the rest)} -> sink; and a feedback loop b -> route
    links = [("src", "route", 1000.0, 50.0), ("route", "a", 100.0, 50.0), ("route", "b", 900.0, 50.0),
             ("a", "sink", 100.0, 50.0), ("b", "sink", 900.0, 50.0), ("b", "route", 10.0, 50.0)]
    names = ["src", "route", "a", "b", "sink"]
    p = FusionProblem.build(names, dict.fromkeys(names, 0.1), links, FREE)
    got = link_batches(p, 512.0)
    assert got[("src", "route")] == 512.0 and got[("route", "b")] == pytest.approx(512.0 * 0.9)
    assert got[("route", "a")] == pytest.approx(51.2) and got[("b", "route")] == pytest.approx(5.12)
    assert link_batches(FusionProblem.build(["x", "y"], {"x": 0.1, "y": 0.1}, [("x", "y", 0.001, 9.0)], FREE),
                        512.0)[("x", "y")] == 512.0  # its own source: full frames


def test_flat_out_comm_charges_the_frame_over_the_tuples_that_share_it():
    # a source feeding two branches: 'big' carries every tuple, 'small' one in 64
    names = ["src", "big", "small"]
    links = [("src", "big", 6400.0, 50.0), ("src", "small", 100.0, 50.0)]
    comm = LinearCommModel(1e-6)
    p = FusionProblem.build(names, dict.fromkeys(names, 0.05), links, comm)
    pes = [("s", ["src"], 0), ("b", ["big"], 0), ("m", ["small"], 0)]
    old = predict(p, pes, 1, 4, 6400.0, PerfModel())
    new = predict(p, pes, 1, 4, 6400.0, PerfModel(batch=512.0, frame_s=60e-6))
    # full frames cost what the linear model says; a frame of 8 tuples adds 60 us * (1/8 - 1/512) / 2 a tuple
    per_k = {pe: {m: r.pe_load[pe] / r.factor for m, r in (("old", old), ("new", new))} for pe in ("b", "m")}
    assert per_k["b"]["new"] == pytest.approx(per_k["b"]["old"], rel=1e-9)
    assert per_k["m"]["new"] == pytest.approx(per_k["m"]["old"] + 100.0 * 60e-6 * (1 / 8 - 1 / 512) / 2, rel=1e-9)
    assert new.rate <= old.rate
    # batch 0: the rate-indexed v, as before
    assert predict(p, pes, 1, 4, 6400.0, PerfModel(batch=0.0, frame_s=60e-6)).rate == old.rate


def test_a_profile_taken_while_other_work_shared_its_core_fits_what_the_pe_used():
    """A one-PE profile whose sources thread used 0.4 of a core (a busy machine): only that
    is the PE's CPU, so the unattributed call cost is what the operators leave of 0.4, not
    of a whole core (which made every cut link look 1 us a tuple cheaper than it is)."""
    graph, prof = _chain(n=4, work_us=3.0, one_pe=True)  # 6 operators x 0.03 cores at 10,000/s
    internal = 10_000.0 * len(graph.streams)
    busy = dataclasses.replace(prof, profiled_busy=0.4)
    assert unattributed_call_s(busy, DEFAULT_MODEL) == pytest.approx((0.4 - 0.18) / internal)
    assert unattributed_call_s(prof, DEFAULT_MODEL) == pytest.approx((1.0 - 0.18) / internal)
    # the production probe counts by CPU: 50 us a tuple is 0.5 cores at 10,000/s, whatever its rate
    from spadeopt.optimize.fatm_fit import fit_production, production_cores

    probe = dataclasses.replace(busy, production_fall_rate=10_000.0, production_fall_cpu_s=50e-6)
    assert production_cores(probe, DEFAULT_MODEL) == pytest.approx(0.5)
    no_cpu = dataclasses.replace(probe, production_fall_cpu_s=0.0)
    assert production_cores(no_cpu, DEFAULT_MODEL) == pytest.approx(1.0)  # pe_cap x 10,000 / 10,000
    fitted = fit_production(graph, dataclasses.replace(probe, production_fall_rate=1e-9), PerfModel())
    assert fitted.oper_scale == pytest.approx(0.5 / 0.4)  # CPU per tuple: production / profiled
