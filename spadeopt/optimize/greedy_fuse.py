"""GreedyFuse (digest 003 §5.3, Algorithm 1), and ``why_not_merged`` for ``explain``.

Algorithm 1, as implemented::

    P <- initial partitions (one per operator; colocation groups pre-merged)
    while some pair {Pi, Pj} of P is Mergable:
        merge the Mergable pair with the largest MergeBenefit
    return P

``Mergable(Pi, Pj) ≡ Pi ≠ Pj ∧ Underutilized(Pi) ∧ Underutilized(Pj) ∧ Connected(Pi, Pj)
∧ ¬Saturated(Pi ∪ Pj) ∧ legal(Pi, Pj)``. With ``mergable_rule="either"`` (an ablation,
not the paper's rule) one underutilized side suffices; ``"absorb"`` is FATM's second phase
(:func:`absorb_leftovers`). ``MergeBenefit = 2 x`` the tuple
rate of the links between the pair (see :mod:`spadeopt.optimize.cost`); a pair joined only
by zero-rate links is still Connected and may merge with benefit 0.

Ties on benefit go to the pair whose ``(smaller first member, larger first member)`` is
lexicographically smallest, where a partition's first member is its smallest operator
name. Partitions are disjoint, so this is a total order and the result depends only on
operator names and the profile, never on declaration order.

Implementation: a merge changes neither Rate nor CompLoad of any other partition (the
links crossing their boundaries still cross), so a pair's Mergable status and benefit
are fixed for as long as both sides live (all but the ``acyclic`` rule of a build with
checkpoints, which is asked when a pair is popped: :mod:`spadeopt.optimize.legality`).
Candidates therefore sit in a heap; a merge pushes the new partition's pairs and stale
entries are skipped when popped. A heap entry keeps its pair's merged stats (computed
once, when offered, and reused by the merge) and orders the name pair by rank among the
sorted names (an int compares faster than two strings; same order). A run costs
O((n + L) log L) heap operations plus one ``v`` evaluation per candidate, for ``n``
operators and ``L`` links; the merge step's frozensets add O(Σ merged sizes) set
copying (O(n^2) for a chain that grows one operator at a time, in C). At the end one
pass over the links gives the objective, every PE's CompLoad and the saturation warnings, with the reference
functions' sums (``cost.partition_loads``).
FATM runs both phases through :func:`greedy_then_absorb`, which skips phase 1's
end-of-run sums (phase 2 recomputes them for its own result).

What it does not do: it does not guarantee that no underutilized partition remains (the
paper says the same), it never splits a partition, and it does no fission: an operator
that is saturated on its own stays a singleton PE, with a warning.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from spadeopt.errors import UsageError
from spadeopt.optimize.cost import (
    REL_TOL,
    BookLayout,
    PartitionBook,
    evaluate_comm,
    metrics,
    partition_loads,
)
from spadeopt.optimize.legality import (
    PeGraph,
    exclusion_index,
    fusion_legal,
    initial_partitions,
)
from spadeopt.optimize.problem import FusionProblem, fmt_names, fmt_vs
from spadeopt.optimize.result import FusionResult, MergeStep, canonical, saturation_warnings

MERGABLE_RULES = ("both", "either", "absorb")
NEGLIGIBLE = 0.01  # under the "absorb" rule, a PE below 1 % of MaxFrac counts as underutilized


_Candidate = tuple[float, int, int, int, tuple[float, float, float, float]]
"""A heap entry ``(-benefit, names, a, b, merged)``: tuple order is the merge priority
(largest benefit, then the names of the two first members, smaller first: ``names`` is
``rank(first) * n + rank(second)`` over the ``n`` sorted operator names, which orders as
the name pair does; ids ``a``, ``b`` make it total). ``merged`` is the pair's
:meth:`PartitionBook.merged_values`; it is never compared, as a pair of live ids is
offered at most once."""


def greedy_fuse(problem: FusionProblem, *, mergable_rule: str = "both",
                start: Iterable[Iterable[str]] | None = None) -> FusionResult:
    """Partition ``problem``'s operators into PEs with Algorithm 1.

    ``start`` replaces line (1) of Algorithm 1: the partitions to start merging from
    (they must cover every operator once and contain every colocation group whole);
    FATM uses it to continue from GreedyFuse's result under another rule (see
    :func:`absorb_leftovers`).

    Returns a :class:`FusionResult` with the partitions, every merge step in order and a
    warning for each PE that stays saturated (only forced partitions can). Raises
    ``OptimizeError`` when colocation contradicts exlocation, and ``UsageError`` for an
    unknown ``mergable_rule``.

    >>> from spadeopt.optimize.problem import LinearCommModel
    >>> p = FusionProblem.build(["a", "b", "c"], {"a": 0.01, "b": 0.01, "c": 0.01},
    ...     [("a", "b", 1000.0, 100.0), ("b", "c", 1000.0, 100.0)], LinearCommModel(1e-5))
    >>> greedy_fuse(p).partitions
    (('a', 'b', 'c'),)
    """
    if mergable_rule not in MERGABLE_RULES:
        msg = f"mergable_rule must be one of {MERGABLE_RULES}; got {mergable_rule!r}"
        raise UsageError(msg)
    initial = _initial(problem) if start is None else _checked_start(problem, start)
    return _fused(problem, mergable_rule, initial)


def _fused(problem: FusionProblem, rule: str, initial: Iterable[frozenset[str]], steps: bool = True,
           known: dict[frozenset[str], Any] | None = None) -> FusionResult:
    """:func:`greedy_fuse`'s run from checked ``initial`` partitions, summed up."""
    partitions, done, objective_initial = _merge_all(problem, initial, rule, steps, known)
    return _summarized(problem, partitions, done, objective_initial, rule)


