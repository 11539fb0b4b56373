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
* ``acyclic`` (``FusionProblem.acyclic``: the build takes aligned checkpoints, record
  074): the PE graph (the quotient of the operator graph by the partitioning) has no
  cycle. A PE forwards checkpoint barrier ``n`` once it has it on every input link, so
  on a cycle of PEs each waits for the other's (``deploy.checkpointed_run.pe_cycle``
  refuses such a run). Two partitions may not merge when a path leads from one to the
  other through a third partition (``a -> x -> b``): the union would close the cycle
  ``ab -> x -> ab``, although the operator graph has none. Unlike the other rules this
  one depends on the rest of the partitioning and can turn false while both sides live
  (a merge elsewhere may join ``x`` and ``y`` of ``a -> x``, ``y -> b``): GreedyFuse
  asks it when it pops a pair, not when it offers one (:class:`PeGraph`). With the flag
  :func:`initial_partitions` also joins every cycle of the start (a feedback loop of the
  operator graph, or a colocation around a path): it must sit inside one PE, so a loop
  that an exclusion group splits (an ``unfusable`` loop into a tuple-generating port)
  cannot take checkpoints under any plan, and ``OptimizeError`` says so.

A colocation that would force two members of an exclusion group together is a
contradiction in the annotations; :func:`initial_partitions` raises ``OptimizeError``
naming both annotations.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from spadeopt.errors import OptimizeError, UsageError
from spadeopt.model.cycles import first_cycle
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


