"""The definitions of digest 003 §5.2, evaluated for one partition (a set of operators).

Reference functions (``oper_load``, ``rate``, ``size``, ``comm_load``, ``comp_load``,
``effective_util``, ``saturated``, ``underutilized``, ``connected``, ``merge_benefit``,
``objective``) compute each quantity from scratch in O(links touching the partition).
They are the specification; tests and ``explain`` use them.

:class:`PartitionBook` is the incremental bookkeeping GreedyFuse runs on. Each live
partition keeps its OperLoad, Rate, byte rate and a neighbour map (neighbour -> summed
tuple rate and byte rate of all links between the two, both directions). A merge combines
two neighbour maps; no link is looked at again after start-up.

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
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from spadeopt.errors import OptimizeError, UsageError
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
        "comp",
        "util",
    )

    def __init__(self, members: frozenset[str], groups: frozenset[int]) -> None:
        self.members = members
        self.key = min(members)
        self.oper = 0.0
        self.rate = 0.0
        self.bytes = 0.0
        self.n_ext = 0  # external links: never saved, keep Rate > 0 exactly
        self.nbr: dict[int, tuple[float, float]] = {}
        self.groups = groups
        self.comp = 0.0
        self.util = 1.0


@dataclass(frozen=True)
class MergedStats:
    """OperLoad, Rate, byte rate and CompLoad of the union of two live partitions."""

    oper: float
    rate: float
    bytes: float
    comp: float


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
    ) -> None:
        self.problem = problem
        self.parts: dict[int, _Part] = {}
        ordered = sorted(initial, key=min)
        owner: dict[str, int] = {}
        for pid, members in enumerate(ordered):
            groups = frozenset().union(*(exclusion.get(op, frozenset()) for op in members))
            self.parts[pid] = _Part(members, groups)
            for op in members:
                owner[op] = pid
        self._next_id = len(ordered)
        self._init_stats(owner)

    def _init_stats(self, owner: dict[str, int]) -> None:
        pair_links: dict[tuple[int, int], list[Link]] = {}
        crossing: dict[int, list[Link]] = {pid: [] for pid in self.parts}
        for link in self.problem.links:
            ends = [owner[e] for e in (link.src, link.dst) if e is not None]
            if len(ends) == 1:
                crossing[ends[0]].append(link)
                self.parts[ends[0]].n_ext += 1
            elif ends[0] != ends[1]:
                crossing[ends[0]].append(link)
                crossing[ends[1]].append(link)
                pair_links.setdefault((min(ends), max(ends)), []).append(link)
        for (a, b), links in pair_links.items():
            value = (math.fsum(lk.rate for lk in links), math.fsum(lk.byte_rate for lk in links))
            self.parts[a].nbr[b] = value
            self.parts[b].nbr[a] = value
        for pid, part in self.parts.items():
            part.oper = math.fsum(self.problem.load[op] for op in part.members)
            part.rate = math.fsum(lk.rate for lk in crossing[pid])
            part.bytes = math.fsum(lk.byte_rate for lk in crossing[pid])
            size_ = _mean_size(part.rate, part.bytes)
            part.comp = part.oper + evaluate_comm(self.problem, part.rate, size_)
            part.util = _util(part.oper, part.comp)

    def ids(self) -> list[int]:
        """Live partition ids, ascending."""
        return sorted(self.parts)

    def merged(self, a: int, b: int) -> MergedStats:
        """Stats of ``A ∪ B`` without merging. Symmetric in ``a`` and ``b``, bit for bit."""
        pa, pb = self.parts[a], self.parts[b]
        oper = pa.oper + pb.oper
        isolated = pa.nbr.keys() <= {b} and pb.nbr.keys() <= {a} and pa.n_ext + pb.n_ext == 0
        if isolated:
            tuples = byte_rate = 0.0
        else:
            r_ab, b_ab = pa.nbr.get(b, (0.0, 0.0))
            tuples = max(0.0, (pa.rate + pb.rate) - 2.0 * r_ab)
            byte_rate = max(0.0, (pa.bytes + pb.bytes) - 2.0 * b_ab)
        comp = oper + evaluate_comm(self.problem, tuples, _mean_size(tuples, byte_rate))
        return MergedStats(oper=oper, rate=tuples, bytes=byte_rate, comp=comp)

    def merge(self, a: int, b: int) -> int:
        """Replace live partitions ``a`` and ``b`` by their union; return the new id."""
        stats = self.merged(a, b)
        pa, pb = self.parts.pop(a), self.parts.pop(b)
        new = _Part(pa.members | pb.members, pa.groups | pb.groups)
        new.oper, new.rate, new.bytes, new.comp = stats.oper, stats.rate, stats.bytes, stats.comp
        new.util = _util(new.oper, new.comp)
        new.n_ext = pa.n_ext + pb.n_ext
        nid = self._next_id
        self._next_id += 1
        for k in (pa.nbr.keys() | pb.nbr.keys()) - {a, b}:
            value = _add_pair(pa.nbr.get(k), pb.nbr.get(k))
            new.nbr[k] = value
            knbr = self.parts[k].nbr
            knbr.pop(a, None)
            knbr.pop(b, None)
            knbr[nid] = value
        self.parts[nid] = new
        return nid


def _add_pair(x: tuple[float, float] | None, y: tuple[float, float] | None) -> tuple[float, float]:
    if x is None:
        assert y is not None
        return y
    if y is None:
        return x
    return (x[0] + y[0], x[1] + y[1])


def _mean_size(tuples: float, byte_rate: float) -> float:
    return byte_rate / tuples if tuples > 0 else 0.0


def _util(oper: float, comp: float) -> float:
    return oper / comp if comp > 0 else 1.0


def evaluate_comm(problem: FusionProblem, tuples: float, size_: float) -> float:
    """``v(tuples, size_)`` of ``problem.comm``; ``OptimizeError`` if it is not a load >= 0."""
    value = problem.comm.cost(tuples, size_)
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
