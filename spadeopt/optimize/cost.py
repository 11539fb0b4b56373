"""The definitions of digest 003 §5.2, evaluated for one partition (a set of operators).

Reference functions (``oper_load``, ``rate``, ``size``, ``comm_load``, ``comp_load``,
``effective_util``, ``saturated``, ``underutilized``, ``connected``, ``merge_benefit``,
``objective``) compute each quantity from scratch in O(links touching the partition).
They are the specification; tests and ``explain`` use them.

:class:`PartitionBook` is the incremental bookkeeping GreedyFuse runs on. Each live
partition keeps its OperLoad, Rate, byte rate and a neighbour map (neighbour -> summed
tuple rate and byte rate of all links between the two, both directions). A merge combines
two neighbour maps (the busier side's record and map become the union's, under a fresh
id); no link is looked at again after start-up. :func:`partition_loads` gives
:func:`objective` and every partition's CompLoad of a complete partitioning in one pass
over the links (the same fsums as the reference functions, so the same bits).

Definitions (link-level form, digest §8 "use the link-level form and document it"):

* ``Rate(P)``: sum of the tuple rates of links with exactly one end in ``P``, in and out.
  External links (an end of ``None``) always count. A link is counted once per partition
  it touches, so ``MergeBenefit(Pi, Pj) = 2 x`` the rate of the links between them.
* ``Size(P)``: rate-weighted mean tuple size of those links, ``Σ byte-rate / Σ rate``;
  0 when no tuples cross.
* ``CommLoad(P) = v(Rate(P), Size(P))``; ``CompLoad = OperLoad + CommLoad``.
* ``EffectiveUtil(P) = OperLoad / CompLoad``, defined as 1.0 when ``CompLoad == 0``.
* ``Saturated(P) ≡ CompLoad > MaxFrac``; ``Underutilized(P) ≡ EffectiveUtil < MinUtil``.

Floating point: sums over links use ``math.fsum`` (exactly rounded, hence independent of
the order links were declared in). The bookkeeping derives merged values with commutative
two-operand arithmetic, so its numbers depend only on which merges happen, not on
declaration order. They can differ from the reference functions in the last bits;
compare with :data:`REL_TOL`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from spadeopt.errors import OptimizeError, UsageError
from spadeopt.optimize.legality import channels_of
from spadeopt.optimize.problem import FusionProblem, Link, fmt_names

REL_TOL = 1e-9
"""Relative tolerance for comparing loads computed along different arithmetic paths."""


@dataclass(frozen=True)
class PartitionMetrics:
    """All §5.2 quantities of one partition."""

    oper_load: float
    rate: float
    size: float
    comm_load: float
    comp_load: float
    effective_util: float
    saturated: bool
    underutilized: bool


def exceeds_max_frac(comp: float, max_frac: float) -> bool:
    """``comp > max_frac`` beyond rounding noise (used where values from two paths meet)."""
    return comp > max_frac + REL_TOL * max(1.0, max_frac)


def crossing_links(partition: frozenset[str], problem: FusionProblem) -> Iterator[Link]:
    """The links with exactly one end in ``partition`` (external links included)."""
    _check_partition(partition, problem)
    for op in partition:
        for link in problem.incident[op]:
            other = link.dst if link.src == op else link.src
            if other is None or other not in partition:
                yield link


def oper_load(partition: frozenset[str], problem: FusionProblem) -> float:
    """``OperLoad(P) = Σ u(O)`` over the operators of ``P``."""
    _check_partition(partition, problem)
    return math.fsum(problem.load[op] for op in partition)


def rate(partition: frozenset[str], problem: FusionProblem) -> float:
    """``Rate(P)``: total tuple rate of the links crossing ``P``'s boundary."""
    return math.fsum(link.rate for link in crossing_links(partition, problem))


def size(partition: frozenset[str], problem: FusionProblem) -> float:
    """``Size(P)``: rate-weighted mean tuple size of the crossing links (0 if none)."""
    links = list(crossing_links(partition, problem))
    return _mean_size(math.fsum(lk.rate for lk in links), math.fsum(lk.byte_rate for lk in links))


def comm_load(partition: frozenset[str], problem: FusionProblem) -> float:
    """``CommLoad(P) = v(Rate(P), Size(P))``."""
    return metrics(partition, problem).comm_load


