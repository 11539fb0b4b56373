"""FATM chooses parallel regions' widths (issue 12): from the profile, pinned by
--width, off with --no-fission, deterministic, and the chosen plan keeps answers."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace

import pytest

from spadeopt import api
from spadeopt.deploy.options import RunOptions
from spadeopt.optimize.fatm import OperatorProfile, fuse_auto
from spadeopt.optimize.predict import DEFAULT_MODEL
from spadeopt.optimize.problem import LinearCommModel
from spadeopt.optimize.widths import physical_profile
from spadeopt.plan.explain import explain_text
from spadeopt.plan.fission import physical_graph
from spadeopt.plan.plan import check_plan
from spadeopt.plan.regions import resolve_regions

COMM = LinearCommModel(2e-6, 1e-9)


def _profile(graph, region_u: float, other_u: float, rate: float) -> OperatorProfile:
    """Every stream at ``rate`` tuples/s; region operators other than sources cost
    ``region_u`` cores each, every other operator ``other_u``."""
    members = {o for _, ops, _ in graph.annotations.parallel for o in ops}
    load = {op.name: (region_u if op.name in members and not op.is_source else other_u) for op in graph.operators}
    links = tuple((s.src.op, s.dst.op, rate, 60.0) for s in graph.streams)
    return OperatorProfile(graph.name, graph.fingerprint, load, links, rate)


@pytest.fixture(scope="module")
def peer():
    graph, _ = api.load_graph("apps/peer.py", {"tuples": "1000", "n": "4"})
    return graph, _profile(graph, 0.2, 0.01, 10_000)


def test_a_dominant_region_is_widened_when_there_are_spare_cores():
    """One heavy operator in the region: pipelining cannot spread it over the cores,
    replication can. (A chain of several region operators already pipelines over the
    cores, and the prediction's per-PE scheduling cost then keeps width 1.)"""
    graph, _ = api.load_graph("apps/peer.py", {"tuples": "1000", "n": "1"})
    prof = _profile(graph, 0.8, 0.01, 10_000)
    auto = fuse_auto(graph, prof, COMM, nodes=1, cores=4, rate="max")
    (region,) = auto.plan.regions
    assert region.name == "chain" and region.width > 1
    check_plan(auto.plan, graph)
    doc = auto.explain["fission"]
    assert doc["widths"] == {"chain": region.width}
    tried = {t["width"]: t["planned_rate"] for t in doc["search"]["regions"]["chain"]["tried"]}
    assert set(tried) == {1, 2, 3, 4} and doc["search"]["search"] == "exhaustive"
    assert tried[region.width] == max(tried.values()) > tried[1]
    # each width is scored by its best fusion (every MaxFrac rung and the channel-symmetric
    # plans), which the final plan starts from (its rate search resumed: never lower)
    assert auto.explain["rate"]["predicted"] >= tried[region.width] * (1 - 1e-9)
    rungs = [r["predicted"] for r in auto.explain["max_frac_search"] if r["predicted"]]
    assert max(rungs) * (1 - 0.011) <= tried[region.width] <= max(rungs) * (1 + 1e-9)
    # every channel copy is in the plan
    pe_of = auto.plan.pe_of
    for c in range(region.width):
        assert f"f0__{c}" in pe_of
    assert any("__" in o for pe in auto.explain["pes"] for o in pe["operators"])


def test_one_core_keeps_width_one(peer):
    graph, prof = peer
    auto = fuse_auto(graph, prof, COMM, nodes=1, cores=1, rate="max")
    assert auto.plan.regions[0].width == 1
    (tried,) = auto.explain["fission"]["search"]["regions"]["chain"]["tried"]
    assert tried["width"] == 1 and auto.explain["rate"]["predicted"] >= tried["planned_rate"] * (1 - 1e-9)


def test_a_cheap_region_stays_narrow():
    """When a source outside the region is the bottleneck, a wider region buys nothing."""
    graph, _ = api.load_graph("apps/chain.py", {"tuples": "1000", "n": "4"})
    prof = _profile(graph, 0.001, 0.4, 10_000)
    auto = fuse_auto(graph, prof, COMM, nodes=1, cores=2, rate="max")
    assert auto.plan.regions[0].width == 1


def test_a_region_led_by_a_splittable_source_is_widened_when_the_source_is_the_bottleneck(peer):
    """peer's source is splittable and inside region 'chain': widening splits the source's
    load too, with no split operator in front (the data-parallel peers' shape)."""
    graph, _ = peer
    prof = _profile(graph, 0.001, 0.4, 10_000)
    auto = fuse_auto(graph, prof, COMM, nodes=1, cores=2, rate="max")
    (region,) = auto.plan.regions
    assert region.fed == "source" and region.width == 2
    assert "chain__split" not in auto.plan.pe_of and {"src__0", "src__1"} <= set(auto.plan.pe_of)
    assert auto.plan.pe_of["src__0"] != auto.plan.pe_of["src__1"]


def test_width_is_pinned_by_width_option_and_off_without_fission(peer):
    graph, prof = peer
    pinned = fuse_auto(graph, prof, COMM, nodes=1, cores=4, rate="max", widths={"chain": 3})
    assert pinned.plan.regions[0].width == 3
    assert pinned.explain["fission"]["search"] is None and pinned.explain["fission"]["pinned"] == {"chain": 3}
    off = fuse_auto(graph, prof, COMM, nodes=1, cores=4, rate="max", fission=False)
    assert off.plan.regions[0].width == 1 and off.explain["fission"]["enabled"] is False


def test_same_inputs_give_the_same_plan(peer):
    graph, prof = peer
    a = fuse_auto(graph, prof, COMM, nodes=2, cores=2, rate="max")
    b = fuse_auto(graph, prof, COMM, nodes=2, cores=2, rate="max")
    assert json.dumps(a.plan.to_json(), sort_keys=True) == json.dumps(b.plan.to_json(), sort_keys=True)
    assert json.dumps(a.explain, sort_keys=True) == json.dumps(b.explain, sort_keys=True)


def test_profile_maps_onto_every_physical_operator_and_stream():
    """bargain_logical: a dynamic (hash) region after a split; loads split over channels,
    split and merge costed, one link per physical stream, rates divided by the width."""
    graph, _ = api.load_graph("apps/bargain_logical.py", {"tuples": "100"})
    prof = _profile(graph, 0.05, 0.01, 1000)
    regions = tuple(r.__class__(r.name, r.operators, 3, r.key, r.ordering)
                    for r in resolve_regions(graph, {}))
    (region,) = regions
    assert region.ordering == "dynamic"
    phys = physical_graph(graph, regions)
    pprof = physical_profile(graph, prof, regions)
    assert pprof.fingerprint == phys.fingerprint
    assert set(pprof.load) == {op.name for op in phys.operators}
    for o in region.operators:
        assert sum(pprof.load[f"{o}__{c}"] for c in range(3)) == pytest.approx(prof.load[o])
    assert pprof.load[region.split] == pytest.approx(1000 * DEFAULT_MODEL.split_dynamic_s)
    assert pprof.load[region.merge] == pytest.approx(1000 * DEFAULT_MODEL.merge_dynamic_s)
    # a calibrated host's split and merge costs (paper 000's c_p) replace the defaults
    host = replace(DEFAULT_MODEL, split_dynamic_s=2e-6, merge_dynamic_s=3e-6, split_static_s=7.0)
    hprof = physical_profile(graph, prof, regions, model=host)
    assert hprof.load[region.split] == pytest.approx(1000 * 2e-6)
    assert hprof.load[region.merge] == pytest.approx(1000 * 3e-6)
    assert {k: v for k, v in hprof.load.items() if k not in (region.split, region.merge)} == \
        {k: v for k, v in pprof.load.items() if k not in (region.split, region.merge)}
    assert Counter((a, b) for a, b, _, _ in pprof.links) == Counter((s.src.op, s.dst.op) for s in phys.streams)
    inside = [r for a, b, r, _ in pprof.links if a.endswith("__1") or b.endswith("__1")]
    assert inside and all(r == pytest.approx(1000 / 3) for r in inside)


@pytest.mark.spark
def test_the_chosen_plan_runs_on_spark_with_the_answers_of_fall(tmp_path):
    """FATM's plan with a widened region, built and run on local[2]: byte-identical sinks."""
    from spadeopt.codegen.render import generate
    from spadeopt.deploy.launcher import run_build

    params = {"tuples": "3000", "n": "1", "sink": "file"}  # one heavy region operator: widened (see above)
    graph, ref = api.load_graph("apps/peer.py", params)
    auto = fuse_auto(graph, _profile(graph, 0.8, 0.01, 10_000), COMM, nodes=1, cores=2, rate="max")
    assert auto.plan.regions[0].width == 2
    build = generate(graph, auto.plan, tmp_path / "b-auto", ref)
    run_build(build.directory, RunOptions(out=tmp_path / "auto"))
    api.run("apps/peer.py", "all", params, build_dir=tmp_path / "b-all", options=RunOptions(out=tmp_path / "all"))
    got = {p.name: p.read_bytes() for p in (tmp_path / "auto").glob("*.jsonl")}
    want = {p.name: p.read_bytes() for p in (tmp_path / "all").glob("*.jsonl")}
    assert want and all(want.values()) and got == want


def test_explain_text_shows_the_widths_tried(peer, tmp_path):
    graph, prof = peer
    auto = fuse_auto(graph, prof, COMM, nodes=1, cores=2, rate="max")
    (tmp_path / "plan.json").write_text(json.dumps(auto.plan.to_json()))
    (tmp_path / "explain.json").write_text(json.dumps(auto.explain))
    text = explain_text(tmp_path)
    tried = auto.explain["fission"]["search"]["regions"]["chain"]["tried"]
    assert f"region 'chain': FATM chose width {auto.plan.regions[0].width}" in text
    for t in tried:
        assert f"{t['width']} -> {t['planned_rate']:,.0f}/s" in text
    off = fuse_auto(graph, prof, COMM, nodes=1, cores=2, rate="max", fission=False)
    (tmp_path / "plan.json").write_text(json.dumps(off.plan.to_json()))
    (tmp_path / "explain.json").write_text(json.dumps(off.explain))
    assert "fission off (--no-fission)" in explain_text(tmp_path)


def test_many_regions_are_searched_by_coordinate_ascent_and_ties_go_to_narrower():
    from spadeopt.optimize.widths import choose_widths
    from spadeopt.plan.regions import Region

    regions = tuple(Region(n, (f"{n}_op",), 1) for n in ("a", "b", "c"))
    best = {"a": 3, "b": 1, "c": 5}

    def evaluate(rs):  # separable, peaked at ``best``; b is flat from 1 to 8 (a tie)
        return 1000.0 - sum(abs(r.width - best[r.name]) * (0 if r.name == "b" else 10) for r in rs)

    chosen, doc = choose_widths(regions, ("a", "b", "c"), 8, evaluate)
    assert doc["search"] == "coordinate ascent" and doc["vectors_tried"] < 8 ** 3
    assert {r.name: r.width for r in chosen} == best
    assert doc["regions"]["b"]["chosen"] == 1
    chosen2, doc2 = choose_widths(regions, ("a", "b", "c"), 8, evaluate)
    assert chosen2 == chosen and doc2 == doc
    small, doc3 = choose_widths(regions[:1], ("a",), 4, lambda rs: 1000.0 + 2 * rs[0].width)
    assert doc3["search"] == "exhaustive" and small[0].width == 1, "0.8 % more is within the 1 % tie"


def test_collapse_fraction_is_fitted_on_the_production_fall_run():
    """peer: 16 collapsible functors. A production FALL rate equal to what the model says
    without collapsing fits 0; a rate as fast as if the inlined functors cost nothing fits 1;
    in between, the fraction that closes the gap; no probe, no fit."""
    from spadeopt.optimize.fatm import collapse_fraction, collapsible_links, unattributed_call_s
    from spadeopt.optimize.predict import DEFAULT_MODEL as M

    graph, _ = api.load_graph("apps/peer.py", {"tuples": "1000", "n": "4"})
    prof = _profile(graph, 0.05, 0.05, 10_000)
    links = collapsible_links(graph)
    assert links == {("f0", "f1"), ("f1", "f2"), ("f2", "f3")}
    inlined = {"f1", "f2", "f3"}
    call_s = unattributed_call_s(prof, M)
    kept = sum(r for a, b, r, _ in prof.links if (a, b) not in links)
    a_part = M.oper_scale * (sum(u for o, u in prof.load.items() if o not in inlined) + call_s * kept)
    b_part = M.oper_scale * sum(prof.load[o] for o in inlined)
    at = lambda cores: prof.source_rate * M.pe_cap / cores  # noqa: E731 - the FALL rate that costs `cores`
    assert collapse_fraction(graph, prof, M) == 0.0  # no probe
    fit = lambda cores: collapse_fraction(graph, replace(prof, production_fall_rate=at(cores)), M)  # noqa: E731
    assert fit(a_part + b_part) == pytest.approx(0.0, abs=1e-9)
    assert fit(a_part) == pytest.approx(1.0)
    assert fit(a_part + 0.25 * b_part) == pytest.approx(0.75)
    assert fit(a_part + 3 * b_part) == 0.0 and fit(a_part / 2) == 1.0  # clamped


def test_under_rate_max_fatm_keeps_the_max_frac_whose_plan_predicts_best(peer):
    """peer's channels each need about a core: MaxFrac 0.5 cuts every channel into
    pipeline stages; FATM also fuses with 0.75, 1.0 and 0.3, and builds the channel-symmetric
    plans (each channel in 1-3 PEs), and keeps the best predicted plan."""
    graph, _ = peer
    prof = _profile(graph, 0.002, 0.3, 10_000)
    auto = fuse_auto(graph, prof, COMM, nodes=1, cores=2, rate="max")
    tried = auto.explain["max_frac_search"]
    assert [t["max_frac"] for t in tried if "symmetric_segments" not in t] == [0.5, 0.75, 1.0, 0.3]
    assert any("symmetric_segments" in t for t in tried)
    best = max(t["predicted"] for t in tried if t["predicted"] is not None)
    assert auto.explain["rate"]["predicted"] == pytest.approx(best, rel=0.011)
    assert auto.explain["max_frac"] == next(t["max_frac"] for t in tried if t["predicted"] == best)
    fixed = fuse_auto(graph, prof, COMM, nodes=1, cores=2, rate="profiled")
    assert [t["max_frac"] for t in fixed.explain["max_frac_search"]] == [0.5]  # a planned rate keeps MaxFrac


def test_oper_scale_is_fitted_on_the_production_fall_run_when_nothing_collapses():
    """outlier (no collapsible functor run): the probe's FALL rate sets oper_scale so that
    FALL is predicted at exactly the measured rate; peer (collapsible) keeps it."""
    from spadeopt.optimize.fatm import collapse_fraction, fit_production, predict_plan
    from spadeopt.optimize.predict import DEFAULT_MODEL as M
    from spadeopt.optimize.strategies import plan_for

    graph, _ = api.load_graph("apps/outlier.py")
    prof = _profile(graph, 0.005, 0.005, 10_000)
    assert fit_production(graph, prof, M) == M  # no probe: the constants
    fitted = fit_production(graph, replace(prof, production_fall_rate=40_000.0), M)
    assert fitted.oper_scale != M.oper_scale and "fitted on the production FALL run" in fitted.source
    assert fit_production(graph, replace(prof, production_fall_rate=40_000.0), fitted) == fitted  # idempotent
    fall = plan_for(graph, "all")
    got = predict_plan(graph, replace(prof, production_fall_rate=40_000.0), fall, COMM, M)
    assert got.rate == pytest.approx(40_000.0, rel=1e-6) and got.model == fitted
    peer_graph, _ = api.load_graph("apps/peer.py", {"tuples": "1000", "n": "4"})
    peer_prof = replace(_profile(peer_graph, 0.05, 0.05, 10_000), production_fall_rate=80_000.0)
    assert fit_production(peer_graph, peer_prof, M) == M and collapse_fraction(peer_graph, peer_prof, M) > 0


def test_a_collapsible_app_slower_than_the_model_fits_oper_scale_instead():
    """peer (collapsible), with a production FALL run slower than the model says FALL
    would run with nothing collapsed (a negative collapse share, as measured on the chain
    of busy functors): oper_scale is fitted, the share is 0, and FALL is predicted at the
    measured rate; a faster probe keeps the constants and fits the share instead."""
    from spadeopt.optimize.fatm import collapse_fraction, fit_production, predict_plan
    from spadeopt.optimize.predict import DEFAULT_MODEL as M
    from spadeopt.optimize.strategies import plan_for

    graph, _ = api.load_graph("apps/peer.py", {"tuples": "1000", "n": "4"})
    base = _profile(graph, 0.05, 0.05, 10_000)
    fall = plan_for(graph, "all")
    unfitted = predict_plan(graph, base, fall, COMM, M).rate  # no probe: the constants
    slow = replace(base, production_fall_rate=unfitted / 1.7)
    fitted = fit_production(graph, slow, M)
    assert fitted.oper_scale == pytest.approx(M.oper_scale * 1.7, rel=1e-6)
    assert collapse_fraction(graph, slow, fitted) == 0.0
    assert fit_production(graph, slow, fitted) == fitted  # idempotent
    assert predict_plan(graph, slow, fall, COMM, M).rate == pytest.approx(unfitted / 1.7, rel=1e-6)
    fast = replace(base, production_fall_rate=unfitted * 1.2)
    assert fit_production(graph, fast, M) == M and collapse_fraction(graph, fast, M) > 0


def test_a_collapsible_app_faster_than_its_inlined_operators_free_fits_oper_scale():
    """peer, with a production FALL run faster than the model says FALL would run if the
    inlined functors cost nothing (a share above 1, as measured on peer in round 6: every
    strategy was predicted at 0.6 of its measured rate): the share is 1, oper_scale is
    fitted on what is left, and FALL is predicted at the measured rate."""
    from spadeopt.optimize.fatm import collapse_fraction, fit_production, predict_plan
    from spadeopt.optimize.predict import DEFAULT_MODEL as M
    from spadeopt.optimize.strategies import plan_for

    graph, _ = api.load_graph("apps/peer.py", {"tuples": "1000", "n": "4"})
    base = _profile(graph, 0.05, 0.05, 10_000)
    fall = plan_for(graph, "all")
    free = replace(base, production_fall_rate=1e12)  # as if FALL cost nothing: share 1
    assert collapse_fraction(graph, free, M) == 1.0
    fast = replace(base, production_fall_rate=_share_one_rate(graph, base, M) * 1.6)
    fitted = fit_production(graph, fast, M)
    assert fitted.oper_scale == pytest.approx(M.oper_scale / 1.6, rel=1e-6)
    assert "fitted on the production FALL run" in fitted.source
    assert collapse_fraction(graph, fast, fitted) == 1.0
    assert fit_production(graph, fast, fitted) == fitted  # idempotent
    assert predict_plan(graph, fast, fall, COMM, M).rate == pytest.approx(fast.production_fall_rate, rel=1e-6)


def _share_one_rate(graph, prof, model) -> float:
    """The FALL rate at which collapsing saves exactly the inlined operators' whole load."""
    from spadeopt.optimize.fatm import collapse_loads, unattributed_call_s

    kept, _ = collapse_loads(graph, prof, unattributed_call_s(prof, model))
    return model.pe_cap * prof.source_rate / (model.oper_scale * kept)


@pytest.mark.parametrize("cores", [2, 4])
def test_no_pe_holds_copies_of_two_channels_of_a_region(cores):
    """Paper 000's first rule: replicas of different channels never share a PE. The chain
    of 16 functors at 0.06 cores each used to be widened and then cut into PEs that each
    held half of every channel (measured: 0.57 of the predicted rate). The physical
    graph's channels reach GreedyFuse as a legality rule, so no plan mixes them. On 2
    cores the width is pinned: there FATM now keeps the unwidened 2-PE pipeline, planned
    as fast without a split and a merge (its MaxFrac ladder is compared with the widened
    one's for declared regions too, issue 27 item 6); on 4 cores widening still pays."""
    from spadeopt.plan.fission import physical_graph

    graph, _ = api.load_graph("apps/chain.py", {"n": "16", "work": "100"})
    auto = fuse_auto(graph, _profile(graph, 0.06, 0.02, 10_000), COMM, nodes=1, cores=cores, rate="max",
                     widths={"ops": 2} if cores == 2 else None)
    (region,) = auto.plan.regions
    assert region.width > 1  # channel by channel
    (channels,) = physical_graph(graph, auto.plan.regions).annotations.channels
    for pe in auto.plan.pes:
        assert sum(1 for chan in channels if set(chan) & set(pe.operators)) <= 1, pe.operators
    check_plan(auto.plan, graph)