def _merge_all(problem: FusionProblem, initial: Iterable[frozenset[str]], rule: str, record: bool = True,
               known: dict[frozenset[str], Any] | None = None, ends: dict[frozenset[str], Any] | None = None
               ) -> tuple[tuple[tuple[str, ...], ...], tuple[MergeStep, ...], float]:
    """Algorithm 1's loop from ``initial``: the canonical partitions, the merge steps (none
    unless ``record``: the merges are the same) and the initial objective. ``known``: the
    initial partitions' exclusion groups and channel maps (``BookLayout``); ``ends``, when
    given, receives the final partitions' (phase 2 starts from them)."""
    shared = problem.shared
    exclusion = shared.get("exclusion_index")
    if exclusion is None:
        exclusion = shared["exclusion_index"] = exclusion_index(problem)
    if initial is shared.get("initial_partitions"):  # Algorithm 1's own start: its layout is kept too
        layout = shared.get("initial_layout")
        if layout is None:
            layout = shared["initial_layout"] = BookLayout(problem, initial, exclusion)
        book = PartitionBook(problem, initial, exclusion, layout)
    else:
        book = PartitionBook(problem, initial, exclusion, BookLayout(problem, initial, exclusion, known))
    heap: list[_Candidate] = []
    parts = book.parts
    offer = _offerer(heap, book, rule)
    for a in book.ids():
        for b in parts[a].nbr:
            if a < b:
                offer(a, b)
    objective_initial = book.objective()
    running = objective_initial
    steps: list[MergeStep] = []
    pop = heapq.heappop
    merge = book.merge
    both, min_util = rule == "both", problem.min_util
    pes = PeGraph(problem, {pid: part.members for pid, part in parts.items()}) if problem.acyclic else None
    while heap:
        neg_benefit, _, a, b, merged = pop(heap)
        pa, pb = parts.get(a), parts.get(b)
        if pa is None or pb is None:
            continue  # stale: one side was merged since this entry was pushed
        if pes is not None:  # the acyclic rule, asked now: a merge since the offer may have made a path
            if pes.closes(a, b):
                continue  # illegal for as long as both live: paths between live partitions only grow
            left, right = (pb.members, pa.members) if pb.key < pa.key else (pa.members, pb.members)
            new = merge(a, b, merged)
            pes.merge(a, b, new)
            if record:
                running -= -neg_benefit
                steps.append(MergeStep(left, right, -neg_benefit, running))
        elif record:
            left, right = (pb.members, pa.members) if pb.key < pa.key else (pa.members, pb.members)
            new = merge(a, b, merged)
            running -= -neg_benefit
            steps.append(MergeStep(left, right, -neg_benefit, running))
        else:
            new = merge(a, b, merged)
        part = parts[new]
        if both and part.util >= min_util:
            continue  # under "both" a partition at MinUtil is Mergable with no one: offer would refuse each pair
        for k in part.nbr:
            offer(new, k)
    if ends is not None:
        ends.update((part.members, (part.groups, part.chan)) for part in parts.values())
    return canonical(part.members for part in parts.values()), tuple(steps), objective_initial


def _summarized(problem: FusionProblem, partitions: tuple[tuple[str, ...], ...], steps: tuple[MergeStep, ...],
                objective_initial: float, rule: str) -> FusionResult:
    objective_, comp = partition_loads(partitions, problem)
    return FusionResult(
        partitions=partitions,
        objective=objective_,
        objective_initial=objective_initial,
        steps=steps,
        warnings=saturation_warnings(partitions, problem, comp),
        method="greedy",
        mergable_rule=rule,
        comp_loads=comp,
    )