def comp_load(partition: frozenset[str], problem: FusionProblem) -> float:
    """``CompLoad(P) = OperLoad(P) + CommLoad(P)``."""
    return metrics(partition, problem).comp_load


def effective_util(partition: frozenset[str], problem: FusionProblem) -> float:
    """``EffectiveUtil(P) = OperLoad / CompLoad``; 1.0 when ``CompLoad`` is 0."""
    return metrics(partition, problem).effective_util


def saturated(partition: frozenset[str], problem: FusionProblem) -> bool:
    """``Saturated(P) ≡ CompLoad(P) > MaxFrac``."""
    return metrics(partition, problem).saturated


def underutilized(partition: frozenset[str], problem: FusionProblem) -> bool:
    """``Underutilized(P) ≡ EffectiveUtil(P) < MinUtil``."""
    return metrics(partition, problem).underutilized


def metrics(partition: frozenset[str], problem: FusionProblem) -> PartitionMetrics:
    """Every §5.2 quantity of ``partition`` in one pass over its links."""
    links = list(crossing_links(partition, problem))
    tuples = math.fsum(lk.rate for lk in links)
    size_ = _mean_size(tuples, math.fsum(lk.byte_rate for lk in links))
    oper = oper_load(partition, problem)
    comm = evaluate_comm(problem, tuples, size_)
    comp = oper + comm
    util = _util(oper, comp)
    return PartitionMetrics(
        oper_load=oper,
        rate=tuples,
        size=size_,
        comm_load=comm,
        comp_load=comp,
        effective_util=util,
        saturated=comp > problem.max_frac,
        underutilized=util < problem.min_util,
    )


def connected(a: frozenset[str], b: frozenset[str], problem: FusionProblem) -> bool:
    """``Connected(A, B)``: some link joins an operator of ``A`` and one of ``B``."""
    return any(_other_end(lk, a) in b for lk in crossing_links(a, problem))


def rate_between(a: frozenset[str], b: frozenset[str], problem: FusionProblem) -> float:
    """Total tuple rate of the links between ``A`` and ``B``, both directions."""
    return math.fsum(lk.rate for lk in crossing_links(a, problem) if _other_end(lk, a) in b)


def merge_benefit(a: frozenset[str], b: frozenset[str], problem: FusionProblem) -> float:
    """``MergeBenefit(A, B) = Rate(A) + Rate(B) - Rate(A ∪ B)`` (= 2 x rate between)."""
    return rate(a, problem) + rate(b, problem) - rate(a | b, problem)


def objective(partitions: Iterable[Iterable[str]], problem: FusionProblem) -> float:
    """``Σ Rate(P)`` over ``partitions``: the total inter-PE tuple traffic counted per PE."""
    sets = [frozenset(p) for p in partitions]
    return math.fsum(lk.rate for p in sets for lk in crossing_links(p, problem))


def partition_loads(partitions: Sequence[Iterable[str]], problem: FusionProblem) -> tuple[float, tuple[float, ...]]:
    """``objective(partitions)`` and every partition's ``comp_load`` (as :func:`metrics`
    computes it) in one pass over the links, for ``partitions`` that hold every operator
    exactly once. Sums are ``fsum`` over the same values, so the numbers are the
    reference functions' bit for bit; ``OptimizeError`` from the communication model is
    raised for the first partition, in order, that provokes it, as :func:`metrics` would."""
    owner: dict[str, int] = {}
    for i, part in enumerate(partitions):
        for op in part:
            owner[op] = i
    rates: list[list[float]] = [[] for _ in partitions]
    byte_rates: list[list[float]] = [[] for _ in partitions]
    for lk in problem.links:
        i = None if lk.src is None else owner[lk.src]
        j = None if lk.dst is None else owner[lk.dst]
        if i == j:
            continue  # inside one partition
        r, br = lk.rate, lk.byte_rate
        if i is not None:
            rates[i].append(r)
            byte_rates[i].append(br)
        if j is not None:
            rates[j].append(r)
            byte_rates[j].append(br)
    load = problem.load
    comp = []
    for i, part in enumerate(partitions):
        tuples = math.fsum(rates[i])
        oper = math.fsum(load[op] for op in part)
        comp.append(oper + evaluate_comm(problem, tuples, _mean_size(tuples, math.fsum(byte_rates[i]))))
    return math.fsum(r for rs in rates for r in rs), tuple(comp)


