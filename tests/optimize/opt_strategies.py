"""Hypothesis strategies and slow reference implementations for the optimizer tests."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator

from hypothesis import strategies as st

from spadeopt.optimize.cost import (
    connected,
    exceeds_max_frac,
    metrics,
    objective,
    rate_between,
    saturated,
    underutilized,
)
from spadeopt.optimize.legality import exclusion_groups, fusion_legal, initial_partitions
from spadeopt.optimize.problem import FusionProblem, LinearCommModel, Link
from spadeopt.optimize.result import canonical

NAMES = ("ant", "bee", "cat", "dog", "eel", "fox", "gnu", "hen", "ibis", "jay")

# Values that collide often (ties) mixed with arbitrary floats.
LOADS = st.sampled_from([0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.45]) | st.floats(0.0, 0.6)
RATES = st.sampled_from([0.0, 10.0, 100.0, 1000.0]) | st.floats(0.0, 3000.0)
SIZES = st.sampled_from([8.0, 100.0, 1000.0]) | st.floats(0.0, 2000.0)

# Dyadic values: every sum and product the optimizer forms is exact, so GreedyFuse and
# the from-scratch oracle see bit-identical numbers.
EXACT_LOADS = st.integers(0, 40).map(lambda k: k / 256)
EXACT_RATES = st.sampled_from([0.0, 16.0, 64.0, 256.0, 1024.0, 4096.0])
EXACT_SIZES = st.sampled_from([0.0, 8.0, 64.0, 512.0])
EXACT_COMM = st.sampled_from(
    [LinearCommModel(2.0**-17, 2.0**-30), LinearCommModel(2.0**-14), LinearCommModel(2.0**-12)]
)


@st.composite
def problems(
    draw: st.DrawFn,
    min_ops: int = 1,
    max_ops: int = 8,
    annotations: bool = True,
    exact: bool = False,
) -> FusionProblem:
    """Random small problems: cycles, repeated links, external streams, annotations."""
    n = draw(st.integers(min_ops, max_ops))
    ops = draw(st.permutations(NAMES))[:n]
    load_st, rate_st, size_st = (
        (EXACT_LOADS, EXACT_RATES, EXACT_SIZES) if exact else (LOADS, RATES, SIZES)
    )
    end = st.sampled_from(ops)
    internal = st.tuples(end, end).filter(lambda t: t[0] != t[1]) if n > 1 else st.nothing()
    external = st.tuples(end, st.none()) | st.tuples(st.none(), end)
    pairs = draw(st.lists(internal | internal | external, min_size=n // 2, max_size=3 * n))
    links = [Link(src, dst, draw(rate_st), draw(size_st)) for src, dst in pairs]
    load = {op: draw(load_st) for op in ops}
    if exact:
        comm = draw(EXACT_COMM)
    else:
        comm = LinearCommModel(
            draw(st.sampled_from([0.0, 1e-6, 1e-5, 3e-5, 1e-4])),
            draw(st.sampled_from([0.0, 1e-9, 1e-8])),
        )
    exlocate: list[frozenset[str]] = []
    colocate: list[frozenset[str]] = []
    if annotations and n > 1:
        pair = st.lists(end, min_size=2, max_size=2, unique=True).map(frozenset)
        exlocate = draw(st.lists(pair, max_size=2))
        colocate = [
            g
            for g in draw(st.lists(pair, max_size=2))
            if not any(len(g & x) >= 2 for x in exlocate)
        ]
        # Joined colocation groups must not hold an exlocated pair either.
        joined = frozenset().union(*colocate) if colocate else frozenset()
        if any(len(x & joined) >= 2 for x in exlocate):
            colocate = colocate[:1]
    return FusionProblem.build(
        ops,
        load,
        links,
        comm,
        max_frac=draw(st.sampled_from([0.3, 0.5, 0.8, 1.0])),
        min_util=draw(st.sampled_from([0.8, 0.95, 0.95, 1.0])),
        colocate=colocate,
        exlocate=exlocate,
    )


def shuffled(problem: FusionProblem, rng: random.Random) -> FusionProblem:
    """The same problem with operators, load entries and links declared in another order."""
    ops = list(problem.operators)
    links = list(problem.links)
    rng.shuffle(ops)
    rng.shuffle(links)
    load = {op: problem.load[op] for op in ops}
    return FusionProblem.build(
        ops,
        load,
        links,
        problem.comm,
        max_frac=problem.max_frac,
        min_util=problem.min_util,
        colocate=problem.colocate,
        exlocate=problem.exlocate,
        unfusable=problem.unfusable,
    )


def forced(part: tuple[str, ...], problem: FusionProblem) -> bool:
    """Is ``part`` a partition fusion cannot split (one operator, or a colocation unit)?"""
    return frozenset(part) in set(initial_partitions(problem))


def naive_greedy(problem: FusionProblem, rule: str = "both") -> tuple[tuple[str, ...], ...]:
    """Algorithm 1 evaluated literally: every pair, every step, from the reference functions."""
    parts = [frozenset(p) for p in initial_partitions(problem)]
    while True:
        best: tuple[float, str, str] | None = None
        pick: tuple[int, int] = (-1, -1)
        for i, j in itertools.combinations(range(len(parts)), 2):
            a, b = parts[i], parts[j]
            ua, ub = underutilized(a, problem), underutilized(b, problem)
            if not ((ua and ub) if rule == "both" else (ua or ub)):
                continue
            if not connected(a, b, problem) or saturated(a | b, problem):
                continue
            if not fusion_legal(a, b, problem).ok:
                continue
            first, second = sorted((min(a), min(b)))
            key = (-2.0 * rate_between(a, b, problem), first, second)
            if best is None or key < best:
                best, pick = key, (i, j)
        if best is None:
            return canonical(parts)
        i, j = pick
        merged = parts[i] | parts[j]
        parts = [p for k, p in enumerate(parts) if k not in (i, j)] + [merged]


def set_partitions(items: list[frozenset[str]]) -> Iterator[list[frozenset[str]]]:
    """Every partition of ``items`` into blocks (unions of items)."""
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for smaller in set_partitions(rest):
        yield [first, *smaller]
        for k in range(len(smaller)):
            yield [*smaller[:k], smaller[k] | first, *smaller[k + 1 :]]


def brute_force_objective(problem: FusionProblem) -> float:
    """Minimum Σ Rate over all partitionings satisfying the hard constraints."""
    units = list(initial_partitions(problem))
    best = float("inf")
    groups = exclusion_groups(problem)
    for blocks in set_partitions(units):
        if not all(hard_ok(b, problem, units, groups) for b in blocks):
            continue
        best = min(best, objective(blocks, problem))
    return best


def hard_ok(block: frozenset[str], problem: FusionProblem, units: list, groups: tuple) -> bool:
    """The exact optimizer's hard constraints for one block."""
    if any(len(g.members & block) >= 2 for g in groups):
        return False
    if block in units:
        return True
    return not exceeds_max_frac(metrics(block, problem).comp_load, problem.max_frac)
