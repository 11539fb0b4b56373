"""Channel-symmetric fusions: FATM's second family of candidate plans for a width vector.

GreedyFuse cuts a channel where its MaxFrac and MinUtil rules say, one merge at a time,
and those rules cannot see a plan whole: a plan with every channel one PE and everything
outside the channels in one more (FALL itself, at width 1) is never reached when MinUtil
stops the merging below it, though the prediction may rank it first. This family is
built, not searched. For each ``p`` of :data:`SEGMENTS`, every replicated region's
channel is cut into at most ``p`` contiguous segments of near-equal profiled load (the
region's operators in declaration order), each segment one PE in every channel, and all
operators outside the channels (sources and sinks outside regions, splits, merges,
exchange operators) one more PE, or the PEs GreedyFuse makes of them alone at MaxFrac 1
(:func:`outside_groups`), or two: upstream and downstream of the channels
(:func:`outside_ends`, the manual fusion's shape), when that is legal (colocation groups whole, no two
members of an exlocation or unfusable group, no two channels of a region in one PE).
Each plan is placed as FATM places GreedyFuse's and scored by the same prediction; the
width search ranks both families together (``fatm_search.WidthScorer``).

Cost: a prediction per plan, no rate search: what GreedyFuse costs on a 64-channel
physical graph is most of a width search.

>>> balanced_segments(("a", "b", "c", "d"), {"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0}, 2)
[['a', 'b'], ['c', 'd']]
>>> balanced_segments(("a", "b", "c"), {"a": 3.0, "b": 1.0, "c": 1.0}, 2)
[['a'], ['b', 'c']]
>>> balanced_segments(("a",), {"a": 1.0}, 3)
[['a']]
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence

from spadeopt.errors import PlacementInfeasible, SpadeoptError, UsageError
from spadeopt.optimize.cost import objective, partition_loads
from spadeopt.optimize.fatm_problem import problem_for
from spadeopt.optimize.greedy_fuse import greedy_then_absorb
from spadeopt.optimize.legality import (
    channels_of,
    exclusion_groups,
    initial_partitions,
    pe_cycle_of,
)
from spadeopt.optimize.placement import Placement, pe_graph, place, round_robin
from spadeopt.optimize.problem import FusionProblem, Link
from spadeopt.optimize.rate import scale
from spadeopt.optimize.result import FusionResult
from spadeopt.plan.regions import Region

SEGMENTS = (1, 2, 3)
"""Segments per channel the family tries (a channel cut into more pipeline stages than
three pays more links than it relieves at any width FATM plans)."""


def balanced_segments(ops: Sequence[str], load: Mapping[str, float], p: int) -> list[list[str]]:
    """``ops`` cut into at most ``p`` contiguous segments whose loads are as even as a
    greedy cut at each ``1/p`` share of the total makes them (each segment non-empty)."""
    p = max(1, min(p, len(ops)))
    total = math.fsum(load.get(o, 0.0) for o in ops)
    segs: list[list[str]] = [[]]
    acc = 0.0
    for i, op in enumerate(ops):
        left_ops, left_segs = len(ops) - i, p - len(segs)
        if segs[-1] and (left_ops <= left_segs or (left_segs > 0 and total > 0 and acc >= total * len(segs) / p)):
            segs.append([])
        segs[-1].append(op)
        acc += load.get(op, 0.0)
    return segs


def outside_groups(outside: Sequence[str], problem: FusionProblem) -> list[list[str]]:
    """GreedyFuse (then absorb) of the operators outside the channels alone, at MaxFrac 1:
    their links into the channels count as streams leaving the app (a send per tuple at
    this end), and their colocation and exclusion groups are kept."""
    keep = set(outside)
    links = []
    for lk in problem.links:
        a, b = lk.src in keep, lk.dst in keep
        if a and b:
            links.append(lk)
        elif a or b:
            links.append(Link(lk.src if a else None, lk.dst if b else None, lk.rate, lk.size))

    def within(groups):
        return [g & keep for g in groups if len(g & keep) > 1]

    sub = FusionProblem.build(outside, {o: problem.load[o] for o in outside}, links, problem.comm, max_frac=1.0,
                              min_util=problem.min_util,
                              colocate=within(problem.colocate),
                              exlocate=within(problem.exlocate), unfusable=within(problem.unfusable),
                              acyclic=problem.acyclic)
    return [list(part) for part in greedy_then_absorb(sub).partitions]


def outside_ends(outside: Sequence[str], in_channel: set[str], problem: FusionProblem) -> list[list[str]] | None:
    """The operators outside the channels as two PEs: those upstream of a channel (sources,
    splits) and the rest, downstream (merges, sinks), as the developer's manual fusion
    places a region's split with its producer and its merge with its consumer; ``None``
    when either side is empty or an operator is both (it sits between two regions: one
    PE on either side would loop through the channels).

    >>> from spadeopt.optimize.problem import LinearCommModel
    >>> pr = FusionProblem.build(["s", "x", "c0", "c1", "m", "k"], dict.fromkeys("s x c0 c1 m k".split(), 0.1),
    ...     [Link("s", "x", 1.0, 8.0), Link("x", "c0", 1.0, 8.0), Link("x", "c1", 1.0, 8.0),
    ...      Link("c0", "m", 1.0, 8.0), Link("c1", "m", 1.0, 8.0), Link("m", "k", 1.0, 8.0)], LinearCommModel(1e-6))
    >>> outside_ends(["s", "x", "m", "k"], {"c0", "c1"}, pr)
    [['s', 'x'], ['m', 'k']]
    """
    succ: dict[str, list[str]] = {}
    pred: dict[str, list[str]] = {}
    for lk in problem.links:
        if lk.src is not None and lk.dst is not None:
            succ.setdefault(lk.src, []).append(lk.dst)
            pred.setdefault(lk.dst, []).append(lk.src)

    def reach(start: set[str], step: dict[str, list[str]]) -> set[str]:
        seen, work = set(), list(start)
        while work:
            for nxt in step.get(work.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    work.append(nxt)
        return seen

    up, down = reach(in_channel, pred), reach(in_channel, succ)
    first = [o for o in outside if o in up]
    rest = [o for o in outside if o not in up]
    if not first or not rest or any(o in down for o in first):
        return None
    return [first, rest]


def symmetric_groups(physical_ops: Sequence[str], regions: Sequence[Region], load: Mapping[str, float],
                     p: int, outside_fused: Sequence[Sequence[str]] | None = None) -> list[list[str]]:
    """The partition of one member of the family (module docstring): every wide region's
    channels cut into ``p`` balanced segments (``load``: the logical operators' profiled
    loads), everything else one group, or ``outside_fused``'s groups when given."""
    groups: list[list[str]] = []
    in_channel: set[str] = set()
    for r in regions:
        if r.width < 2:
            continue
        for seg in balanced_segments(r.operators, load, p):
            for c in range(r.width):
                group = [Region.channel_op(o, c) for o in seg]
                in_channel.update(group)
                groups.append(group)
    outside = [o for o in physical_ops if o not in in_channel]
    if outside_fused is not None:
        groups += [list(g) for g in outside_fused]
    elif outside:
        groups.append(outside)
    return groups