class _Part:
    """Working state of one live partition inside :class:`PartitionBook`."""

    __slots__ = (
        "members",
        "key",
        "oper",
        "rate",
        "bytes",
        "n_ext",
        "nbr",
        "groups",
        "chan",
        "comp",
        "util",
        "rank",
    )

    def __init__(self, members: frozenset[str], groups: frozenset[int], key: str, rank: int, oper: float,
                 rate_: float, bytes_: float, n_ext: int, comp: float, util: float) -> None:
        self.members = members
        self.key = key  # smallest member name
        self.rank = rank  # position of ``key`` among the sorted operator names
        self.oper = oper
        self.rate = rate_
        self.bytes = bytes_
        self.n_ext = n_ext  # external links: never saved, keep Rate > 0 exactly
        self.nbr: dict[int, tuple[float, float]] = {}
        self.groups = groups
        self.chan: dict[int, int] | None = None  # region -> channel of its channel copies (legality)
        self.comp = comp
        self.util = util


@dataclass(frozen=True)
class MergedStats:
    """OperLoad, Rate, byte rate and CompLoad of the union of two live partitions."""

    oper: float
    rate: float
    bytes: float
    comp: float


class BookLayout:
    """What a :class:`PartitionBook` derives from the problem's structure and its initial
    partitions alone: the partitions in id order (smallest member name first), their
    smallest member, its rank among the sorted operator names and their exclusion groups;
    for each link whether it lies inside a partition (``None``), is external (``(i,)``)
    or joins partitions ``i`` and ``j`` (``(i, j, q)``, ``q`` indexing ``pairs``); the
    external link count per partition. Problems that differ only in their numbers (e.g.
    :meth:`FusionProblem.rescaled`) share one. ``known`` maps partitions to their
    exclusion groups and channel map when the caller has them (GreedyFuse's first phase
    ends with them, equal to what is derived here: its second phase starts from there)."""

    __slots__ = ("members", "keys", "ranks", "key_ranks", "groups", "chans", "ends", "pairs", "n_ext", "touch",
                 "pair_links")

    def __init__(self, problem: FusionProblem, initial: Iterable[frozenset[str]],
                 exclusion: dict[str, frozenset[int]],
                 known: Mapping[frozenset[str], tuple[frozenset[int], dict[int, int] | None]] | None = None) -> None:
        ranks = problem.shared.get("ranks")
        if ranks is None:
            ranks = problem.shared["ranks"] = {op: i for i, op in enumerate(sorted(problem.operators))}
        self.ranks: dict[str, int] = ranks
        self.members: list[frozenset[str]] = sorted(initial, key=min)
        self.keys = [min(m) for m in self.members]
        self.key_ranks = [ranks[k] for k in self.keys]
        empty: frozenset[int] = frozenset()
        owner: dict[str, int] = {}
        self.groups: list[frozenset[int]] = []
        for pid, members in enumerate(self.members):
            for op in members:
                owner[op] = pid
            if known is not None:
                self.groups.append(known[members][0])
            elif len(members) == 1:
                self.groups.append(exclusion.get(self.keys[pid], empty))
            else:
                self.groups.append(frozenset().union(*(exclusion.get(op, empty) for op in members)))
        if not (problem.channels or problem.apart):
            self.chans = None
        elif known is not None:
            self.chans = [known[m][1] for m in self.members]
        else:
            self.chans = [channels_of(m, problem) for m in self.members]
        self.n_ext = [0] * len(self.members)
        pair_index: dict[tuple[int, int], int] = {}
        self.pairs: list[tuple[int, int]] = []
        self.ends: list[tuple[int, ...] | None] = []
        for link in problem.links:
            if link.src is None or link.dst is None:
                i = owner[link.dst if link.src is None else link.src]
                self.n_ext[i] += 1
                self.ends.append((i,))
                continue
            i, j = owner[link.src], owner[link.dst]
            if i == j:
                self.ends.append(None)
                continue
            key = (i, j) if i < j else (j, i)
            q = pair_index.get(key)
            if q is None:
                q = pair_index[key] = len(self.pairs)
                self.pairs.append(key)
            self.ends.append((i, j, q))
        # the links each partition's Rate sums and each pair's shared rate, by index, in link order
        self.touch: list[list[int]] = [[] for _ in self.members]
        self.pair_links: list[list[int]] = [[] for _ in self.pairs]
        for x, end in enumerate(self.ends):
            if end is None:
                continue
            self.touch[end[0]].append(x)
            if len(end) == 3:
                self.touch[end[1]].append(x)
                self.pair_links[end[2]].append(x)