def fusion_legal(a: frozenset[str], b: frozenset[str], problem: FusionProblem,
                 others: Iterable[frozenset[str]] | None = None) -> Verdict:
    """May partitions ``a`` and ``b`` be merged into one PE?

    Illegal when they overlap, or when the union holds two members of one exlocation or
    unfusable group. The reason names the first such annotation in canonical order, e.g.
    ``"exlocation annotation {a,b}"``. Colocation is not checked here (see module doc).
    With ``problem.acyclic``, also illegal when the merge closes a cycle of PEs through
    ``others``, the partitions of the other operators (default: each alone):

    >>> from spadeopt.optimize.problem import LinearCommModel
    >>> p = FusionProblem.build("abx", dict.fromkeys("abx", 0.1), [("a", "x", 1.0, 8.0), ("x", "b", 1.0, 8.0),
    ...     ("a", "b", 1.0, 8.0)], LinearCommModel(1e-6), acyclic=True)
    >>> fusion_legal(frozenset("a"), frozenset("b"), p).reason
    'would close a cycle of PEs {a}->{x}->{b}: an aligned checkpoint barrier cannot cross a PE cycle'
    >>> fusion_legal(frozenset("ax"), frozenset("b"), p).ok
    True
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
    if problem.acyclic:
        rest = [frozenset((op,)) for op in problem.operators if op not in union] if others is None else others
        parts = [a, b, *(p for p in rest if p and p.isdisjoint(union))]
        path = PeGraph(problem, dict(enumerate(parts))).path(0, 1)
        if path is not None:
            shown = "->".join(fmt_names(parts[i], limit=3) for i in path)
            return Verdict(False, f"would close a cycle of PEs {shown}: an aligned checkpoint barrier cannot "
                                  f"cross a PE cycle")
    return Verdict(True)


class PeGraph:
    """The PE graph of a partitioning that only ever merges (partition id -> successor
    and predecessor ids along links), for the ``acyclic`` rule (module doc). Kept by
    GreedyFuse beside its ``PartitionBook`` only when the problem asks for it.

    ``pos`` is a topological order of the partitions (``None`` when the start has a
    cycle), kept valid across merges as Pearce and Kelly's dynamic topological sort
    keeps it across edge insertions: a merge of ``a -> b`` keeps ``a``'s position, and
    each predecessor of ``b`` now out of order moves, with what reaches it, before the
    merged partition and what it reaches. A search for a path from ``x`` to ``y`` then
    visits only partitions between them in that order.

    >>> from spadeopt.optimize.problem import LinearCommModel
    >>> p = FusionProblem.build("abx", dict.fromkeys("abx", 0.1), [("a", "x", 1.0, 8.0), ("x", "b", 1.0, 8.0),
    ...     ("a", "b", 1.0, 8.0)], LinearCommModel(1e-6), acyclic=True)
    >>> g = PeGraph(p, {0: {"a"}, 1: {"b"}, 2: {"x"}})
    >>> g.path(0, 1), g.path(0, 2), g.closes(1, 0)
    ([0, 2, 1], None, True)
    >>> g.merge(0, 2, 3); g.closes(3, 1)
    False
    """

    __slots__ = ("succ", "pred", "pos")

    def __init__(self, problem: FusionProblem, parts: Mapping[int, Iterable[str]]) -> None:
        owner = {op: pid for pid, members in parts.items() for op in members}
        succ: dict[int, set[int]] = {pid: set() for pid in parts}
        pred: dict[int, set[int]] = {pid: set() for pid in parts}
        for lk in problem.links:
            if lk.src is None or lk.dst is None:
                continue
            x, y = owner.get(lk.src), owner.get(lk.dst)
            if x is not None and y is not None and x != y:
                succ[x].add(y)
                pred[y].add(x)
        self.succ, self.pred = succ, pred
        indeg = {pid: len(ps) for pid, ps in pred.items()}
        ready = [pid for pid, d in indeg.items() if d == 0]
        pos: dict[int, int] = {}
        while ready:
            x = ready.pop()
            pos[x] = len(pos)
            for y in succ[x]:
                indeg[y] -= 1
                if indeg[y] == 0:
                    ready.append(y)
        self.pos = pos if len(pos) == len(succ) else None

    def closes(self, a: int, b: int) -> bool:
        """Whether merging ``a`` and ``b`` closes a cycle: a path between them, either way,
        through another partition. Free when the earlier one's only successor is the later
        one, or the later one's only predecessor the earlier one, as along a chain."""
        succ, pred, pos = self.succ, self.pred, self.pos
        if pos is None:  # a start with a cycle: unbounded searches both ways
            return any(self._reach(x, y, None) for x, y in ((a, b), (b, a)))
        x, y = (a, b) if pos[a] < pos[b] else (b, a)  # no path from y to x
        if len(succ[x]) <= (y in succ[x]) or len(pred[y]) <= (x in pred[y]):
            return False
        return self._reach(x, y, pos)

    def _reach(self, x: int, y: int, pos: dict[int, int] | None) -> bool:
        """A path ``x -> z -> ... -> y`` with ``z != y`` (through partitions before ``y``
        in ``pos``, when given)."""
        succ = self.succ
        limit = pos[y] if pos is not None else 0
        work = [z for z in succ[x] if z != y and (pos is None or pos[z] < limit)]
        seen = set(work)
        while work:
            for z in succ[work.pop()]:
                if z == y:
                    return True
                if z not in seen and (pos is None or pos[z] < limit):
                    seen.add(z)
                    work.append(z)
        return False

    def path(self, a: int, b: int) -> list[int] | None:
        """The first path (by ids) ``a -> x -> ... -> b`` or ``b -> x -> ... -> a`` through
        another partition, or None."""
        for x, y in ((a, b), (b, a)):
            back: dict[int, int] = {z: x for z in sorted(self.succ[x]) if z != y}
            work = sorted(back)
            while work:
                z = work.pop(0)
                for nxt in sorted(self.succ[z]):
                    if nxt == y:
                        out = [y, z]
                        while out[-1] != x:
                            out.append(back[out[-1]])
                        return out[::-1]
                    if nxt not in back and nxt != x:
                        back[nxt] = z
                        work.append(nxt)
        return None

    def merge(self, a: int, b: int, new: int) -> None:
        """Partitions ``a`` and ``b`` became ``new`` (a merge :meth:`closes` allowed)."""
        succ, pred, pos = self.succ, self.pred, self.pos
        out = (succ.pop(a) | succ.pop(b)) - {a, b}
        into = (pred.pop(a) | pred.pop(b)) - {a, b}
        for z in out:
            ps = pred[z]
            ps.discard(a)
            ps.discard(b)
            ps.add(new)
        for z in into:
            ss = succ[z]
            ss.discard(a)
            ss.discard(b)
            ss.add(new)
        succ[new], pred[new] = out, into
        if pos is None:
            return
        pa, pb = pos.pop(a), pos.pop(b)
        pos[new] = min(pa, pb)  # the later side's predecessors may now stand after it
        while True:
            late = [z for z in into if pos[z] > pos[new]]
            if not late:
                return
            self._reorder(max(late, key=pos.__getitem__), new)

    def _reorder(self, u: int, v: int) -> None:
        """Pearce-Kelly for an edge ``u -> v`` with ``pos[u] > pos[v]`` (acyclic): what
        reaches ``u`` after ``v`` moves before what ``v`` reaches before ``u``, in the
        positions they held."""
        succ, pred, pos = self.succ, self.pred, self.pos
        assert pos is not None
        ahead = _bounded(v, succ, lambda z: pos[z] < pos[u])
        behind = _bounded(u, pred, lambda z: pos[z] > pos[v])
        moved = sorted(behind, key=pos.__getitem__) + sorted(ahead, key=pos.__getitem__)
        for z, p in zip(moved, sorted(pos[z] for z in moved), strict=True):
            pos[z] = p


