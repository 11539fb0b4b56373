"""The planning rate (``--rate``) and FATM's second phase (absorbing GreedyFuse's leftovers)."""

from __future__ import annotations

import pytest

from spadeopt import api
from spadeopt.errors import OptimizeError, UsageError
from spadeopt.optimize.cost import metrics
from spadeopt.optimize.fatm import OperatorProfile, fuse_auto, problem_for
from spadeopt.optimize.greedy_fuse import absorb_leftovers, greedy_fuse
from spadeopt.optimize.problem import FusionProblem, LinearCommModel
from spadeopt.optimize.rate import parse_rate, scale

COMM = LinearCommModel(per_tuple_s=1e-5)


def _chain(loads, rates, **kw) -> FusionProblem:
    names = [chr(ord("a") + i) for i in range(len(loads))]
    links = [(names[i], names[i + 1], r, 100.0) for i, r in enumerate(rates)]
    return FusionProblem.build(names, dict(zip(names, loads, strict=True)), links, COMM, **kw)


@pytest.mark.parametrize("text,want", [("max", "max"), ("PROFILED", "profiled"), ("1500", 1500.0),
                                       ("2_000.5", 2000.5), (300, 300.0)])
def test_parse_rate_accepts(text, want):
    assert parse_rate(text) == want


@pytest.mark.parametrize("text", ["fast", "0", "-3", "nan", "inf", True])
def test_parse_rate_refuses_with_the_option_named(text):
    with pytest.raises(UsageError, match="--rate"):
        parse_rate(text)


def test_scale_multiplies_loads_link_rates_and_source_rate_but_not_sizes():
    p = OperatorProfile("x", "f", {"a": 0.1, "b": 0.2}, (("a", "b", 1000.0, 64.0),), 1000.0)
    s = scale(p, 2.5)
    assert s.load == {"a": 0.25, "b": 0.5} and s.links == (("a", "b", 2500.0, 64.0),)
    assert s.source_rate == 2500.0 and p.load == {"a": 0.1, "b": 0.2}


def test_absorb_folds_a_stranded_underutilized_pe_into_its_full_neighbour():
    # a alone is at EffectiveUtil 0.968 >= MinUtil, c alone at 0.995: GreedyFuse merges
    # nothing, stranding b (util ~0.5), which spends as much CPU sending as working.
    p = _chain([0.3, 0.01, 0.02], [1000.0, 10.0])
    first = greedy_fuse(p)
    assert first.partitions == (("a",), ("b",), ("c",))
    assert metrics(frozenset("b"), p).underutilized
    after = absorb_leftovers(p, first)
    assert after.partitions == (("a", "b"), ("c",)), "b joins a (the heavier link); c is not a leftover"
    assert after.objective < first.objective and after.objective_initial == first.objective_initial
    assert len(after.steps) == len(first.steps) + 1


def test_absorb_never_exceeds_max_frac():
    p = _chain([0.45, 0.1, 0.02], [1000.0, 10.0])
    after = absorb_leftovers(p, greedy_fuse(p))
    assert all(metrics(frozenset(part), p).comp_load <= p.max_frac for part in after.partitions)
    assert ("a", "b") not in after.partitions


def test_absorb_folds_a_pe_with_no_load_over_a_zero_rate_link():
    p = FusionProblem.build(["a", "z"], {"a": 0.3, "z": 0.0}, [("a", "z", 0.0, 0.0)], COMM)
    assert greedy_fuse(p).partitions == (("a",), ("z",)), "z's EffectiveUtil is 1 by definition"
    assert absorb_leftovers(p, greedy_fuse(p)).partitions == (("a", "z"),)


def _chain_profile(work_us: float, n: int = 6, rate: float = 10_000.0):
    graph, _ = api.load_graph("apps/chain.py", {"n": str(n)})
    load = {op.name: work_us * 1e-6 * rate for op in graph.operators}
    links = tuple((s.src.op, s.dst.op, rate, 100.0) for s in graph.streams)
    return graph, OperatorProfile(graph.name, graph.fingerprint, load, links, rate)


@pytest.mark.parametrize("nodes,cores", [(1, 2), (2, 1), (1, 4)])
def test_max_rate_is_the_highest_rate_that_fits(nodes, cores):
    graph, prof = _chain_profile(work_us=20.0)
    comm = LinearCommModel(per_tuple_s=2e-6)
    auto = fuse_auto(graph, prof, comm, nodes, cores, rate="max", fission=False)  # the logical graph
    planned = auto.explain["rate"]["planned"]
    assert auto.explain["rate"]["mode"] == "max" and planned > 0
    # the plan fits at the planned rate: no PE above the MaxFrac it was fused with (the
    # user's 0.5 or, under --rate max, a larger one of the ladder that predicts better),
    # no node above its cores
    mf = auto.explain["max_frac"]
    assert mf in [t["max_frac"] for t in auto.explain["max_frac_search"]]
    problem = problem_for(graph, scale(prof, planned / prof.source_rate), comm, mf, 0.95)
    for pe in auto.plan.pes:
        assert metrics(frozenset(pe.operators), problem).comp_load <= mf * (1 + 1e-9)
    assert max(auto.explain["node_load"]) <= cores * (1 + 1e-9)
    # ... and 1 % more does not fit
    with pytest.raises(OptimizeError):
        over = fuse_auto(graph, prof, comm, nodes, cores, rate=planned * 1.01, fission=False, max_frac=mf)
        if over.result.warnings:  # an operator alone above MaxFrac
            raise OptimizeError(over.result.warnings[0])


def test_more_cores_plan_a_higher_rate_and_a_profiled_rate_plans_as_measured():
    graph, prof = _chain_profile(work_us=20.0)
    comm = LinearCommModel(per_tuple_s=2e-6)
    r2 = fuse_auto(graph, prof, comm, 1, 2, rate="max").explain["rate"]["planned"]
    r4 = fuse_auto(graph, prof, comm, 1, 4, rate="max").explain["rate"]["planned"]
    assert r4 > r2
    measured = fuse_auto(graph, prof, comm, 1, 2, rate="profiled").explain["rate"]
    assert measured["planned"] == prof.source_rate and measured["factor"] == 1.0


def test_max_rate_needs_a_source_rate():
    graph, prof = _chain_profile(work_us=20.0)
    silent = OperatorProfile(prof.app, prof.fingerprint, prof.load, prof.links, 0.0)
    with pytest.raises(OptimizeError, match="no tuples"):
        fuse_auto(graph, silent, COMM, 1, 2, rate="max")


def test_streams_that_carried_nothing_still_connect_their_operators():
    graph, prof = _chain_profile(work_us=20.0)
    last = graph.streams[-1]
    partial = OperatorProfile(prof.app, prof.fingerprint, prof.load,
                              tuple(lk for lk in prof.links if (lk[0], lk[1]) != (last.src.op, last.dst.op)),
                              prof.source_rate)
    problem = problem_for(graph, partial, COMM, 0.5, 0.95)
    zero = [lk for lk in problem.links if (lk.src, lk.dst) == (last.src.op, last.dst.op)]
    assert len(zero) == 1 and zero[0].rate == 0.0
