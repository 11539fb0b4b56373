r"""Exact fusion for small problems, to measure how far GreedyFuse is from the optimum.

Definition. Among all partitionings of the operators, ``exact_fuse`` returns one with the
smallest ``Σ Rate(P)`` (the paper's objective, link-level form, see
:mod:`spadeopt.optimize.cost`) subject to the *hard* constraints only:

1. colocation: the units are :func:`~spadeopt.optimize.legality.initial_partitions`
   (joined colocation groups, every other operator alone); a unit is never split;
2. legality: no partition holds two members of an exlocation or unfusable group, or
   operators of two channels of one parallel region;
3. Constraint 1: no partition is Saturated (``CompLoad > MaxFrac``), except a single unit
   that is saturated on its own, which fusion cannot fix and may stay as it is.

MinUtil is *not* a constraint here: it is the paper's soft Constraint 2 and GreedyFuse's
stopping rule, not part of the objective. Neither is Connected: merging partitions that
share no link leaves ``Σ Rate`` unchanged. GreedyFuse's result always satisfies 1–3, so
``objective(greedy) >= objective(exact)`` and :func:`gap` is never negative.

Method. ``Σ Rate`` is a sum over partitions, so a dynamic programme over subsets of the
``n`` units is exact::

    f(∅) = 0
    f(S) = min over admissible blocks B ⊆ S containing the lowest unit of S
           of Rate(B) + f(S \ B)

Block values (OperLoad, Rate, byte rate, legality) are built for all ``2^n`` subsets
incrementally; the programme then visits every (S, B) pair, ``3^n`` in all. That takes
well under a second for ``n <= 12`` (the default ``max_units``) and grows 3x per extra
unit. ``scipy.optimize.milp`` was not used: Rate of a block and ``v`` are not linear in
the assignment (``v`` may be any calibrated table), and at this size enumeration is both
simpler and exact.

Rounding: a block counts as saturated only when its CompLoad exceeds MaxFrac by more
than :data:`~spadeopt.optimize.cost.REL_TOL`, so that last-bit differences against
GreedyFuse's arithmetic can never make greedy's partitions look infeasible here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from spadeopt.errors import UsageError
from spadeopt.optimize.cost import REL_TOL, evaluate_comm, exceeds_max_frac, objective
from spadeopt.optimize.legality import (
    channel_clash,
    channels_of,
    exclusion_index,
    initial_partitions,
)
from spadeopt.optimize.problem import FusionProblem
from spadeopt.optimize.result import FusionResult, canonical, saturation_warnings

DEFAULT_MAX_UNITS = 12
GAP_EPS = 1e-12


@dataclass(frozen=True)
class _Units:
    """Per-unit values and pairwise link sums, indexed by unit number."""

    oper: list[float]
    rate: list[float]
    bytes: list[float]
    n_cross: list[int]
    groups: list[int]  # bitmask over exclusion groups
    chans: list[dict[int, int] | None]  # region -> channel of the unit's channel copies
    pair_rate: list[list[float]]
    pair_bytes: list[list[float]]
    pair_count: list[list[int]]


def exact_fuse(problem: FusionProblem, *, max_units: int = DEFAULT_MAX_UNITS) -> FusionResult:
    """A partitioning with minimum ``Σ Rate`` under the hard constraints (module doc).

    Raises ``UsageError`` when the problem has more than ``max_units`` units (operators,
    counting a colocation group as one), and ``OptimizeError`` when colocation contradicts
    exlocation. The result has ``method="exact"`` and no merge steps; it carries the
    same saturation warnings as GreedyFuse.
    """
    units = initial_partitions(problem)
    n = len(units)
    if n > max_units:
        msg = (
            f"exact_fuse would enumerate 3^{n} block choices for {n} units, over the limit "
            f"max_units={max_units}; use greedy_fuse, or pass a larger max_units if you can "
            "wait (each extra unit costs 3x)"
        )
        raise UsageError(msg)
    data = _unit_data(problem, units)
    admissible, block_rate = _block_table(problem, data, n)
    blocks = _solve(n, admissible, block_rate)
    partitions = canonical(
        frozenset().union(*(units[i] for i in range(n) if mask >> i & 1)) for mask in blocks
    )
    return FusionResult(
        partitions=partitions,
        objective=objective(partitions, problem),
        objective_initial=objective(units, problem),
        steps=(),
        warnings=saturation_warnings(partitions, problem),
        method="exact",
        mergable_rule="both",
    )


def gap(greedy: FusionResult, exact: FusionResult) -> float:
    """GreedyFuse's shortfall: ``(obj_greedy - obj_exact) / max(obj_initial, GAP_EPS)``.

    Normalised by the starting objective (every operator its own PE, colocation groups
    joined), so the gap is the fraction of the initial inter-PE traffic that greedy
    leaves on the table compared with the optimum; it lies in ``[0, 1]``. Differences
    within :data:`~spadeopt.optimize.cost.REL_TOL` of the scale are reported as 0.
    Raises ``UsageError`` if the two results visibly come from different problems.
    """
    if not math.isclose(
        greedy.objective_initial, exact.objective_initial, rel_tol=1e-9, abs_tol=1e-9
    ):
        msg = (
            "gap() needs two results of the same problem; their initial objectives differ "
            f"({greedy.objective_initial} vs {exact.objective_initial})"
        )
        raise UsageError(msg)
    diff = greedy.objective - exact.objective
    if abs(diff) <= REL_TOL * max(1.0, greedy.objective_initial):
        return 0.0
    return diff / max(greedy.objective_initial, GAP_EPS)


def _unit_data(problem: FusionProblem, units: tuple[frozenset[str], ...]) -> _Units:
    n = len(units)
    owner = {op: i for i, unit in enumerate(units) for op in unit}
    crossing: list[list[tuple[float, float]]] = [[] for _ in range(n)]
    pairs: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for link in problem.links:
        ends = [owner[e] for e in (link.src, link.dst) if e is not None]
        if len(ends) == 2 and ends[0] == ends[1]:
            continue  # internal to a colocation unit
        for i in ends:
            crossing[i].append((link.rate, link.byte_rate))
        if len(ends) == 2:
            pairs.setdefault((min(ends), max(ends)), []).append((link.rate, link.byte_rate))
    pair_rate = [[0.0] * n for _ in range(n)]
    pair_bytes = [[0.0] * n for _ in range(n)]
    pair_count = [[0] * n for _ in range(n)]
    for (i, j), values in pairs.items():
        r, b = math.fsum(v[0] for v in values), math.fsum(v[1] for v in values)
        pair_rate[i][j] = pair_rate[j][i] = r
        pair_bytes[i][j] = pair_bytes[j][i] = b
        pair_count[i][j] = pair_count[j][i] = len(values)
    index = exclusion_index(problem)
    return _Units(
        oper=[math.fsum(problem.load[op] for op in unit) for unit in units],
        rate=[math.fsum(v[0] for v in cr) for cr in crossing],
        bytes=[math.fsum(v[1] for v in cr) for cr in crossing],
        n_cross=[len(cr) for cr in crossing],
        groups=[sum(1 << g for op in unit for g in index.get(op, ())) for unit in units],
        chans=[channels_of(unit, problem) for unit in units],
        pair_rate=pair_rate,
        pair_bytes=pair_bytes,
        pair_count=pair_count,
    )


def _block_table(problem: FusionProblem, u: _Units, n: int) -> tuple[list[bool], list[float]]:
    """For every subset of units: is it an admissible block, and its Rate."""
    size = 1 << n
    rate = [0.0] * size
    byte_rate = [0.0] * size
    n_cross = [0] * size
    oper = [0.0] * size
    groups = [0] * size
    chans: list[dict[int, int] | None] = [None] * size
    legal = [True] * size
    admissible = [False] * size
    for s in range(1, size):
        i = (s & -s).bit_length() - 1
        t = s ^ (1 << i)
        members = [j for j in range(i + 1, n) if t >> j & 1]
        rate[s] = rate[t] + u.rate[i] - 2.0 * sum(u.pair_rate[i][j] for j in members)
        byte_rate[s] = byte_rate[t] + u.bytes[i] - 2.0 * sum(u.pair_bytes[i][j] for j in members)
        n_cross[s] = n_cross[t] + u.n_cross[i] - 2 * sum(u.pair_count[i][j] for j in members)
        if n_cross[s] == 0:
            rate[s] = byte_rate[s] = 0.0
        rate[s], byte_rate[s] = max(rate[s], 0.0), max(byte_rate[s], 0.0)
        oper[s] = oper[t] + u.oper[i]
        legal[s] = legal[t] and not groups[t] & u.groups[i] and channel_clash(chans[t], u.chans[i]) is None
        groups[s] = groups[t] | u.groups[i]
        if not legal[s]:
            continue
        if u.chans[i]:
            chans[s] = {**chans[t], **u.chans[i]} if chans[t] else u.chans[i]
        else:
            chans[s] = chans[t]
        if t == 0:
            admissible[s] = True  # a single unit is always allowed, saturated or not
        elif not exceeds_max_frac(oper[s], problem.max_frac):  # CommLoad >= 0: prune
            mean = byte_rate[s] / rate[s] if rate[s] > 0 else 0.0
            comp = oper[s] + evaluate_comm(problem, rate[s], mean)
            admissible[s] = not exceeds_max_frac(comp, problem.max_frac)
    return admissible, rate


def _solve(n: int, admissible: list[bool], rate: list[float]) -> list[int]:
    """The blocks (as unit bitmasks) of a minimum-Σ-Rate partition into admissible blocks."""
    size = 1 << n
    best = [0.0] * size
    choice = [0] * size
    for s in range(1, size):
        low = s & -s
        rest = s ^ low
        value, pick = math.inf, low
        sub = rest
        while True:
            block = sub | low
            if admissible[block]:
                candidate = rate[block] + best[s ^ block]
                if candidate < value:
                    value, pick = candidate, block
            if sub == 0:
                break
            sub = (sub - 1) & rest
        best[s], choice[s] = value, pick
    blocks = []
    s = size - 1
    while s:
        blocks.append(choice[s])
        s ^= choice[s]
    return blocks
