"""GreedyFuse: hand-computed cases (digest F19 a–g), explain, and property tests."""

from __future__ import annotations

import random
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spadeopt.errors import OptimizeError, UsageError
from spadeopt.optimize.cost import (
    REL_TOL,
    connected,
    effective_util,
    exceeds_max_frac,
    metrics,
    rate_between,
)
from spadeopt.optimize.greedy_fuse import greedy_fuse, why_not_merged
from spadeopt.optimize.legality import exclusion_groups, fusion_legal
from spadeopt.optimize.problem import FusionProblem, LinearCommModel
from spadeopt.optimize.synthetic import random_app_problem

from .opt_strategies import forced, naive_greedy, problems, shuffled

COMM = LinearCommModel(per_tuple_s=1e-5)  # 1000 tuples/s cost 0.01 CPU per PE side
PROPS = settings(max_examples=300, deadline=None, derandomize=True)


def chain(loads: list[float], rates: list[float], **kwargs: object) -> FusionProblem:
    names = [chr(ord("a") + i) for i in range(len(loads))]
    links = [(names[i], names[i + 1], r, 100.0) for i, r in enumerate(rates)]
    load = dict(zip(names, loads, strict=True))
    return FusionProblem.build(names, load, links, COMM, **kwargs)  # type: ignore[arg-type]


# --- hand-computed cases --------------------------------------------------------------


def test_chain_of_near_free_forwarders_becomes_one_pe() -> None:
    r = greedy_fuse(chain([0.01] * 5, [1000.0] * 4))
    assert r.partitions == (("a", "b", "c", "d", "e"),)
    # All benefits tie at 2000; the tie-break grows the PE from 'a'.
    assert [(sorted(s.left), sorted(s.right)) for s in r.steps] == [
        (["a"], ["b"]),
        (["a", "b"], ["c"]),
        (["a", "b", "c"], ["d"]),
        (["a", "b", "c", "d"], ["e"]),
    ]
    assert [s.objective for s in r.steps] == [6000.0, 4000.0, 2000.0, 0.0]
    assert r.objective_initial == 8000.0 and r.objective == 0.0
    assert r.warnings == ()


def test_max_frac_stops_the_chain() -> None:
    # u = 0.1 each, MaxFrac 0.35, MinUtil 0.99: {a,b,c} costs 0.31 (util 0.968); adding d
    # would cost 0.41.
    p = chain([0.1] * 6, [1000.0] * 5, max_frac=0.35, min_util=0.99)
    r = greedy_fuse(p)
    assert r.partitions == (("a", "b", "c"), ("d", "e", "f"))
    assert why_not_merged(r, p) == {
        (("a", "b", "c"), ("d", "e", "f")): "merged load 0.60 would exceed MaxFrac 0.35"
    }


def test_min_util_stops_the_chain_before_max_frac() -> None:
    # Same chain at MinUtil 0.95: {a,b} costs 0.21, util 0.952, and stops growing.
    p = chain([0.1] * 6, [1000.0] * 5, max_frac=0.35)
    r = greedy_fuse(p)
    assert r.partitions == (("a", "b"), ("c", "d", "e"), ("f",))
    reasons = why_not_merged(r, p)
    assert reasons[(("a", "b"), ("c", "d", "e"))] == (
        "merged load 0.51 would exceed MaxFrac 0.35; "
        "PE {a,b} has EffectiveUtil 0.952 ≥ MinUtil 0.950"
    )  # {c,d,e} costs 0.32, util 0.9375: still underutilized


def test_heavy_operators_stay_apart() -> None:
    r = greedy_fuse(chain([0.45, 0.45, 0.45], [1000.0, 1000.0]))
    assert r.partitions == (("a",), ("b",), ("c",))
    assert r.steps == ()
    assert why_not_merged(r, chain([0.45, 0.45, 0.45], [1000.0, 1000.0]))[
        (("a",), ("b",))
    ].startswith("merged load 0.91 would exceed MaxFrac 0.50")


