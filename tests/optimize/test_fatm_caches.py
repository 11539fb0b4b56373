"""FATM's speed-ups change no answer (issue 12, optimizer speed): the rescaled problems of
the rate search, the per-call cache of physical graphs, the width search's plans reused by
the MaxFrac ladder, GreedyFuse's one-pass sums and the channel copies shared by width
vectors give what rebuilding everything gives, bit for bit."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spadeopt import api
from spadeopt.bench.fatm_speed import RATE, chain_app
from spadeopt.errors import UsageError
from spadeopt.optimize import fatm_search, placement
from spadeopt.optimize.cost import metrics, objective
from spadeopt.optimize.fatm import OperatorProfile, fuse_auto, problem_for
from spadeopt.optimize.greedy_fuse import MERGABLE_RULES, absorb_leftovers, greedy_fuse
from spadeopt.optimize.legality import initial_partitions
from spadeopt.optimize.problem import FusionProblem, LinearCommModel, Link
from spadeopt.optimize.rate import scale
from spadeopt.optimize.result import saturation_warnings
from spadeopt.optimize.widths import physical_profile
from spadeopt.plan.fission import physical_graph

from .opt_strategies import problems

COMM = LinearCommModel(2e-6, 1e-9)
PROPS = settings(max_examples=200, deadline=None, derandomize=True)


def _bench_case(n: int):
    g = chain_app(n)
    load = {op.name: 0.002 + (i % 5) * 0.003 for i, op in enumerate(g.operators)}
    prof = OperatorProfile(g.name, g.fingerprint, load, tuple((s.src.op, s.dst.op, RATE, 60.0) for s in g.streams),
                           RATE)
    return g, prof


def _peer_case():
    graph, _ = api.load_graph("apps/peer.py", {"tuples": "1000", "n": "4"})
    members = {o for _, ops, _ in graph.annotations.parallel for o in ops}
    load = {op.name: (0.2 if op.name in members and not op.is_source else 0.01) for op in graph.operators}
    links = tuple((s.src.op, s.dst.op, 10_000.0, 60.0) for s in graph.streams)
    return graph, OperatorProfile(graph.name, graph.fingerprint, load, links, 10_000.0)


def _doc(auto) -> str:
    return json.dumps({"plan": auto.plan.to_json(), "explain": auto.explain}, sort_keys=True, default=repr)


def _without_caches(monkeypatch) -> None:
    """Every problem rebuilt by problem_for, every physical graph and channel copy rebuilt,
    no plan reused by the ladder, PE loads recomputed by pe_graph: FATM as it was before
    the speed-ups."""

    def fresh_problem(self, k):
        return problem_for(self.graph, scale(self.prof, k), self.comm, self.max_frac, self.min_util)

    def fresh_entry(self, regions):
        return fatm_search.PhysicalEntry(physical_graph(self.graph, regions),
                                          physical_profile(self.graph, self.prof, regions))

    from spadeopt.optimize import widths
    from spadeopt.plan import fission

    def fresh_rewritten(graph, regions):  # every prefix of a vector's regions rewritten anew
        for r in regions:
            graph = fission.rewrite_region(graph, r)
        return graph

    monkeypatch.setattr(fission, "channel_copies", lambda graph: None)  # every channel copy made anew
    monkeypatch.setattr(fission, "rewritten", fresh_rewritten)
    monkeypatch.setattr(widths, "rewritten", fresh_rewritten)
    monkeypatch.setattr(fatm_search.ScaledProblems, "__call__", fresh_problem)
    monkeypatch.setattr(fatm_search.PhysicalCache, "get", fresh_entry)
    monkeypatch.setattr(fatm_search.WidthScorer, "plans", property(lambda self: {}, lambda self, value: None),
                        raising=False)
    monkeypatch.setattr(fatm_search, "pe_graph", lambda parts, problem, ids, comp=(): placement.pe_graph(parts, problem, ids))


@pytest.mark.parametrize("case, cores", [("bench", 2), pytest.param("bench", 4, marks=pytest.mark.slow),  # ~45 s
                                         ("peer", 2), ("peer", 4)])
def test_fatm_plans_the_same_with_and_without_its_caches(case, cores, monkeypatch):
    graph, prof = _bench_case(40) if case == "bench" else _peer_case()
    cached = fuse_auto(graph, prof, COMM, nodes=1, cores=cores, rate="max")
    assert cached.explain["fission"]["search"] is not None  # the width search ran, so did the ladder
    with monkeypatch.context() as m:
        _without_caches(m)
        fresh = fuse_auto(graph, prof, COMM, nodes=1, cores=cores, rate="max")
    assert _doc(cached) == _doc(fresh)
    assert cached.result == fresh.result


@PROPS
@given(problems(), st.floats(1e-6, 1e6))
def test_a_rescaled_problem_equals_the_problem_built_at_that_rate(problem: FusionProblem, k: float):
    load = {op: u * k for op, u in problem.load.items()}
    links = tuple(Link(lk.src, lk.dst, lk.rate * k, lk.size) for lk in problem.links)
    built = FusionProblem.build(problem.operators, load, links, problem.comm, max_frac=problem.max_frac,
                                min_util=problem.min_util, colocate=problem.colocate, exlocate=problem.exlocate,
                                unfusable=problem.unfusable)
    assert problem.rescaled(load, links) == built


def test_a_rescaled_problem_that_overflows_is_refused_as_build_refuses_it():
    p = FusionProblem.build(["a", "b"], {"a": 1e300, "b": 0.1}, [("a", "b", 1e300, 10.0)], COMM)
    load = {"a": 1e300 * 1e10, "b": 0.1}
    links = (Link("a", "b", 1e300 * 1e10, 10.0),)
    with pytest.raises(UsageError) as built:
        FusionProblem.build(["a", "b"], load, links, COMM)
    with pytest.raises(UsageError) as rescaled:
        p.rescaled(load, links)
    assert str(rescaled.value) == str(built.value) and "load of operator 'a'" in str(built.value)


def test_the_rate_search_problems_equal_problem_for_of_the_scaled_profile():
    graph, prof = _peer_case()
    problems_at = fatm_search.ScaledProblems(graph, prof, COMM, 0.5, 0.95, {})
    for k in (3.0, 0.25, 1e-3, 7.5):
        assert problems_at(k) == problem_for(graph, scale(prof, k), COMM, 0.5, 0.95)


def test_the_rate_search_problems_from_a_base_equal_problem_for_of_the_scaled_profile():
    """A vector's rate searches and symmetric plans rescale its prediction problem (MaxFrac
    and MinUtil 1, factor 1) instead of building their first problem."""
    graph, prof = _peer_case()
    base = problem_for(graph, prof, COMM, 1.0, 1.0)
    for max_frac, min_util in ((0.5, 0.95), (1.0, 1.0), (0.3, 0.5)):
        problems_at = fatm_search.ScaledProblems(graph, prof, COMM, max_frac, min_util, {}, base)
        for k in (3.0, 0.25, 1e-3, 7.5):
            assert problems_at(k) == problem_for(graph, scale(prof, k), COMM, max_frac, min_util)


def test_a_rescaled_problem_with_a_bad_max_frac_is_refused_as_build_refuses_it():
    p = FusionProblem.build(["a", "b"], {"a": 0.1, "b": 0.1}, [("a", "b", 10.0, 10.0)], COMM)
    with pytest.raises(UsageError) as built:
        FusionProblem.build(["a", "b"], p.load, p.links, COMM, max_frac=-1.0, min_util=2.0)
    with pytest.raises(UsageError) as rescaled:
        p.rescaled(p.load, p.links, -1.0, 2.0)
    assert str(rescaled.value) == str(built.value) and "max_frac" in str(built.value)


@PROPS
@given(problems(), st.sampled_from(MERGABLE_RULES))
def test_greedy_one_pass_sums_are_the_reference_functions_bit_for_bit(problem: FusionProblem, rule: str):
    r = greedy_fuse(problem, mergable_rule=rule)
    assert r.objective == objective(r.partitions, problem)
    assert r.objective_initial == objective(initial_partitions(problem), problem)
    assert r.comp_loads == tuple(metrics(frozenset(p), problem).comp_load for p in r.partitions)
    assert r.warnings == saturation_warnings(r.partitions, problem)
    both = absorb_leftovers(problem, greedy_fuse(problem))
    assert both.comp_loads == tuple(metrics(frozenset(p), problem).comp_load for p in both.partitions)
    assert all(math.isfinite(c) for c in both.comp_loads)


@PROPS
@given(problems())
def test_greedy_then_absorb_is_absorb_leftovers_of_greedy_fuse(problem: FusionProblem):
    from spadeopt.optimize.greedy_fuse import greedy_then_absorb

    want = absorb_leftovers(problem, greedy_fuse(problem))
    got = greedy_then_absorb(problem)
    assert got == want and got.comp_loads == want.comp_loads
    quiet = greedy_then_absorb(problem, steps=False)  # the channel quotient's: no merge steps, same PEs
    assert quiet.partitions == want.partitions and quiet.comp_loads == want.comp_loads and quiet.steps == ()


@pytest.mark.parametrize("seed", range(6))
def test_greedy_then_absorb_with_channels_and_exchange_sides(seed: int):
    """Phase 2 starts from phase 1's exclusion groups and channel maps: the same result as
    absorb_leftovers, on problems with channel rules and a key exchange's sides."""
    import random

    from spadeopt.optimize.greedy_fuse import greedy_then_absorb

    rnd = random.Random(seed)
    w, names = 3, ["s", "r__split", "r__merge", "k"]
    chans = [[f"{o}__{c}" for o in "abc"] for c in range(w)]
    ops = names + [op for ch in chans for op in ch]
    links = [("s", "r__split", 90.0, 8.0), ("r__merge", "k", 90.0, 8.0)]
    for c in range(w):
        links += [("r__split", f"a__{c}", 30.0, 8.0), (f"a__{c}", f"b__{c}", 30.0, 8.0),
                  (f"b__{c}", f"c__{c}", 20.0 + c, 8.0), (f"c__{c}", "r__merge", 30.0, 8.0)]
    load = {op: rnd.uniform(0.01, 0.4) for op in ops}
    problem = FusionProblem.build(ops, load, links, COMM, max_frac=rnd.choice([0.5, 1.0]), min_util=0.9,
                                  channels=[chans], exlocate=[["s", "k"]] if seed % 2 else [],
                                  apart=[([f"a__{c}" for c in range(w)], [f"c__{c}" for c in range(w)])])
    want = absorb_leftovers(problem, greedy_fuse(problem))
    got = greedy_then_absorb(problem)
    assert got == want and got.comp_loads == want.comp_loads


def test_fatm_pauses_the_cyclic_gc_and_restores_it_even_on_error():
    import gc

    from spadeopt.optimize import fatm

    graph, prof = _bench_case(20)
    assert gc.isenabled()
    seen = []
    real = fatm._fuse_auto

    def spy(*args):
        seen.append(gc.isenabled())
        return real(*args)

    fatm._fuse_auto, saved = spy, fatm._fuse_auto
    try:
        fuse_auto(graph, prof, COMM, nodes=1, cores=2, rate="max")
        assert seen == [False] and gc.isenabled()
        with pytest.raises(UsageError):
            fuse_auto(graph, prof, COMM, nodes=1, cores=2, rate="fast")
        assert gc.isenabled()
        gc.disable()
        fuse_auto(graph, prof, COMM, nodes=1, cores=2, rate="max")
        assert not gc.isenabled()  # left as it was
    finally:
        gc.enable()
        fatm._fuse_auto = saved