def legal(groups: Sequence[Sequence[str]], problem: FusionProblem) -> bool:
    """Whether ``groups`` keep colocation groups whole and every exclusion and channel rule
    (and, with ``problem.acyclic``, make no cycle of PEs: FALL's shape, the split and the
    merge in one PE around the channels, does).
    The problem's initial partitions and exclusion groups are computed once per problem
    structure (``problem.shared``), not once per member of the family."""
    where = {op: i for i, g in enumerate(groups) for op in g}
    if set(where) != set(problem.operators):
        return False
    shared = problem.shared
    initial = shared.get("initial_partitions")
    if initial is None:
        initial = shared["initial_partitions"] = initial_partitions(problem)
    for part in initial:
        if len(part) > 1 and len({where[op] for op in part}) > 1:
            return False
    excl = shared.get("exclusion_groups")
    if excl is None:
        excl = shared["exclusion_groups"] = exclusion_groups(problem)
    for eg in excl:
        if len({where[op] for op in eg.members}) < len(eg.members):
            return False
    try:
        for g in groups:
            channels_of(g, problem)
    except UsageError:
        return False
    return not problem.acyclic or pe_cycle_of(groups, problem) is None


def placed(groups: Sequence[Sequence[str]], problem: FusionProblem, nodes: int, cores: int,
           capacity_frac: float, comp_loads: Sequence[float] = ()) -> tuple[tuple[str, ...], Placement]:
    """PE ids and their nodes: FATM's placement of ``groups`` at ``problem``'s rate, or
    (when they do not fit there) the PEs dealt round robin over the nodes. ``comp_loads``:
    the groups' CompLoads when the caller has them (``pe_graph``)."""
    ids = tuple(f"p{i}" for i in range(len(groups)))
    loads, links = pe_graph([sorted(g) for g in groups], problem, ids, comp_loads)
    try:
        return ids, place(loads, links, nodes, cores, capacity_frac)
    except PlacementInfeasible:
        return ids, round_robin(loads, links, nodes, cores, capacity_frac)