def _bounded(start: int, step: Mapping[int, set[int]], keep: Callable[[int], bool]) -> list[int]:
    """``start`` and what it reaches along ``step`` through partitions ``keep`` accepts."""
    seen, work = {start}, [start]
    while work:
        for z in step[work.pop()]:
            if z not in seen and keep(z):
                seen.add(z)
                work.append(z)
    return list(seen)


def pe_cycle_of(partitions: Iterable[Iterable[str]], problem: FusionProblem) -> list[frozenset[str]] | None:
    """A cycle of ``partitions`` along ``problem``'s links (``[p, q, ..., p]``), or None."""
    parts = [frozenset(p) for p in partitions]
    cycle = first_cycle(range(len(parts)), PeGraph(problem, dict(enumerate(parts))).succ)
    return None if cycle is None else [parts[i] for i in cycle]


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
    if problem.acyclic:
        parts = _loops_joined(parts, problem)
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


def _loops_joined(parts: tuple[frozenset[str], ...], problem: FusionProblem) -> tuple[frozenset[str], ...]:
    """``parts`` with every cycle of their PE graph joined into one partition (its strongly
    connected components: the condensation is acyclic). Raises ``OptimizeError`` when an
    exclusion group keeps a joined cycle apart (module doc, ``acyclic``)."""
    import networkx as nx

    g = nx.DiGraph()
    succ = PeGraph(problem, dict(enumerate(parts))).succ
    g.add_nodes_from(range(len(parts)))
    g.add_edges_from((x, y) for x, ys in succ.items() for y in ys)
    joined = [frozenset().union(*(parts[i] for i in comp)) for comp in nx.strongly_connected_components(g)]
    if len(joined) == len(parts):
        return parts
    for part in joined:
        for group in exclusion_groups(problem):
            if len(group.members & part) >= 2:
                raise OptimizeError(
                    f"checkpoints need an acyclic graph of PEs, so the loop through {fmt_names(part, limit=12)} must "
                    f"sit in one PE, but the {group.describe(part)} keeps its operators apart: no plan of this app "
                    f"can take aligned checkpoints (plan it without --checkpoints)")
    return tuple(sorted(joined, key=min))


def _sources(part: frozenset[str], problem: FusionProblem) -> frozenset[str]:
    """The members of the colocation annotations that built ``part``."""
    return frozenset().union(*(g for g in problem.colocate if g & part))
