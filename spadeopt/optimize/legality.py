"""May two partitions share a PE? Legality only; whether they should is GreedyFuse's call.

Three annotations constrain fusion (digest §5, DESIGN §6):

* ``colocate`` groups must end up in one PE. They are not checked pairwise: the optimizers
  start from :func:`initial_partitions`, where every connected group of colocation
  annotations (groups sharing an operator are joined) is already one partition. A
  colocated partition is kept even if it is saturated or its members are not linked.
* ``exlocate`` groups must be spread: no two members of a group in one PE.
* ``unfusable`` groups (e.g. a feedback loop that would close through a tuple-generating
  input port inside one PE, digest §2.6) are treated exactly like ``exlocate``.
* ``channels``: the channel copies of a replicated parallel region. No PE holds operators
  of two channels of one region (paper 000's first rule: replicas of different channels
  never share a thread): such a PE runs its channels one after the other and feeds the
  ordered merge over several links at once. Tracked per partition as a map region ->
  channel (:func:`channels_of`, :func:`channel_clash`).
* ``apart``: the two sides of a key exchange (the upstream region's channels and their
  senders; the receivers and the downstream region's channels). No PE holds operators of
  both: a PE of upstream channel c and downstream channel d sends to every receiver and
  receives from every sender, so two such PEs send to each other, and single-threaded PEs
  in a cycle with bounded queues deadlock once both queues fill (seen: YSB at 8 M events,
  8 channels fused across the exchange). Tracked in the same map as the channels, under
  keys after the regions' (``FusionProblem.sides_of``).

A colocation that would force two members of an exclusion group together is a
contradiction in the annotations; :func:`initial_partitions` raises ``OptimizeError``
naming both annotations.
"""

from __future__ import annotations

from dataclasses import dataclass

from spadeopt.errors import OptimizeError, UsageError
from spadeopt.optimize.problem import FusionProblem, fmt_names


@dataclass(frozen=True)
class Verdict:
    """The answer of :func:`fusion_legal`; ``reason`` says why not (empty when ``ok``)."""

    ok: bool
    reason: str = ""


@dataclass(frozen=True)
class ExclusionGroup:
    """Operators that must be pairwise in different PEs, and the annotation that says so."""

    kind: str  # "exlocation" or "unfusable"
    members: frozenset[str]

    def describe(self, together: frozenset[str] = frozenset()) -> str:
        """``"exlocation annotation {a,b}"``, naming the clashing operators of big groups."""
        text = f"{self.kind} annotation {fmt_names(self.members, limit=12)}"
        clash = sorted(together & self.members)
        if len(self.members) > 2 and len(clash) >= 2:
            text += f" ({clash[0]} and {clash[1]} would share a PE)"
        return text


def exclusion_groups(problem: FusionProblem) -> tuple[ExclusionGroup, ...]:
    """The exlocation and unfusable groups, in a canonical order."""
    groups = {ExclusionGroup("exlocation", g) for g in problem.exlocate}
    groups |= {ExclusionGroup("unfusable", g) for g in problem.unfusable}
    return tuple(sorted(groups, key=lambda g: (g.kind, sorted(g.members))))


def exclusion_index(problem: FusionProblem) -> dict[str, frozenset[int]]:
    """Operator -> indices (into :func:`exclusion_groups`) of the groups it belongs to.

    Two partitions that each respect every group may share a PE iff the unions of their
    members' index sets are disjoint.
    """
    acc: dict[str, set[int]] = {}
    for i, group in enumerate(exclusion_groups(problem)):
        for op in group.members:
            acc.setdefault(op, set()).add(i)
    return {op: frozenset(ix) for op, ix in acc.items()}