def test_partition_at_min_util_is_not_merged_again() -> None:
    # a is busy (util 0.9999), b is a light sink: 'both' keeps them apart, 'either' fuses.
    p = FusionProblem.build(["a", "b"], {"a": 0.4, "b": 0.001}, [("a", "b", 10.0, 8.0)], COMM)
    assert effective_util(frozenset({"a"}), p) >= 0.95
    assert greedy_fuse(p).partitions == (("a",), ("b",))
    assert why_not_merged(greedy_fuse(p), p) == {
        (("a",), ("b",)): "PE {a} has EffectiveUtil 1.00 ≥ MinUtil 0.95"
    }
    either = greedy_fuse(p, mergable_rule="either")
    assert either.partitions == (("a", "b"),)
    assert either.mergable_rule == "either"


def test_merged_partition_that_reaches_min_util_stops_growing() -> None:
    # b->c carries 1000/s and a->b 10/s; {b,c} reaches util 0.995 and does not take a.
    p = FusionProblem.build(
        ["a", "b", "c"],
        {"a": 0.01, "b": 0.01, "c": 0.01},
        [("a", "b", 10.0, 8.0), ("b", "c", 1000.0, 8.0)],
        COMM,
    )
    r = greedy_fuse(p)
    assert r.partitions == (("a",), ("b", "c"))
    assert effective_util(frozenset({"b", "c"}), p) >= 0.95


def test_disconnected_partitions_never_merge() -> None:
    p = FusionProblem.build(
        list("abcde"),
        dict.fromkeys("abcde", 0.01),
        [("a", "b", 1000.0, 8.0), ("c", "d", 1000.0, 8.0)],
        COMM,
    )
    assert greedy_fuse(p).partitions == (("a", "b"), ("c", "d"), ("e",))


def test_merge_lowers_objective_by_twice_the_rate_between() -> None:
    # Three streams between a and b (two a->b, one b->a), an export from b.
    p = FusionProblem.build(
        ["a", "b"],
        {"a": 0.01, "b": 0.01},
        [
            ("a", "b", 100.0, 8.0),
            ("a", "b", 200.0, 8.0),
            ("b", "a", 50.0, 8.0),
            ("b", None, 7.0, 8.0),
        ],
        COMM,
    )
    r = greedy_fuse(p)
    assert r.objective_initial == 2 * 350.0 + 7.0
    assert [s.benefit for s in r.steps] == [700.0]
    assert r.objective == r.steps[-1].objective == 7.0


def test_larger_benefit_wins_over_name_order() -> None:
    # c-d carries more than a-b: it is merged first even though 'a' sorts first.
    p = chain([0.01] * 4, [100.0, 100.0, 5000.0], max_frac=0.03)
    r = greedy_fuse(p)
    assert sorted(r.steps[0].left | r.steps[0].right) == ["c", "d"]
    assert r.partitions == (("a", "b"), ("c", "d"))


def test_no_merge_makes_a_partition_saturated() -> None:
    p = chain([0.2, 0.2, 0.2, 0.2], [2000.0, 2000.0, 2000.0], max_frac=0.45)
    r = greedy_fuse(p)
    assert r.partitions == (("a", "b"), ("c", "d"))
    assert all(metrics(frozenset(x), p).comp_load <= 0.45 for x in r.partitions)


def test_saturated_operator_stays_alone_with_a_warning() -> None:
    p = chain([0.7, 0.01, 0.01], [1000.0, 1000.0])
    r = greedy_fuse(p)
    assert r.partitions == (("a",), ("b", "c"))
    assert r.warnings == (
        "operator a alone needs CompLoad 0.71 > MaxFrac 0.50; it stays a singleton PE",
    )


def test_saturated_operator_can_be_rescued_by_a_merge() -> None:
    # a: u 0.45 + comm 0.1 = 0.55 > 0.5 alone; fused with its light neighbour b the
    # heavy stream becomes internal and {a,b} costs 0.46.
    p = chain([0.45, 0.01], [10_000.0])
    r = greedy_fuse(p)
    assert r.partitions == (("a", "b"),)
    assert r.warnings == ()


