"""The channel quotient: GreedyFuse on two channels per replicated region, expanded to all.

A width vector's physical problem holds ``w`` copies of each replicated region's channel,
alike under the uniform key assumption (each copy has ``1/w`` of the region's load and
link rates: :func:`spadeopt.optimize.widths.physical_profile`). GreedyFuse on it costs
O((n + L) log L) in the physical operators and links, which grow with the widths (a
200-operator chain planned for 64 cores has physical graphs of up to 1,200 operators).
On the physical problem GreedyFuse treats channel 0 apart (operator names order its
pairs first, so it is the channel fused with the split or the merge) and every other
channel alike; the quotient keeps :data:`KEEP` channels, channel 1 standing for the rest.

Algorithm::

    quotient = the operators outside every channel + channels 0 .. KEEP-1 of every region
               links: both ends kept -> kept; one end in a dropped channel -> an external
               link at its kept end (None at the other); both ends dropped -> gone
               annotation groups: their kept members (groups left with one member dropped)
    GreedyFuse (+ absorb) on the quotient at the same MaxFrac, MinUtil and rate
    expand: each quotient partition P stays; for every dropped channel c, the copies in
               channel c of P's channel-(KEEP-1) operators (their twins) make one more partition
    cost the expansion on the physical problem (cost.partition_loads); a partition over
               MaxFrac or an illegal expansion fails the attempt; place it as FATM does

Invariants:

- the expansion holds every physical operator once: twins are a bijection from channel
  ``KEEP - 1`` of a region onto each dropped channel (a twin's name is the kept name
  with its trailing channel number replaced, checked against ``FusionProblem.channels``
  when the quotient is built; :meth:`Quotient.of` gives ``None`` when a problem does
  not have that shape or no region is wider than ``KEEP``);
- a quotient partition's CompLoad is the physical CompLoad of the same operators in the
  expansion: a dropped operator never shares a PE with a kept one (a replica holds only
  one dropped channel's copies), so each of its links to a kept operator crosses, as
  its external stand-in does. GreedyFuse's MaxFrac, MinUtil and benefits are therefore
  the physical ones for every partition it forms;
- a replica of a partition that also holds operators outside the channels (channel 1's
  head fused with a split) lacks them, so its CompLoad differs: it is computed on the
  physical problem, and the attempt fails when it is over MaxFrac;
- no two channels of one region share a PE (the quotient keeps the channel rule for
  its channels; a replica holds one channel of each region), and the physical problem's
  other legality rules are checked on the expansion (:func:`spadeopt.optimize.symmetric.legal`);
- deterministic: a pure function of the physical problem.

Cost: GreedyFuse on ``n_out + KEEP x sum |region|`` operators instead of
``n_out + sum w |region|``; building the quotient's numbers, the expansion, its costing
and placement are linear in the physical problem's links (no heap, no merge). What it
is not: GreedyFuse on the physical problem, which may fuse channels 2 .. w-1 otherwise
than channel 1 (when channels 0 and 1 cannot take an operator outside the channels and
channel 2 can). FATM rates width vectors with it and plans the vectors it may choose on
the full physical problem (:mod:`spadeopt.optimize.fatm_search`).

>>> from spadeopt.optimize.problem import LinearCommModel
>>> ops = ["s", "r__split", "a__0", "b__0", "a__1", "b__1", "a__2", "b__2", "r__merge", "k"]
>>> links = [("s", "r__split", 90.0, 8.0), ("r__merge", "k", 90.0, 8.0)]
>>> for c in range(3):
...     links += [("r__split", f"a__{c}", 30.0, 8.0), (f"a__{c}", f"b__{c}", 30.0, 8.0),
...               (f"b__{c}", "r__merge", 30.0, 8.0)]
>>> p = FusionProblem.build(ops, dict.fromkeys(ops, 0.05), links, LinearCommModel(1e-4),
...                         channels=[[[f"a__{c}", f"b__{c}"] for c in range(3)]])
>>> q = Quotient.of(p)
>>> q.problem(p).operators
('s', 'r__split', 'a__0', 'b__0', 'a__1', 'b__1', 'r__merge', 'k')
>>> [(lk.src, lk.dst) for lk in q.problem(p).links if lk.src is None or lk.dst is None]
[('r__split', None), (None, 'r__merge')]
>>> q.expand([("a__0", "b__0", "r__split", "s"), ("a__1", "b__1"), ("k", "r__merge")])
(('a__0', 'b__0', 'r__split', 's'), ('a__1', 'b__1'), ('a__2', 'b__2'), ('k', 'r__merge'))
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from spadeopt.optimize.cost import partition_loads
from spadeopt.optimize.greedy_fuse import greedy_fuse, greedy_then_absorb
from spadeopt.optimize.problem import FusionProblem, with_ends
from spadeopt.optimize.result import FusionResult, canonical, saturation_warnings
from spadeopt.optimize.symmetric import legal

KEEP = 2
"""Channels the quotient keeps of each region: channel 0, which GreedyFuse may fuse with
operators outside the channels (the split, the merge: names order it first), and channel
1, which stands for every other channel. With channel 0 alone, a channel-0 PE that took
the merge left the other channels' copies of its operators stranded as a PE of their own
(the chain at 1 x 16 cores, width 5: 7 % slower plans than GreedyFuse on the physical
problem); with two, the ratings measured were the physical ones."""


class Quotient:
    """The quotient's structure for one physical problem structure (operators, link ends,
    annotations): which operators it keeps, each kept link's index in the physical
    links, and each channel-0 operator's twins in channels 1, 2, ...

    :meth:`problem` gives the quotient of a physical problem of that structure at its
    numbers (the first call builds it, later ones rescale it: one structure, many rates)."""

    __slots__ = ("kept", "links", "twins", "groups", "check", "_first")

    def __init__(self, kept: tuple[str, ...], links: tuple[tuple[int, str | None, str | None], ...],
                 twins: Mapping[str, tuple[str, ...]], groups: tuple[tuple[frozenset[str], ...], ...],
                 check: bool = True) -> None:
        self.kept, self.links, self.twins, self.groups = kept, links, twins, groups
        self.check = check  # whether an expansion's legality must be checked (see replicated_groups)
        self._first: dict[tuple[float, float], FusionProblem] = {}

    @classmethod
    def of(cls, problem: FusionProblem, keep: int | None = None) -> Quotient | None:
        """The quotient of ``problem`` keeping channels ``0 .. keep - 1`` of every region
        (channel ``keep - 1`` stands for the dropped ones), or ``None`` when no region is
        wider than ``keep`` or a channel's operators are not channel ``keep - 1``'s with
        another trailing channel number."""
        keep = KEEP if keep is None else keep
        if keep < 2:
            raise ValueError(f"a quotient keeps at least 2 channels; got {keep}")
        twins: dict[str, list[str]] = {}
        for region in problem.channels:
            if len(region) <= keep:
                continue
            rep, suffix = region[keep - 1], str(keep - 1)
            if any(not op.endswith(suffix) for op in rep):
                return None
            for c, chan in enumerate(region[keep:], start=keep):
                mapped = {op[:-len(suffix)] + str(c): op for op in rep}
                if set(mapped) != set(chan):
                    return None
                for twin, op in mapped.items():
                    twins.setdefault(op, []).append(twin)
        if not twins:
            return None
        dropped = {twin for ts in twins.values() for twin in ts}
        kept = tuple(op for op in problem.operators if op not in dropped)
        links = []
        for i, lk in enumerate(problem.links):
            src = None if lk.src in dropped else lk.src
            dst = None if lk.dst in dropped else lk.dst
            if src is not None or dst is not None:
                links.append((i, src, dst))

        def within(groups: Iterable[frozenset[str]]) -> tuple[frozenset[str], ...]:
            return tuple(g - dropped for g in groups if len(g - dropped) > 1)

        channels = tuple(tuple(chan for chan in region[:keep]) for region in problem.channels)
        # a key exchange's sides hold every channel of their regions alike: the kept ones
        # keep the rule, and a replica holds the same side as its original
        apart = tuple((a - dropped, b - dropped) for a, b in problem.apart if a - dropped and b - dropped)
        groups = (within(problem.colocate), within(problem.exlocate), within(problem.unfusable), channels, apart)
        rep = {twin: op for op, ts in twins.items() for twin in ts}
        check = not all(replicated_groups(g, rep) for g in (problem.colocate, problem.exlocate, problem.unfusable))
        return cls(kept, tuple(links), {op: tuple(t) for op, t in twins.items()}, groups, check)

    def problem(self, physical: FusionProblem) -> FusionProblem:
        """The quotient of ``physical`` (a problem of this quotient's structure) at its
        loads, link rates, MaxFrac and MinUtil."""
        load = physical.load
        plinks = physical.links
        kload = {op: load[op] for op in self.kept}
        links = with_ends(plinks, self.links)  # Link(src, dst, plinks[i].rate, plinks[i].size)
        key = (physical.max_frac, physical.min_util)
        first = self._first.get(key)
        if first is None:
            colocate, exlocate, unfusable, channels, apart = self.groups
            first = self._first[key] = FusionProblem(self.kept, kload, links, physical.comm, physical.max_frac,
                                                     physical.min_util, colocate, exlocate, unfusable, channels,
                                                     apart, physical.acyclic)
            return first
        return first.rescaled(kload, links)

    def expand(self, partitions: Iterable[Iterable[str]]) -> tuple[tuple[str, ...], ...]:
        """Quotient ``partitions`` expanded to the physical operators (module docstring), canonical."""
        twins = self.twins
        out: list[list[str]] = []
        for part in partitions:
            part = list(part)
            out.append(part)
            rows: dict[int, list[str]] = {}
            for op in part:
                for c, twin in enumerate(twins.get(op, ())):
                    rows.setdefault(c, []).append(twin)
            out += rows.values()
        return canonical(out)


def quotient_fuse(quotient: Quotient, physical: FusionProblem, absorb: bool = True) -> FusionResult | None:
    """GreedyFuse (then absorb, unless ``absorb`` is off) of ``physical``'s quotient,
    expanded onto ``physical`` and costed on it: the result's CompLoads, objective and
    saturation warnings are the physical problem's. ``None`` when the expansion breaks a
    legality rule of ``physical`` (an annotation group across kept and dropped operators)."""
    problem = quotient.problem(physical)
    got = greedy_then_absorb(problem, steps=False) if absorb else greedy_fuse(problem)
    parts = quotient.expand(got.partitions)
    if (quotient.check or physical.acyclic) and not legal(parts, physical):  # acyclic: a replica may close a cycle
        return None
    obj, comp = partition_loads(parts, physical)
    return FusionResult(parts, obj, got.objective_initial, (), saturation_warnings(parts, physical, comp),
                        method="quotient", mergable_rule=got.mergable_rule, comp_loads=comp)


def replicated_groups(groups: Iterable[frozenset[str]], rep: Mapping[str, str]) -> bool:
    """Whether every group of one kind (colocate, exlocate or unfusable) with a dropped
    member (``rep``: a dropped operator's kept original) is all dropped, in one channel,
    and the copy of a group of that kind: then no expansion of a legal quotient
    partitioning breaks it (a kept group is kept whole or apart by GreedyFuse, a dropped
    one is its original's copy), and :func:`quotient_fuse` skips the check.

    >>> replicated_groups([frozenset({"a__1", "b__1"}), frozenset({"a__2", "b__2"})], {"a__2": "a__1", "b__2": "b__1"})
    True
    >>> replicated_groups([frozenset({"x", "a__2"})], {"a__2": "a__1"})
    False
    """
    groups = list(groups)
    have = set(groups)
    for g in groups:
        dropped = [op for op in g if op in rep]
        if not dropped:
            continue
        if len(dropped) < len(g):
            return False
        chans = {op[len(op.rstrip("0123456789")):] for op in g}
        if len(chans) != 1 or frozenset(rep[op] for op in g) not in have:
            return False
    return True