def fusion_legal(a: frozenset[str], b: frozenset[str], problem: FusionProblem) -> Verdict:
    """May partitions ``a`` and ``b`` be merged into one PE?

    Illegal when they overlap, or when the union holds two members of one exlocation or
    unfusable group. The reason names the first such annotation in canonical order, e.g.
    ``"exlocation annotation {a,b}"``. Colocation is not checked here (see module doc).
    """
    unknown = (a | b) - problem.operator_set
    if unknown:
        msg = f"fusion_legal: unknown operator(s) {fmt_names(unknown)}"
        raise UsageError(msg)
    if a & b:
        return Verdict(False, f"partitions overlap in {fmt_names(a & b)}")
    union = a | b
    for group in exclusion_groups(problem):
        if len(group.members & union) >= 2:
            return Verdict(False, group.describe(union))
    clash = channel_clash(channels_of(a, problem), channels_of(b, problem))
    if clash is not None:
        r, c1, c2 = clash
        if r >= len(problem.channels):
            pair = problem.apart[r - len(problem.channels)]
            ops = {c: sorted(union & pair[c])[0] for c in (c1, c2)}
            return Verdict(False, f"both sides of a key exchange would share a PE ({ops[0]} and {ops[1]}): "
                                  f"PEs holding both send to each other")
        ops = {c: sorted(union & problem.channels[r][c])[0] for c in (c1, c2)}
        return Verdict(False, f"channels {c1} and {c2} of a parallel region would share a PE "
                              f"({ops[c1]} and {ops[c2]})")
    return Verdict(True)


def channels_of(members, problem: FusionProblem) -> dict[int, int] | None:
    """Region -> channel of the channel copies among ``members``, and ``apart`` item ->
    side (keys after the regions', ``FusionProblem.sides_of``); ``None`` when none is
    either. Raises ``UsageError`` if they already hold two channels of one region or both
    sides of a key exchange."""
    where = problem.sides_of
    if not where:
        return None
    out: dict[int, int] = {}
    for op in members:
        for key, value in where.get(op, ()):
            if out.setdefault(key, value) != value:
                what = ("both sides of a key exchange" if key >= len(problem.channels)
                        else f"channels {out[key]} and {value} of one parallel region")
                raise UsageError(f"partition holds {what} ({op})")
    return out or None


def channel_clash(x: dict[int, int] | None, y: dict[int, int] | None) -> tuple[int, int, int] | None:
    """``(region, channel, other channel)`` if partitions with channel maps ``x`` and ``y``
    hold two channels of one region between them, else ``None``.

    >>> channel_clash({0: 1}, {0: 1, 1: 0}) is None, channel_clash({0: 1}, {0: 0})
    (True, (0, 1, 0))
    """
    if not x or not y:
        return None
    for r, c in x.items():
        other = y.get(r, c)
        if other != c:
            return r, c, other
    return None


def initial_partitions(problem: FusionProblem) -> tuple[frozenset[str], ...]:
    """Starting partitions: joined colocation groups, every other operator alone.

    Ordered by smallest member name. Raises ``OptimizeError`` listing every colocation
    that contradicts an exlocation or unfusable annotation.
    """
    parent = {op: op for op in problem.operators}

    def find(op: str) -> str:
        while parent[op] != op:
            parent[op] = parent[parent[op]]
            op = parent[op]
        return op

    for group in problem.colocate:
        first, *rest = sorted(group)
        for op in rest:
            ra, rb = find(first), find(op)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    comps: dict[str, set[str]] = {}
    for op in problem.operators:
        comps.setdefault(find(op), set()).add(op)
    parts = tuple(sorted((frozenset(c) for c in comps.values()), key=min))
    conflicts = [
        f"colocation {fmt_names(_sources(part, problem), limit=12)} conflicts with "
        f"{group.describe(part)}"
        for part in parts
        if len(part) > 1
        for group in exclusion_groups(problem)
        if len(group.members & part) >= 2
    ]
    if conflicts:
        lines = "\n".join(f"  - {c}" for c in conflicts)
        msg = (
            f"contradictory fusion annotations:\n{lines}\n"
            "Operators cannot be both in one PE and in different PEs; remove one annotation."
        )
        raise OptimizeError(msg)
    return parts


def _sources(part: frozenset[str], problem: FusionProblem) -> frozenset[str]:
    """The members of the colocation annotations that built ``part``."""
    return frozenset().union(*(g for g in problem.colocate if g & part))