def test_exlocation_and_unfusable_are_respected_and_explained() -> None:
    p = chain([0.01] * 4, [1000.0] * 3, exlocate=[{"a", "b"}], unfusable=[{"c", "d"}])
    r = greedy_fuse(p)
    assert r.partitions == (("a",), ("b", "c"), ("d",))
    reasons = why_not_merged(r, p)
    assert reasons[(("a",), ("b", "c"))] == "exlocation annotation {a,b}"
    assert reasons[(("b", "c"), ("d",))] == "unfusable annotation {c,d}"


def test_colocation_is_premerged_even_without_a_link() -> None:
    p = chain([0.3, 0.01, 0.3], [1000.0, 1000.0], colocate=[{"a", "c"}])
    r = greedy_fuse(p)
    assert r.partitions == (("a", "c"), ("b",))
    assert r.warnings == (
        "colocated operators {a,c} together need CompLoad 0.62 > MaxFrac 0.50; "
        "they stay one PE as annotated",
    )


def test_contradictory_annotations_raise() -> None:
    p = chain([0.01] * 3, [1.0, 1.0], colocate=[{"a", "c"}], exlocate=[{"a", "c"}])
    with pytest.raises(OptimizeError, match="conflicts with exlocation annotation"):
        greedy_fuse(p)


def test_unknown_rule_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="mergable_rule must be one of"):
        greedy_fuse(chain([0.1], []), mergable_rule="any")


def test_zero_rate_link_still_connects() -> None:
    p = FusionProblem.build(["a", "b"], {"a": 0.0, "b": 0.0}, [("a", "b", 0.0, 8.0)], COMM)
    # CompLoad 0 -> EffectiveUtil 1.0: not underutilized, so nothing to do.
    assert greedy_fuse(p).partitions == (("a",), ("b",))
    p = FusionProblem.build(
        ["a", "b"], {"a": 0.1, "b": 0.1}, [("a", "b", 0.0, 8.0), ("a", None, 9000.0, 8.0)], COMM
    )
    # a is underutilized (export); b has no traffic -> util 1.0; no merge under 'both'.
    assert greedy_fuse(p).partitions == (("a",), ("b",))
    assert greedy_fuse(p, mergable_rule="either").steps[0].benefit == 0.0


def test_speed_200_operators_under_a_second() -> None:
    p = random_app_problem(random.Random(7), 200)
    start = time.perf_counter()
    greedy_fuse(p)
    assert time.perf_counter() - start < 1.0


def test_large_problem_is_order_independent_and_within_max_frac() -> None:
    p = random_app_problem(random.Random(11), 400)
    r = greedy_fuse(p)
    assert greedy_fuse(shuffled(p, random.Random(3))) == r
    warned = {w.split()[1] for w in r.warnings}
    for part in r.partitions:
        if exceeds_max_frac(metrics(frozenset(part), p).comp_load, p.max_frac):
            assert part == (part[0],) and part[0] in warned


# --- properties -------------------------------------------------------------------------


def _assert_valid(problem: FusionProblem, rule: str) -> None:
    r = greedy_fuse(problem, mergable_rule=rule)
    flat = [op for part in r.partitions for op in part]
    assert sorted(flat) == sorted(problem.operators)  # covering and disjoint
    for part in r.partitions:
        m = metrics(frozenset(part), problem)
        if exceeds_max_frac(m.comp_load, problem.max_frac):
            assert forced(part, problem), part
            assert any(f"{part[0]} " in w or f"{{{part[0]}," in w for w in r.warnings)
        for group in exclusion_groups(problem):
            assert len(group.members & set(part)) <= 1
    for group in problem.colocate:
        assert r.pe_of[min(group)] == r.pe_of[max(group)]
    assert "no Mergable condition fails" not in " ".join(why_not_merged(r, problem).values())


@PROPS
@given(problems(), st.sampled_from(["both", "either"]))
def test_result_is_a_valid_partition_respecting_constraints(
    problem: FusionProblem, rule: str
) -> None:
    _assert_valid(problem, rule)