def _initial(problem: FusionProblem) -> tuple[frozenset[str], ...]:
    """:func:`initial_partitions`, once per problem structure (``problem.shared``)."""
    got = problem.shared.get("initial_partitions")
    if got is None:
        got = problem.shared["initial_partitions"] = initial_partitions(problem)
    return got


def _checked_start(problem: FusionProblem, start: Iterable[Iterable[str]]) -> tuple[frozenset[str], ...]:
    parts = tuple(sorted((frozenset(p) for p in start), key=min))
    n_seen = sum(len(p) for p in parts)  # operator names are unique: a permutation iff as many, same set
    if (n_seen != len(problem.operators) or frozenset().union(*parts) != problem.operator_set
            or any(not p for p in parts)):
        raise UsageError("start partitions must cover every operator of the problem exactly once")
    pe_of = {op: i for i, p in enumerate(parts) for op in p}
    split = [g for g in problem.colocate if len({pe_of[op] for op in g}) > 1]
    if split:
        raise UsageError(f"start partitions split colocation group(s) {', '.join(fmt_names(g) for g in split)}")
    return parts


def absorb_leftovers(problem: FusionProblem, result: FusionResult) -> FusionResult:
    """Phase 2 of FATM (a spadeopt addition, not the paper's): continue Algorithm 1 from
    GreedyFuse's ``result`` with ``Mergable`` relaxed to *one* underutilized side.

    GreedyFuse stops a PE from merging once it reaches MinUtil, which can strand a small
    underutilized neighbour (say the tail of a pipeline whose head filled up) as a PE of
    its own: a process that spends most of its CPU receiving and sending. This phase
    merges such leftovers into a connected neighbour, largest benefit first, never past
    MaxFrac and never against legality. A PE with negligible load (under 1 % of MaxFrac,
    e.g. a sink that saw no tuple, whose EffectiveUtil is 1 by definition) counts as a
    leftover here too: it is a process of its own that costs nothing to fold. Returns the combined result: phase 1's initial
    objective, both phases' steps, ``mergable_rule="absorb"`` (so ``why_not_merged``
    explains the final state).
    """
    more = greedy_fuse(problem, mergable_rule="absorb", start=result.partitions)
    return FusionResult(
        partitions=more.partitions,
        objective=more.objective,
        objective_initial=result.objective_initial,
        steps=result.steps + more.steps,
        warnings=more.warnings,
        method="greedy",
        mergable_rule="absorb",
        comp_loads=more.comp_loads,
    )


def greedy_then_absorb(problem: FusionProblem, steps: bool = True) -> FusionResult:
    """FATM's two phases: ``absorb_leftovers(problem, greedy_fuse(problem))``, equal to it
    field for field, without summing up phase 1 (its objective, CompLoads and warnings,
    which phase 2 recomputes for its own result). Phase 2's start-up evaluates the
    communication model on phase 1's partitions in the same order as that summary, so
    even a model that fails, fails with the same error. Without ``steps`` the result
    lists no merge steps (a caller that reads only the partitions: the channel quotient)."""
    ends: dict[frozenset[str], Any] = {}
    partitions, done, objective_initial = _merge_all(problem, _initial(problem), "both", steps, ends=ends)
    more = _fused(problem, "absorb", _checked_start(problem, partitions), steps, ends)
    return replace(more, objective_initial=objective_initial, steps=done + more.steps)


