"""The exact optimizer: a hand case where greedy is suboptimal, and GreedyFuse vs exact."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from spadeopt.errors import UsageError
from spadeopt.optimize.cost import REL_TOL, exceeds_max_frac, metrics
from spadeopt.optimize.exact import exact_fuse, gap
from spadeopt.optimize.greedy_fuse import greedy_fuse, why_not_merged
from spadeopt.optimize.legality import exclusion_groups, initial_partitions
from spadeopt.optimize.problem import FusionProblem, LinearCommModel

from .opt_strategies import brute_force_objective, forced, problems

PROPS = settings(max_examples=200, deadline=None, derandomize=True)


def greedy_trap() -> FusionProblem:
    """a-b (10/s), b-c (11/s), c-d (10/s); any two fit under MaxFrac 0.6, no three do.

    Greedy takes the heaviest link b-c first and strands a and d: Σ Rate 62 -> 40.
    The optimum is {a,b},{c,d}: only b-c crosses, Σ Rate 22.
    """
    return FusionProblem.build(
        list("abcd"),
        dict.fromkeys("abcd", 0.2),
        [("a", "b", 10.0, 8.0), ("b", "c", 11.0, 8.0), ("c", "d", 10.0, 8.0)],
        LinearCommModel(per_tuple_s=5e-3),
        max_frac=0.6,
    )


def test_greedy_trap() -> None:
    p = greedy_trap()
    g, e = greedy_fuse(p), exact_fuse(p)
    assert g.partitions == (("a",), ("b", "c"), ("d",))
    assert e.partitions == (("a", "b"), ("c", "d"))
    assert (g.objective_initial, g.objective, e.objective) == (62.0, 40.0, 22.0)
    assert gap(g, e) == pytest.approx(18 / 62)
    assert gap(e, e) == 0.0
    assert e.method == "exact" and e.steps == ()


def test_exact_keeps_a_saturated_singleton_and_warns() -> None:
    p = FusionProblem.build(
        ["a", "b"], {"a": 0.7, "b": 0.01}, [("a", "b", 100.0, 8.0)], LinearCommModel(1e-5)
    )
    e = exact_fuse(p)
    assert e.partitions == (("a",), ("b",))
    assert e.warnings == (
        "operator a alone needs CompLoad 0.70 > MaxFrac 0.50; it stays a singleton PE",
    )
    assert why_not_merged(e, p) == {(("a",), ("b",)): "merged load 0.71 would exceed MaxFrac 0.50"}


def test_exact_ignores_min_util_and_connectivity() -> None:
    # a is fully utilized and b is unlinked: merging changes nothing, greedy won't.
    p = FusionProblem.build(
        ["a", "b", "c"],
        {"a": 0.3, "b": 0.01, "c": 0.01},
        [("a", "c", 1.0, 8.0)],
        LinearCommModel(1e-5),
    )
    assert greedy_fuse(p).objective == 2.0
    assert exact_fuse(p).objective == 0.0


def test_too_many_units_is_a_usage_error() -> None:
    names = [f"o{i}" for i in range(6)]
    p = FusionProblem.build(names, dict.fromkeys(names, 0.1), [], LinearCommModel(0.0))
    with pytest.raises(UsageError, match="max_units=5"):
        exact_fuse(p, max_units=5)


def test_gap_refuses_results_of_different_problems() -> None:
    other = FusionProblem.build(
        ["x", "y"], {"x": 0.0, "y": 0.0}, [("x", "y", 1.0, 1.0)], LinearCommModel(0.0)
    )
    with pytest.raises(UsageError, match="same problem"):
        gap(greedy_fuse(greedy_trap()), exact_fuse(other))


@PROPS
@given(problems(max_ops=7))
def test_exact_is_optimal_feasible_and_never_worse_than_greedy(problem: FusionProblem) -> None:
    g, e = greedy_fuse(problem), exact_fuse(problem)
    tol = REL_TOL * max(1.0, g.objective_initial) * 10
    assert sorted(op for part in e.partitions for op in part) == sorted(problem.operators)
    units = set(initial_partitions(problem))
    for part in e.partitions:
        block = frozenset(part)
        assert all(u <= block or not (u & block) for u in units)  # units are never split
        assert all(len(gr.members & block) <= 1 for gr in exclusion_groups(problem))
        if exceeds_max_frac(metrics(block, problem).comp_load, problem.max_frac):
            assert forced(part, problem)
    assert e.objective <= g.objective + tol
    assert 0.0 <= gap(g, e) <= 1.0
    assert e.objective == pytest.approx(brute_force_objective(problem), abs=tol)