class PartitionBook:
    """Incremental §5.2 bookkeeping over a partitioning that only ever merges.

    Partitions are identified by integer ids. Initial ids follow the order of the
    partitions' smallest member names and merged partitions get fresh ids in merge order,
    so ids are independent of operator declaration order. ``exclusion`` maps an operator to
    the indices of the exclusion groups it belongs to; two partitions may share a PE only
    if their group sets are disjoint (see :mod:`spadeopt.optimize.legality`).

    Mutable by design: it is GreedyFuse's private working state, never shared or returned.
    """

    def __init__(
        self,
        problem: FusionProblem,
        initial: Iterable[frozenset[str]],
        exclusion: dict[str, frozenset[int]],
        layout: BookLayout | None = None,
    ) -> None:
        """``layout`` is ``BookLayout(problem, initial, exclusion)`` when the caller keeps
        one (it depends on the problem's structure only, not on its numbers)."""
        self.problem = problem
        layout = BookLayout(problem, initial, exclusion) if layout is None else layout
        self.ranks = layout.ranks
        self._next_id = len(layout.members)
        if len(layout.ends) != len(problem.links):
            raise ValueError("a BookLayout serves only problems of its own structure")
        rate_of = [link.rate for link in problem.links]
        bytes_of = [r * link.size for r, link in zip(rate_of, problem.links, strict=True)]  # Link.byte_rate
        fsum = math.fsum
        load, cost, inf = problem.load, problem.comm.cost, math.inf
        parts: dict[int, _Part] = {}
        crossing: list[float] = []  # every link end on a partition boundary: the objective's terms
        for pid, members in enumerate(layout.members):
            # fsum of one or two terms is the float sum (+ 0.0: fsum's zero is never -0.0)
            # when that is finite; fsum itself otherwise (it raises where the sum overflows)
            if len(members) == 1:
                oper = load[layout.keys[pid]] + 0.0
            else:
                oper = fsum([load[op] for op in members])
            touch = layout.touch[pid]
            if len(touch) == 2:
                x, y = touch
                r1, r2, b1, b2 = rate_of[x], rate_of[y], bytes_of[x], bytes_of[y]
                crossing.append(r1)
                crossing.append(r2)
                tuples, bytes_ = r1 + r2, b1 + b2
                tuples = tuples + 0.0 if tuples < inf else fsum([r1, r2])
                bytes_ = bytes_ + 0.0 if bytes_ < inf else fsum([b1, b2])
            else:
                rates = [rate_of[x] for x in touch]
                crossing += rates
                tuples = fsum(rates)
                bytes_ = fsum([bytes_of[x] for x in touch])
            size_ = bytes_ / tuples if tuples > 0 else 0.0  # _mean_size
            comm = cost(tuples, size_)
            if not (type(comm) is float and 0.0 <= comm < inf):
                comm = evaluate_comm(problem, tuples, size_)
            comp = oper + comm
            parts[pid] = _Part(members, layout.groups[pid], layout.keys[pid], layout.key_ranks[pid], oper, tuples,
                               bytes_, layout.n_ext[pid], comp, oper / comp if comp > 0 else 1.0)  # _util
            if layout.chans is not None:
                parts[pid].chan = layout.chans[pid]
        for (a, b), xs in zip(layout.pairs, layout.pair_links, strict=True):
            if len(xs) == 1:  # fsum of one term (above)
                value = (rate_of[xs[0]] + 0.0, bytes_of[xs[0]] + 0.0)
            else:
                value = (fsum([rate_of[x] for x in xs]), fsum([bytes_of[x] for x in xs]))
            parts[a].nbr[b] = value
            parts[b].nbr[a] = value
        self.parts = parts
        self._objective = fsum(crossing)  # fsum is exact: the order of its terms does not matter

    def ids(self) -> list[int]:
        """Live partition ids, ascending."""
        return sorted(self.parts)

    def merged(self, a: int, b: int) -> MergedStats:
        """Stats of ``A ∪ B`` without merging. Symmetric in ``a`` and ``b``, bit for bit."""
        return MergedStats(*self.merged_values(a, b))

    def merged_values(self, a: int, b: int) -> tuple[float, float, float, float]:
        """:meth:`merged` as a plain ``(oper, rate, bytes, comp)`` tuple (GreedyFuse's hot path)."""
        pa, pb = self.parts[a], self.parts[b]
        oper = pa.oper + pb.oper
        na, nb = pa.nbr, pb.nbr
        isolated = (pa.n_ext + pb.n_ext == 0 and (not na or (len(na) == 1 and b in na))
                    and (not nb or (len(nb) == 1 and a in nb)))
        if isolated:
            tuples = byte_rate = 0.0
        else:
            r_ab, b_ab = na.get(b, (0.0, 0.0))
            tuples = max(0.0, (pa.rate + pb.rate) - 2.0 * r_ab)
            byte_rate = max(0.0, (pa.bytes + pb.bytes) - 2.0 * b_ab)
        comp = oper + evaluate_comm(self.problem, tuples, _mean_size(tuples, byte_rate))
        return oper, tuples, byte_rate, comp

    def objective(self) -> float:
        """``objective`` of the initial partitioning (what :func:`objective` returns for it)."""
        return self._objective

    def merge(self, a: int, b: int, stats: tuple[float, float, float, float] | None = None) -> int:
        """Replace live partitions ``a`` and ``b`` by their union; return the new id.
        ``stats`` is :meth:`merged_values` of the pair when the caller has it already.

        The record of the side with more neighbours is reused for the union (under the
        new id, so entries naming ``a`` or ``b`` become stale): only the other side's
        neighbours are added to its map."""
        oper, rate_, bytes_, comp = self.merged_values(a, b) if stats is None else stats
        parts = self.parts
        pa, pb = parts.pop(a), parts.pop(b)
        if len(pb.nbr) > len(pa.nbr):
            a, b, pa, pb = b, a, pb, pa
        nid = self._next_id
        self._next_id += 1
        # the union copies its left operand's table: put the bigger side there (equal sets either way)
        pa.members = pa.members | pb.members if len(pa.members) >= len(pb.members) else pb.members | pa.members
        if pb.groups:
            pa.groups = pa.groups | pb.groups
        if pb.chan:
            pa.chan = {**pa.chan, **pb.chan} if pa.chan else pb.chan
        if pb.key < pa.key:
            pa.key, pa.rank = pb.key, pb.rank
        pa.oper, pa.rate, pa.bytes, pa.comp = oper, rate_, bytes_, comp
        pa.util = _util(oper, comp)
        pa.n_ext += pb.n_ext
        na, nb = pa.nbr, pb.nbr
        del na[b]
        for k, x in na.items():  # values change, keys do not: safe while iterating
            knbr = parts[k].nbr
            del knbr[a]
            y = nb.get(k)
            if y is None:
                knbr[nid] = x
            else:
                value = (x[0] + y[0], x[1] + y[1])
                na[k] = value
                del knbr[b]
                knbr[nid] = value
        for k, y in nb.items():
            if k == a or k in na:
                continue
            na[k] = y
            knbr = parts[k].nbr
            del knbr[b]
            knbr[nid] = y
        parts[nid] = pa
        return nid