@PROPS
@given(problems())
def test_every_step_follows_the_mergable_rule(problem: FusionProblem) -> None:
    r = greedy_fuse(problem)
    running = r.objective_initial
    tol = REL_TOL * max(1.0, r.objective_initial)
    for step in r.steps:
        a, b = step.left, step.right
        assert min(a) < min(b)
        assert connected(a, b, problem)
        assert fusion_legal(a, b, problem).ok
        for side in (a, b):
            assert effective_util(side, problem) < problem.min_util * (1 + REL_TOL)
        assert not exceeds_max_frac(metrics(a | b, problem).comp_load, problem.max_frac)
        assert step.benefit == pytest.approx(2 * rate_between(a, b, problem), rel=1e-9, abs=tol)
        running -= step.benefit
        assert step.objective == pytest.approx(running, abs=tol)
    assert r.objective == pytest.approx(running, abs=tol)


@PROPS
@given(problems(), st.randoms(use_true_random=False), st.sampled_from(["both", "either"]))
def test_result_does_not_depend_on_declaration_order(
    problem: FusionProblem, rng: random.Random, rule: str
) -> None:
    first = greedy_fuse(problem, mergable_rule=rule)
    again = greedy_fuse(shuffled(problem, rng), mergable_rule=rule)
    assert again == first


@PROPS
@given(problems(exact=True), st.sampled_from(["both", "either"]))
def test_matches_literal_algorithm_1(problem: FusionProblem, rule: str) -> None:
    assert greedy_fuse(problem, mergable_rule=rule).partitions == naive_greedy(problem, rule)


# --- channels of a parallel region (paper 000's first rule) ------------------------------


def _diamond(loads: float = 0.01, **kwargs: object) -> FusionProblem:
    """split -> (a0 -> b0 | a1 -> b1) -> merge: a width-2 region, cheap enough to fuse whole."""
    ops = ["split", "a0", "b0", "a1", "b1", "merge"]
    links = [("split", "a0", 1000.0, 50.0), ("a0", "b0", 1000.0, 50.0), ("b0", "merge", 1000.0, 50.0),
             ("split", "a1", 1000.0, 50.0), ("a1", "b1", 1000.0, 50.0), ("b1", "merge", 1000.0, 50.0)]
    return FusionProblem.build(ops, dict.fromkeys(ops, loads), links, COMM, **kwargs)  # type: ignore[arg-type]


def test_two_channels_of_a_region_never_share_a_pe() -> None:
    free = greedy_fuse(_diamond())
    assert len(free.partitions) == 1  # without the rule, everything fits one PE
    ruled = _diamond(channels=[[["a0", "b0"], ["a1", "b1"]]])
    result = greedy_fuse(ruled)
    chans = [{op[1] for op in p if op[0] in "ab"} for p in result.partitions]
    assert all(len(c) <= 1 for c in chans), result.partitions
    assert len(result.partitions) == 2  # split with one channel, merge with the other
    verdict = fusion_legal(frozenset({"a0"}), frozenset({"b1"}), ruled)
    assert not verdict.ok and "channels 0 and 1 of a parallel region" in verdict.reason
    assert fusion_legal(frozenset({"a0", "split"}), frozenset({"b0"}), ruled).ok
    refused = why_not_merged(result, ruled)
    assert any("channels 0 and 1" in why for why in refused.values()), refused


def test_exact_fusion_keeps_channels_apart_too() -> None:
    from spadeopt.optimize.exact import exact_fuse, gap

    ruled = _diamond(channels=[[["a0", "b0"], ["a1", "b1"]]])
    best = exact_fuse(ruled)
    assert all(len({op[1] for op in p if op[0] in "ab"}) <= 1 for p in best.partitions), best.partitions
    assert gap(greedy_fuse(ruled), best) >= 0


@pytest.mark.parametrize(("channels", "match"), [
    ([[["a0", "b0"]]], "1 channel"),
    ([[["a0"], ["zz"]]], "unknown operator"),
    ([[["a0"], ["a0", "b1"]]], "more than one channel"),
    ([[["a0"], []]], "empty"),
])
def test_bad_channels_are_refused(channels, match) -> None:
    with pytest.raises(UsageError, match=match):
        _diamond(channels=channels)