def _offerer(heap: list[_Candidate], book: PartitionBook, rule: str) -> Callable[[int, int], None]:
    """``offer(a, b)``: push the pair ``a``, ``b`` (neighbours) if it is Mergable under ``rule``.

    The merged stats are :meth:`PartitionBook.merged_values`' arithmetic, inlined (this is
    GreedyFuse's innermost loop); a communication load that is not a plain finite float
    >= 0 goes through ``evaluate_comm``, which converts or refuses it."""
    problem, parts, push = book.problem, book.parts, heapq.heappush
    min_util, max_frac = problem.min_util, problem.max_frac
    negligible = NEGLIGIBLE * max_frac
    cost, inf = problem.comm.cost, math.inf
    n = len(book.ranks)

    def offer(a: int, b: int) -> None:
        pa, pb = parts[a], parts[b]
        if rule == "both":
            if not (pa.util < min_util and pb.util < min_util):
                return
        elif rule == "either":
            if not (pa.util < min_util or pb.util < min_util):
                return
        elif not (pa.util < min_util or pa.comp <= negligible or pb.util < min_util or pb.comp <= negligible):
            return  # "absorb": a PE with negligible load is a leftover too, folding it costs nothing
        if pa.groups and pb.groups and not pa.groups.isdisjoint(pb.groups):
            return  # illegal: an exlocation or unfusable group would share a PE
        ca, cb = pa.chan, pb.chan
        if ca and cb:  # legality.channel_clash, inlined (over the smaller map: a clash either way)
            if len(cb) < len(ca):
                ca, cb = cb, ca
            get = cb.get
            for r, c in ca.items():
                if get(r, c) != c:
                    return  # illegal: two channels of one parallel region would share a PE
        oper = pa.oper + pb.oper
        if oper > max_frac:
            return  # saturated whatever crosses it (a communication load is >= 0): no comm cost to price
        na, nb = pa.nbr, pb.nbr
        r_ab, b_ab = na[b]
        if pa.n_ext + pb.n_ext == 0 and len(na) == 1 and len(nb) == 1:
            tuples = byte_rate = 0.0  # the pair is isolated: nothing crosses the union
        else:
            tuples = (pa.rate + pb.rate) - 2.0 * r_ab
            tuples = tuples if tuples > 0.0 else 0.0  # max(0.0, ...), the same value in every case
            byte_rate = (pa.bytes + pb.bytes) - 2.0 * b_ab
            byte_rate = byte_rate if byte_rate > 0.0 else 0.0
        size_ = byte_rate / tuples if tuples > 0 else 0.0
        comm = cost(tuples, size_)
        if not (type(comm) is float and 0.0 <= comm < inf):
            comm = evaluate_comm(problem, tuples, size_)
        comp = oper + comm
        if comp > max_frac:
            return
        ra, rb = pa.rank, pb.rank
        names = ra * n + rb if ra < rb else rb * n + ra
        push(heap, (-2.0 * r_ab, names, a, b, (oper, tuples, byte_rate, comp)))
    return offer


def why_not_merged(
    result: FusionResult, problem: FusionProblem
) -> dict[tuple[tuple[str, ...], tuple[str, ...]], str]:
    """For each pair of linked PEs in ``result``, why GreedyFuse did not merge them.

    Keys are ``(pe_i, pe_j)`` with ``pe_i`` before ``pe_j`` in ``result.partitions``;
    values list every Mergable condition that fails, joined by ``"; "``, e.g.
    ``"merged load 0.62 would exceed MaxFrac 0.50"``, ``"PE {c} has EffectiveUtil 0.970
    ≥ MinUtil 0.95"`` or ``"exlocation annotation {a,b}"``. Values are recomputed with
    the reference functions; differences at the last bits are read in favour of the
    condition having failed. Uses ``result.mergable_rule``; for results of the exact
    optimizer, which ignores MinUtil, only legality and MaxFrac are reported.
    """
    pe_of = result.pe_of
    pairs: set[tuple[int, int]] = set()
    for link in problem.links:
        if link.src is not None and link.dst is not None:
            i, j = pe_of[link.src], pe_of[link.dst]
            if i != j:
                pairs.add((min(i, j), max(i, j)))
    sets = [frozenset(p) for p in result.partitions]
    utils = [metrics(s, problem).effective_util for s in sets]
    out: dict[tuple[tuple[str, ...], tuple[str, ...]], str] = {}
    for i, j in sorted(pairs):
        reasons = []
        verdict = fusion_legal(sets[i], sets[j], problem, sets)
        if not verdict.ok:
            reasons.append(verdict.reason)
        merged = metrics(sets[i] | sets[j], problem).comp_load
        if merged >= problem.max_frac * (1.0 - REL_TOL):
            load, cap = fmt_vs(merged, problem.max_frac)
            reasons.append(f"merged load {load} would exceed MaxFrac {cap}")
        if result.method != "exact":  # the exact optimizer ignores MinUtil
            reasons += _util_reasons(
                [(sets[i], utils[i]), (sets[j], utils[j])],
                problem.min_util,
                result.mergable_rule,
            )
        if not reasons:
            reasons.append("no Mergable condition fails; the optimizer kept them apart")
        out[(result.partitions[i], result.partitions[j])] = "; ".join(reasons)
    return out


def _util_reasons(
    sides: list[tuple[frozenset[str], float]], min_util: float, rule: str
) -> list[str]:
    full = [(members, util) for members, util in sides if util >= min_util * (1.0 - REL_TOL)]
    if rule in ("either", "absorb") and len(full) < len(sides):
        return []
    reasons = []
    for members, util in full:
        shown, limit = fmt_vs(util, min_util)
        reasons.append(f"PE {fmt_names(members)} has EffectiveUtil {shown} ≥ MinUtil {limit}")
    return reasons
