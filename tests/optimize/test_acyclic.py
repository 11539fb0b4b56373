"""The ``acyclic`` legality rule (record 074): a build that takes aligned checkpoints needs
an acyclic graph of PEs, and fusing two operators joined through a third in another PE
closes a cycle the operator graph does not have (FATM on bargain_logical: pe0 -> pe1 -> pe0)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from spadeopt import api
from spadeopt.errors import OptimizeError, UsageError
from spadeopt.optimize.fatm import fuse_auto
from spadeopt.optimize.greedy_fuse import (
    absorb_leftovers,
    greedy_fuse,
    greedy_then_absorb,
    why_not_merged,
)
from spadeopt.optimize.legality import PeGraph, fusion_legal, initial_partitions, pe_cycle_of
from spadeopt.optimize.problem import FusionProblem, LinearCommModel
from spadeopt.optimize.symmetric import legal
from spadeopt.plan.fission import physical_graph
from spadeopt.refine.comm import CommCost
from spadeopt.refine.profile import Profile

HERE = Path(__file__).parent
PROFILE = HERE / "data" / "bargain_logical_profile.json"  # a 2-core FALL profiling run, 200 k tuples
CALIBRATION = Path("profiles/calibration/vm.json")


def _triangle(acyclic: bool) -> FusionProblem:
    """a -> x -> b and a -> b, the a-b link the heaviest: GreedyFuse's first merge is {a,b},
    and x, too heavy to join them under MaxFrac, is left in a PE between them."""
    return FusionProblem.build(["a", "b", "x"], {"a": 0.1, "b": 0.25, "x": 0.2},
                               [("a", "x", 1000.0, 8.0), ("x", "b", 1000.0, 8.0), ("a", "b", 10_000.0, 8.0)],
                               LinearCommModel(1e-5), acyclic=acyclic)


def test_unconstrained_greedy_fuse_makes_a_pe_cycle_and_the_rule_prevents_it():
    free = greedy_then_absorb(_triangle(False))
    assert free.partitions == (("a", "b"), ("x",))
    assert pe_cycle_of(free.partitions, _triangle(False)) is not None
    bound = greedy_then_absorb(_triangle(True))
    assert bound.partitions == (("a", "x"), ("b",))
    assert pe_cycle_of(bound.partitions, _triangle(True)) is None
    assert greedy_fuse(_triangle(True)).partitions == bound.partitions
    # why the unconstrained result is illegal, in words
    verdict = fusion_legal(frozenset("a"), frozenset("b"), _triangle(True), [frozenset("x")])
    assert not verdict.ok and verdict.reason == ("would close a cycle of PEs {a}->{x}->{b}: an aligned checkpoint "
                                                 "barrier cannot cross a PE cycle")
    assert fusion_legal(frozenset("a"), frozenset("b"), _triangle(False)).ok


def test_absorb_phase_and_a_given_start_keep_the_rule():
    p = _triangle(True)
    start = greedy_fuse(p)
    assert pe_cycle_of(absorb_leftovers(p, start).partitions, p) is None
    got = greedy_fuse(p, mergable_rule="absorb", start=[["a"], ["b"], ["x"]])
    assert pe_cycle_of(got.partitions, p) is None and got.partitions != (("a", "b"), ("x",))


def test_why_not_merged_names_the_cycle():
    p = FusionProblem.build(["a", "b", "x"], {"a": 0.1, "b": 0.1, "x": 0.45},
                            [("a", "x", 1000.0, 8.0), ("x", "b", 1000.0, 8.0), ("a", "b", 10_000.0, 8.0)],
                            LinearCommModel(1e-5), acyclic=True)
    result = greedy_then_absorb(p)
    assert result.partitions == (("a",), ("b",), ("x",))  # x fits with neither; a and b may not merge
    why = why_not_merged(result, p)[(("a",), ("b",))]
    assert "would close a cycle of PEs {a}->{x}->{b}" in why


@pytest.mark.parametrize("seed", range(40))
def test_random_dags_never_fuse_into_a_pe_cycle(seed):
    rng = random.Random(seed)
    n = rng.randint(4, 14)
    ops = [f"o{i:02d}" for i in range(n)]
    links = [(ops[i], ops[j], rng.choice((10.0, 1000.0, 20_000.0)), 16.0)
             for i in range(n) for j in range(i + 1, n) if rng.random() < 0.3]
    load = {o: rng.uniform(0.01, 0.3) for o in ops}
    p = FusionProblem.build(ops, load, links, LinearCommModel(1e-5), acyclic=True)
    for result in (greedy_fuse(p), greedy_then_absorb(p), greedy_fuse(p, mergable_rule="either")):
        assert pe_cycle_of(result.partitions, p) is None, (seed, result.partitions)
    parts = set(initial_partitions(p))
    for step in greedy_then_absorb(p).steps:  # every merge was legal against the partitions of its time
        assert fusion_legal(step.left, step.right, p, parts).ok, (seed, step)
        parts -= {step.left, step.right}
        parts.add(step.left | step.right)


def test_a_loop_of_the_start_joins_into_one_pe_or_is_refused_naming_its_annotation():
    links = [("s", "a", 100.0, 8.0), ("a", "b", 100.0, 8.0), ("b", "c", 100.0, 8.0), ("c", "a", 10.0, 8.0),
             ("c", "k", 100.0, 8.0)]
    load = dict.fromkeys("sabck", 0.01)
    loop = FusionProblem.build("sabck", load, links, LinearCommModel(1e-6), acyclic=True)
    assert frozenset("abc") in initial_partitions(loop)
    free = FusionProblem.build("sabck", load, links, LinearCommModel(1e-6))
    assert frozenset("abc") not in initial_partitions(free)  # without checkpoints nothing changes
    split = FusionProblem.build("sabck", load, links, LinearCommModel(1e-6), unfusable=[{"c", "a"}], acyclic=True)
    with pytest.raises(OptimizeError, match=r"loop through \{a,b,c\} must sit in one PE, but the unfusable "
                                            r"annotation \{a,c\} keeps"):
        initial_partitions(split)


def test_an_unfusable_feedback_loop_cannot_be_planned_for_checkpoints():
    graph, _ = api.load_graph("tests/apps/loop.py")
    links = tuple((s.src.op, s.dst.op, 1000.0, 100.0) for s in graph.streams)
    from spadeopt.optimize.fatm import OperatorProfile

    prof = OperatorProfile(graph.name, graph.fingerprint, {op.name: 0.05 for op in graph.operators}, links, 1000.0)
    fuse_auto(graph, prof, LinearCommModel(2e-6), nodes=1, cores=2)  # without checkpoints: planned, as before
    with pytest.raises(OptimizeError, match="no plan of this app can take aligned checkpoints"):
        fuse_auto(graph, prof, LinearCommModel(2e-6), nodes=1, cores=2, acyclic=True)


def test_symmetric_family_member_around_the_channels_is_illegal_with_checkpoints():
    links = [("s", "c0", 1.0, 8.0), ("s", "c1", 1.0, 8.0), ("c0", "m", 1.0, 8.0), ("c1", "m", 1.0, 8.0)]
    groups = [["s", "m"], ["c0"], ["c1"]]  # the split and the merge in one PE: FALL's shape
    ops = ["s", "c0", "c1", "m"]
    assert legal(groups, FusionProblem.build(ops, dict.fromkeys(ops, 0.1), links, LinearCommModel(1e-6)))
    assert not legal(groups, FusionProblem.build(ops, dict.fromkeys(ops, 0.1), links, LinearCommModel(1e-6),
                                                 acyclic=True))


def test_the_flag_is_validated_and_kept_by_rescaled():
    p = _triangle(True)
    assert p.rescaled(dict(p.load), p.links).acyclic and p.rescaled({**p.load, "a": 1}, p.links).acyclic
    with pytest.raises(UsageError, match="acyclic must be a bool"):
        FusionProblem(p.operators, p.load, p.links, p.comm, acyclic=1)  # type: ignore[arg-type]


def _plan(acyclic: bool):
    prof = Profile.load_file(PROFILE)
    graph, _ = api.load_graph("apps/bargain_logical.py", {k: str(v) for k, v in prof.params.items()})
    opprof, _ = api._profile_for_run("apps/bargain_logical.py", prof, graph)
    score = json.loads(CALIBRATION.read_text())["cpu_score"]["value"]  # no MIPS scaling: the same numbers anywhere
    comm = CommCost.for_this_host(CALIBRATION, score)
    auto = fuse_auto(graph, opprof, comm, 1, 2, rate="max", model=api.perf_model(CALIBRATION, comm.scale),
                     acyclic=acyclic)
    phys = physical_graph(graph, auto.plan.regions)
    names = [op.name for op in phys.operators]
    shape = FusionProblem.build(names, dict.fromkeys(names, 0.0),
                                [(s.src.op, s.dst.op, 1.0, 1.0) for s in phys.streams], LinearCommModel(0.0))
    return auto, pe_cycle_of([pe.operators for pe in auto.plan.pes], shape)


def test_fatm_on_bargain_logical_plans_a_pe_cycle_without_checkpoints_and_none_with_them():
    auto, cycle = _plan(False)
    assert cycle is not None, [pe.operators for pe in auto.plan.pes]  # the 2-PE plan of session 47
    auto, cycle = _plan(True)
    assert cycle is None and len(auto.plan.pes) >= 2, [pe.operators for pe in auto.plan.pes]
    assert auto.explain["acyclic"] is True


@pytest.mark.parametrize("seed", range(30))
def test_pe_graph_keeps_a_topological_order_and_answers_as_an_unbounded_search(seed):
    rng = random.Random(seed)
    n = rng.randint(5, 30)
    ops = [f"o{i:02d}" for i in range(n)]
    links = [(ops[i], ops[j], 1.0, 8.0) for i in range(n) for j in range(i + 1, n) if rng.random() < 0.2]
    g = PeGraph(FusionProblem.build(ops, dict.fromkeys(ops, 0.1), links, LinearCommModel(1e-6), acyclic=True),
                {i: [op] for i, op in enumerate(ops)})
    new = n
    for _ in range(4 * n):
        pairs = sorted((x, y) for x, ys in g.succ.items() for y in ys)
        if not pairs:
            break
        a, b = rng.choice(pairs)
        brute = g._reach(a, b, None) or g._reach(b, a, None)
        assert g.closes(a, b) == brute, (seed, a, b)
        if brute:
            continue
        g.merge(a, b, new)
        new += 1
        assert g.pos is not None and set(g.pos) == set(g.succ)
        assert all(g.pos[x] < g.pos[y] for x, ys in g.succ.items() for y in ys), seed