def _mean_size(tuples: float, byte_rate: float) -> float:
    return byte_rate / tuples if tuples > 0 else 0.0


def _util(oper: float, comp: float) -> float:
    return oper / comp if comp > 0 else 1.0


def evaluate_comm(problem: FusionProblem, tuples: float, size_: float) -> float:
    """``v(tuples, size_)`` of ``problem.comm``; ``OptimizeError`` if it is not a load >= 0."""
    value = problem.comm.cost(tuples, size_)
    if type(value) is float and 0.0 <= value < math.inf:
        return value  # the common case, as below
    if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
        msg = (
            f"communication model {type(problem.comm).__name__} returned {value!r} for "
            f"rate {tuples} tuples/s, size {size_} bytes; it must return a finite CPU "
            "fraction >= 0"
        )
        raise OptimizeError(msg)
    return float(value)


def _other_end(link: Link, partition: frozenset[str]) -> str | None:
    return link.dst if link.src in partition else link.src


def _check_partition(partition: frozenset[str], problem: FusionProblem) -> None:
    if not partition:
        msg = "a partition must hold at least one operator; got an empty set"
        raise UsageError(msg)
    if not partition <= problem.operator_set:
        unknown = partition - problem.operator_set
        msg = f"partition names unknown operator(s) {fmt_names(unknown)}"
        raise UsageError(msg)