def family(entry, prof, logical_load: Mapping[str, float], comm, nodes: int, cores: int, capacity_frac: float,
           regions: Sequence[Region], problems: Callable[[float], FusionProblem] | None = None
           ) -> Iterator[tuple[int, list[list[str]], FusionProblem, float, tuple, object, tuple]]:
    """Each legal member of the family for one width vector: ``(p, groups, problem, factor,
    pe_ids, placement, loads)``, ``loads`` the groups' ``cost.partition_loads`` (the
    objective and each group's CompLoad, computed once for placement and :func:`as_result`). ``entry`` is the vector's ``fatm_physical.PhysicalEntry``, ``prof``
    its planning profile and ``logical_load`` the logical operators' loads (segments are
    balanced on them); the problem is the physical one at the ``factor`` (times the
    profiled rate) that fills 90 % of the cores with operator load, where placement is
    judged. ``problems(k)``, when given, is that problem (``problem_for`` of the scaled
    ``prof``, MaxFrac and MinUtil 1: e.g. a known problem of the vector rescaled)."""
    physical_ops = [op.name for op in entry.graph.operators]
    total = math.fsum(prof.load.values())
    k = 0.9 * nodes * cores / total if total > 0 else 1.0
    problem = (problems(k) if problems is not None
               else problem_for(entry.graph, scale(prof, k), comm, 1.0, 1.0, entry.memo))
    seen: set[tuple[tuple[str, ...], ...]] = set()
    in_channel = {Region.channel_op(o, c) for r in regions if r.width > 1 for o in r.operators for c in range(r.width)}
    outside = [o for o in physical_ops if o not in in_channel]
    variants: list[Sequence[Sequence[str]] | None] = [None]
    if len(outside) > 1:
        try:
            variants.append(outside_groups(outside, problem))
        except SpadeoptError:
            pass
        ends = outside_ends(outside, in_channel, problem)
        if ends is not None:
            variants.append(ends)
    for p, fused_outside in itertools.product(SEGMENTS, variants):
        groups = symmetric_groups(physical_ops, regions, logical_load, p, fused_outside)
        key = tuple(tuple(g) for g in groups)
        if key in seen or not legal(groups, problem):
            continue
        seen.add(key)
        try:  # CompLoads as pe_graph's metrics give them, bit for bit (a failing comm model fails alike)
            loads = partition_loads([sorted(g) for g in groups], problem)
            ids, where = placed(groups, problem, nodes, cores, capacity_frac, loads[1])
        except SpadeoptError:
            continue
        yield p, groups, problem, k, ids, where, loads


def as_result(groups: Sequence[Sequence[str]], problem: FusionProblem,
              loads: tuple[float, Sequence[float]] | None = None, initial: float | None = None) -> FusionResult:
    """``groups`` as a :class:`FusionResult` of ``problem`` (no merge steps: built, not
    merged). ``loads`` (:func:`family`'s: the objective and each group's CompLoad, in
    ``groups``' order) and ``initial`` (the objective of one operator per PE) are computed
    when not given; an exact sum does not depend on the partitions' order."""
    sorted_groups = [tuple(sorted(g)) for g in groups]
    order = sorted(range(len(groups)), key=sorted_groups.__getitem__)  # disjoint groups: no ties
    parts = tuple(sorted_groups[i] for i in order)
    if loads is None:
        obj, comp = partition_loads(parts, problem)
    else:
        obj, comp = loads[0], tuple(loads[1][i] for i in order)
    if initial is None:
        initial = objective([[op] for op in problem.operators], problem)
    return FusionResult(parts, obj, initial, method="symmetric", mergable_rule="symmetric", comp_loads=comp)
