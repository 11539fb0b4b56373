"""Parallel regions (fission, papers 000 and 002): what may be replicated, apart from policy.

A *region* is a connected set of operators that runs as ``width`` identical *channels*.
This module decides only whether a region is legal and how its channels must be fed
and merged; how wide a region is, is policy (the developer's ``parallel(..., width=)``
under FMAN, ``--width`` on the command line) and lives elsewhere.

Legality (002 §3-4, 000 §A2, with what an order-preserving merge needs); what each
operator kind allows is its ``Kind.region_problem`` and ``Kind.forwards``
(``spadeopt.kinds``), the rest is the region's shape:

- every operator exists; a sink may be in a region only when it counts (a count is
  commutative: each channel's copy counts, the run reports the sum, and a region that
  ends in counting sinks needs no merge); a source may lead a region only when its
  generator is splittable (``toolkit.sources.splittable``): then the region has no
  entering stream and no split, each channel's copy of the source reads its own share
  of the splits, and the region may hold no partitioned operator (splits are not
  partitioned by key); or when it is a partitioned connector source (below);
- no operator is stateful (``state`` derived from parameters by the DSL: aggregate
  without ``by``, merge, a custom operator that does not declare otherwise);
- the partitioned operators' keys intersect, every key attribute is in the stream that
  enters the region, and every operator upstream of a partitioned one (inside the
  region) forwards the key attributes unchanged, so a hash of the entering tuple names
  the channel that holds the key's state;
- an operator's output must be triggered by a tuple of its own partition, so that the
  merge can put it back at its trigger's sequence number (``union``, arrival order, is
  refused), with one exception: an operator that advances on every tuple's event time
  (``Kind.event_time``: a keyed event-time window, tumbling or sliding, which closes every
  key's group on any key's tuple). Its channel copies learn the stream's progress from
  watermark frames (``plan.eventtime``): from the entering stream's split when the region
  has one entry, one such window, and only operators before it that emit exactly one tuple
  per tuple with its time attribute unchanged; from a *window exchange* in front of the
  window otherwise (filters and keyed custom operators before it, several windows, several
  entering streams). Either way nothing before a window may feed anything after it, and
  the region is left from a window or after it, not before one;
- custom operators replicate when they declare ``state="stateless"`` or
  ``state="partitioned", key=[...]``: the generated code numbers what the user's
  ``submit`` emits with the input tuple's number (``docs/operators.md``);
- the region is connected, is left by exactly one output port, and no path leaves it
  and comes back (a feedback loop);
- it is entered by one stream, or by several keyed alike: then every entry gets its own
  split (the same hash of the region's key, of the same type on every entry), and since
  each split numbers its own stream, streams of different entries (or a join's output
  and anything else) may meet only in a join, one on each side: a join numbers its
  matches by its width-1 processing position, (order value, side, trigger's number)
  (``kinds.numbering``).

A region may also start at a connector source reading several partitions (Redis stream
keys) that declares how the app partitions them (``redis_source(...,
partitioned_by=[...])``, ``kinds.source.partitioning``): channel c's copy of the source
reads keys c, c + k, ... (one reader per channel, no split; width <= the number of keys).
Such a source has no deterministic width-1 order across its keys (its interleaving is
their arrival); what it guarantees is each key's order, so the region's guarantee is per
*partition key*: every partitioned operator's key includes ``partitioned_by`` and every
operator before one forwards those attributes unchanged (002's rule), no event-time
window (it advances on every key's tuples), no stateless operator emitting at end of
stream (every channel would), and the merge interleaves the channels by arrival
(``ARRIVAL``: no sequence numbers, no pulses). Each value of ``partitioned_by`` then gets
its width-1 rows in its width-1 order.

Two adjacent regions (the second entered by the first's output alone) with keys that do
not match exchange tuples channel to channel when both run wider than 1 (a *key exchange*,
:func:`choose_exchanges`; ``plan.fission``): the first region's channels must carry numbers
comparable across channels (not a region led by a partitioned source, whose channels
interleave by arrival: merge and split are kept, :func:`exchange_problem` says why), and
the second must be dynamic (an event-time window in it takes its watermark frames from the
exchange splits, or from a window exchange of its own).

Ordering. A region made only of functors without a filter is *static-rate* (every
operator emits exactly one tuple per input, 004's case): the split deals fixed blocks
of tuples round robin and the merge takes them back in the same blocks, with no
sequence number. Any other region is *dynamic*: the split stamps each tuple with a
sequence number (a hidden last attribute), routes it by a stable hash of the key (or in
blocks round robin when stateless) and ends each batch to a channel with a pulse (the
next number); the channels carry numbers and pulses through, and the merge releases
tuples in sequence order and strips the number.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from spadeopt.errors import UsageError
from spadeopt.kinds import kind_of, selectivity
from spadeopt.kinds.source import partitioning
from spadeopt.model.graph import ARRIVAL, DYNAMIC, PARTITIONED, STATIC, AppGraph, PortRef, Stream
from spadeopt.plan.eventtime import event_time_shape, flushed_sides, walk
from spadeopt.plan.region_index import RegionIndex, region_index

BLOCK = 64  # tuples per round-robin block (split and merge agree on it)
EXCHANGE = "exchange"  # Region.fed of a region whose channels receive from the region before it
FEDS = ("split", "source", EXCHANGE)
MAX_REGION_WIDTH = 256  # widest region of any plan (declared, --width, plan.json)
ORDERINGS = (STATIC, DYNAMIC, ARRIVAL)


class WidthError(UsageError):
    """A region wider than its partitioned source has partitions (exit 2). FATM's width
    search never tries one (``optimize.widths.region_caps``), so it is always a width the
    user gave: ``--width``, a declared width or a plan.json."""


@dataclass(frozen=True)
class Region:
    """One parallel region of a plan: logical operators, width, key and ordering."""

    name: str
    operators: tuple[str, ...]  # logical names, in declaration order
    width: int
    key: tuple[str, ...] = ()  # partition key (empty: stateless, dealt round robin)
    ordering: str = DYNAMIC  # STATIC: weighted round robin; DYNAMIC: sequence numbers; ARRIVAL: arrival
    fed: str = "split"  # "split": a split deals the entering stream; "source": it starts at a splittable
    #                     or partitioned source; "exchange": the channels of the region before it send
    #                     straight to its channels (choose_exchanges, plan.fission)
    after: str = ""  # fed == "exchange": the region whose channels send to this one's

    @property
    def has_split(self) -> bool:
        return self.fed == "split"

    @property
    def split(self) -> str:
        return f"{self.name}__split"

    def split_of(self, entry: int) -> str:
        """The split of the region's ``entry``-th entering stream (``split`` for the first)."""
        return self.split if entry == 0 else f"{self.name}__split{entry}"

    @property
    def merge(self) -> str:
        return f"{self.name}__merge"

    @staticmethod
    def channel_op(op: str, channel: int) -> str:
        """The physical name of ``op``'s copy in ``channel`` (shown as ``op@channel``)."""
        return f"{op}__{channel}"

    def exchange_split(self, channel: int) -> str:
        """The exchange's hash split at the end of the upstream region's ``channel``
        (a region fed by an exchange, ``fed == "exchange"``)."""
        return f"{self.name}__xsplit{channel}"

    def exchange_merge(self, channel: int) -> str:
        """The exchange's merge at the head of this region's ``channel``."""
        return f"{self.name}__xmerge{channel}"

    def window_split(self, op: str, channel: int) -> str:
        """The window exchange's split in front of event-time window ``op`` in ``channel``
        (``plan.eventtime``): the channel's tuples to itself, watermark frames to the others."""
        return f"{self.name}__{op}__wsplit{channel}"

    @staticmethod
    def exchange_at(op: str, port: str) -> str:
        """What names the window exchange in front of input ``port`` of ``op`` (a join may get one per side)."""
        return op if port == "in" else f"{op}__{port}"

    def window_merge(self, op: str, channel: int) -> str:
        """The window exchange's merge at the input of ``op``'s copy in ``channel``."""
        return f"{self.name}__{op}__wmerge{channel}"

    @property
    def routing(self) -> str:
        if self.fed == EXCHANGE:
            return "exchange_hash" if self.key else "exchange_round_robin"
        if not self.has_split:
            return "source_partitions" if self.ordering == ARRIVAL else "source_splits"
        return "hash" if self.key else "round_robin"

    def to_json(self) -> dict:
        return {"name": self.name, "operators": list(self.operators), "width": self.width,
                "key": list(self.key), "ordering": self.ordering, "fed": self.fed,
                **({"after": self.after} if self.fed == EXCHANGE else {})}

    @classmethod
    def from_json(cls, doc: dict) -> Region:
        return cls(doc["name"], tuple(doc["operators"]), int(doc["width"]), tuple(doc["key"]),
                   doc["ordering"], doc.get("fed", "split"), doc.get("after", ""))


@dataclass(frozen=True)
class Shape:
    """Where a legal region meets the rest of the graph."""

    entry: Stream | None  # the (first) stream entering it; None when it starts at a splittable source
    exit: PortRef | None  # the one output port leaving it; None when it ends in counting sinks
    key: tuple[str, ...]
    ordering: str
    source: str | None = None  # the splittable source leading it
    split_size: int = 0  # that source's records per split
    watermark: tuple[str, str, Any] | None = None  # (operator, time attribute, window): the first entry's clock
    entries: tuple[Stream, ...] = ()  # every stream entering it (entry is the first); one split each
    partitions: int = 0  # a partitioned source's partitions (stream keys): the widest it may run
    inner: tuple[tuple[str, str, Any], ...] = ()  # event-time windows fed by a window exchange (plan.eventtime)
    clocks: tuple[tuple[str, str, Any] | None, ...] = ()  # per entry: the window its split clocks, or None
    sides: tuple[tuple[str, str, str], ...] = ()  # join sides fed by a side exchange: (join, port, order attribute)

    @property
    def fed(self) -> str:
        return "split" if self.source is None else "source"


@dataclass(frozen=True)
class _Facts:
    """What every rule of :func:`check_region` reads of one region: its members, the
    streams entering and leaving it, its entries and exit ports, its sources."""

    graph: AppGraph
    ops: tuple[str, ...]
    ix: RegionIndex
    members: frozenset[str]
    leaving: tuple
    entries: tuple
    exits: tuple
    sources: tuple[str, ...]


def _facts(graph: AppGraph, name: str, ops: tuple[str, ...]) -> _Facts:
    unknown = [o for o in ops if o not in graph.by_name]
    if unknown:
        raise UsageError(f"parallel region '{name}' names unknown operator(s) {', '.join(unknown)}")
    if not ops:
        raise UsageError(f"parallel region '{name}' has no operators")
    ix = region_index(graph)
    members = frozenset(ops)
    entering = sorted((i, s) for o in members for i, s in ix.ins[o] if s.src.op not in members)
    leaving = sorted((i, s) for o in members for i, s in ix.outs[o] if s.dst.op not in members)
    return _Facts(graph, ops, ix, members, tuple(leaving), tuple(s for _, s in entering),
                  tuple(sorted({s.src for _, s in leaving})), tuple(o for o in ops if graph.op(o).is_source))


def _replicable_operators(f: _Facts) -> list[str]:
    """Every member's own refusal (its kind's ``region_problem``, a sink of the wrong mode...)."""
    return [why for o in f.ops if (why := f.ix.problem(o))]


def _connected(f: _Facts) -> list[str]:
    """The members form one piece, linked by streams inside the region."""
    inner = {o: (f.ix.succ[o] | f.ix.pred[o]) & f.members for o in f.members}  # undirected, inside
    parts: list[list[str]] = []
    left = set(f.members)
    while left:
        first = min(left)
        part, stack = {first}, [first]
        while stack:
            for n in inner[stack.pop()]:
                if n not in part:
                    part.add(n)
                    stack.append(n)
        left -= part
        parts.append(sorted(part))
    if len(parts) > 1:
        return [f"the region is not connected: {' | '.join(', '.join(p) for p in sorted(parts))}"]
    return []


def _entered_or_led(f: _Facts) -> list[str]:
    """Entered by streams, or led by one splittable source and entered by none."""
    if len(f.sources) > 1:
        return [f"the region holds {len(f.sources)} sources ({', '.join(f.sources)}); at most one "
                f"splittable source may lead it"]
    if f.sources and f.entries:
        return [f"the region starts at source '{f.sources[0]}' and must not be entered by any other "
                f"stream; it is entered by {', '.join(f'{s.src} -> {s.dst}' for s in f.entries)}"]
    if not f.sources and not f.entries:
        return ["the region must be entered by a stream or led by a splittable source; it is entered by none"]
    return []


def _one_exit(f: _Facts) -> list[str]:
    """Left by exactly one output port, or ending in counting sinks."""
    sinks = [o for o in f.ops if not f.graph.op(o).outputs]
    if len(f.exits) > 1 or (not f.exits and not sinks):
        return [f"the region must be left by exactly one output port (or end in counting sinks); it is "
                f"left by {len(f.exits)}: {', '.join(map(str, f.exits)) or 'none'}"
                + ("; end the others in sinks of mode='unordered' or 'count' inside the region, or keep "
                   "their operators out of it" if len(f.exits) > 1 else "")]
    return []


def _no_feedback_loop(f: _Facts) -> list[str]:
    """No path from the region back into it through outside operators, no cycle inside."""
    out = []
    via = f.ix.reaches([s.dst.op for _, s in f.leaving], {s.src.op for s in f.entries}, f.members)
    if via is not None:
        s = next(s for _, s in f.leaving if s.dst.op == via)
        out.append(f"the region crosses a feedback loop: '{s.src.op}' feeds '{s.dst.op}', "
                   f"which leads back into the region")
    looped = [o for o in f.members if o in f.ix.cyclic]
    if len({f.ix.comp[o] for o in looped}) < len(looped):  # two members share a cycle of the graph
        import networkx as nx  # rare (two members on one cycle of the graph): off the import path

        sub = nx.DiGraph()
        sub.add_nodes_from(f.members)
        sub.add_edges_from((o, n) for o in f.members for n in f.ix.succ[o] & f.members)
        if any(len(c) > 1 for c in nx.strongly_connected_components(sub)):
            out.append("the region contains a feedback loop")
    return out


STRUCTURE_RULES: tuple[Callable[[_Facts], list[str]], ...] = (
    _replicable_operators, _connected, _entered_or_led, _one_exit, _no_feedback_loop)
"""The rules every region must pass before its keys and clocks are looked at, in the
order their problems are reported; each returns its problems."""


def _refuse(name: str, problems: list[str]) -> None:
    if problems:
        raise UsageError(f"parallel region '{name}' cannot be replicated:\n"
                         + "\n".join(f"  - {p}" for p in problems))


def check_region(graph: AppGraph, name: str, ops: tuple[str, ...]) -> Shape:
    """The region's shape, or ``UsageError`` naming every offending operator and why: the
    :data:`STRUCTURE_RULES`, then the partition key (:func:`_region_key`), the joins its
    entries meet in, its event-time clocks and the join sides that get a side exchange.

    Costs O(operators of the region + the streams that touch them), plus a walk of the
    operators a stream leaving the region could lead back from (none on a DAG whose
    region sits between its entry and its exits), with the graph's :class:`RegionIndex`;
    a shape is computed once per graph, name and operators (``AppGraph.memo``: FATM asks
    for each region's shape again for every width vector it scores)."""
    shapes = graph.memo.setdefault("region_shapes", {})
    key = (name, tuple(ops))
    shape = shapes.get(key)
    if shape is None:
        shape = shapes[key] = _check_region(graph, name, ops)
    return shape


def _check_region(graph: AppGraph, name: str, ops: tuple[str, ...]) -> Shape:
    """:func:`check_region`'s body (an error is raised each time, never kept)."""
    f = _facts(graph, name, ops)
    problems = [p for rule in STRUCTURE_RULES for p in rule(f)]
    _refuse(name, problems)
    members, entries = set(f.members), list(f.entries)
    exit_port = f.exits[0] if f.exits else None
    led = partitioning(graph.op(f.sources[0])) if not entries and f.sources else None
    key = _region_key(f, led, problems)
    if entries:
        _entries_meet_in_joins(graph, ops, f.ix, members, entries, key, problems)
    clocks, inner = event_time_shape(graph, ops, f.ix, members, entries, exit_port, problems)
    sides = flushed_sides(graph, ops, f.ix)
    if led is not None:  # merged by arrival: no numbers, so no frame can carry a side's high-water mark
        problems += [f"join '{j}' takes on its {port} side rows a tumbling count window flushes at end of stream, "
                     f"which its channels can only place with sequence numbers, and a region led by partitioned "
                     f"source '{f.sources[0]}' has none; start the region after the join's inputs"
                     for j, port, _ in sides]
    _refuse(name, problems)
    if led is not None:
        return Shape(None, exit_port, key, ARRIVAL, f.sources[0], partitions=led[0])
    # sources and counting sinks emit nothing a merge orders: only the operators between count
    ordering = STATIC if all(selectivity(graph.op(o)) == STATIC for o in ops
                             if graph.op(o).inputs and graph.op(o).outputs) else DYNAMIC
    if not entries:
        src = graph.op(f.sources[0])
        return Shape(None, exit_port, key, ordering, src.name, src.params.split)
    return Shape(entries[0], exit_port, key, ordering, watermark=clocks[0], entries=tuple(entries), inner=inner,
                 clocks=clocks, sides=sides)


def _region_key(f: _Facts, led, problems: list[str]) -> tuple[str, ...]:
    """The region's partition key: a partitioned source's, or the keys its partitioned
    operators share, present on every entry with one type and forwarded unchanged up to
    each of them (problems appended)."""
    graph, ops = f.graph, f.ops
    part = [graph.op(o) for o in ops if graph.op(o).state == PARTITIONED]
    if led is not None:  # a partitioned source: each channel reads its own stream keys
        return _partitioned_source(graph, ops, f.ix, set(f.members), f.sources[0], led[1], part, problems)
    if part and not f.entries:
        problems.append(f"the region starts at source '{f.sources[0]}', whose splits are not partitioned by key, "
                        f"so it cannot hold partitioned operator(s) "
                        f"{', '.join(op.name for op in part)}; start the region after the source")
        return ()
    if not part:
        return ()
    common = set(part[0].key)
    for op in part[1:]:
        common &= set(op.key)
    if not common:
        problems.append("the partition keys do not intersect: "
                        + ", ".join(f"'{op.name}' on {list(op.key)}" for op in part))
    key = tuple(k for k in part[0].key if k in common)
    _key_on_entries(f, key, problems)
    feeds_part: set[str] = set()  # members with a partitioned operator after them (no cycle inside)
    for p in {op.name for op in part}:
        feeds_part |= walk(p, f.ix.pred, set(f.members))
    for o in ops:
        if o in feeds_part:
            for k in key:
                if not kind_of(graph.op(o)).forwards(graph.op(o), k):
                    problems.append(f"operator '{o}' does not forward key '{k}' unchanged to the "
                                    f"partitioned operator(s) after it")
    return key


def _key_on_entries(f: _Facts, key: tuple[str, ...], problems: list[str]) -> None:
    """Every stream entering the region carries the key, with one type on all of them."""
    types: dict[str, set[str]] = {}
    for e in f.entries:
        entry_schema = f.graph.op(e.dst.op).in_port(e.dst.port).schema
        for k in key:
            if entry_schema is None or k not in entry_schema:
                problems.append(f"key '{k}' is not an attribute of the stream entering the region ({e.src})")
            else:
                types.setdefault(k, set()).add(entry_schema.type_of(k))
    for k, ts in types.items():
        if len(ts) > 1:
            problems.append(f"key '{k}' has types {', '.join(sorted(ts))} on the streams entering the region; "
                            f"each entry is split by the same hash of the key, so its type must be the same")


def _partitioned_source(graph: AppGraph, ops: tuple[str, ...], ix: RegionIndex, members: set[str], source: str,
                        by: tuple[str, ...], part: list, problems: list[str]) -> tuple[str, ...]:
    """The rules of a region led by a partitioned source (module docstring); its key, the
    source's ``partitioned_by``. Each channel reads some stream keys only, so whatever
    keeps state must keep it per value of ``partitioned_by`` (or finer)."""
    for op in part:
        missing = [a for a in by if a not in op.key]
        if missing:
            problems.append(f"operator '{op.name}' is partitioned on {list(op.key)}, which does not include "
                            f"{', '.join(repr(a) for a in missing)} of source '{source}''s partitioned_by "
                            f"{list(by)}: each channel reads only its own stream keys, so every key of a "
                            f"partitioned operator must lie within one partition (key it on {list(by)} too, "
                            f"or start the region after it)")
    feeds_part: set[str] = set()
    for op in part:
        feeds_part |= walk(op.name, ix.pred, members)
    for o in ops:
        if o in feeds_part and o != source:
            for a in by:
                if not kind_of(graph.op(o)).forwards(graph.op(o), a):
                    problems.append(f"operator '{o}' does not forward partition attribute '{a}' (source "
                                    f"'{source}''s partitioned_by) unchanged to the partitioned operator(s) "
                                    f"after it")
    for o in ops:
        op = graph.op(o)
        if kind_of(op).event_time(op) is not None:
            problems.append(f"event-time window '{o}' closes every key's group on any key's tuple, but each "
                            f"channel of a region led by partitioned source '{source}' sees only its own "
                            f"stream keys; start the region after the window's input, or before it")
        elif op.state != PARTITIONED and op.inputs and op.outputs and kind_of(op).final_rows(op):
            problems.append(f"operator '{o}' is stateless but may emit rows at end of stream, which every "
                            f"channel of a region led by partitioned source '{source}' would emit; declare it "
                            f"partitioned on {list(by)} or put it after the region")
    return tuple(by)


def _entries_meet_in_joins(graph: AppGraph, ops: tuple[str, ...], ix: RegionIndex, members: set[str],
                           entries: list[Stream], key: tuple[str, ...], problems: list[str]) -> None:
    """The rules of a region entered by several streams (module docstring): each entry gets
    its own split, numbering its stream on its own, so streams of different entries may
    meet only in a join (which renumbers its matches by order value, side and input
    number, ``kinds.numbering``), and every entry is split by the same hash of the key."""
    if len(entries) > 1 and not key:
        problems.append(f"the region is entered by {len(entries)} streams "
                        f"({', '.join(f'{s.src} -> {s.dst}' for s in entries)}) but holds no partitioned "
                        f"operator; several entries are split by the same hash of a key, so a region without "
                        f"one must be entered by exactly one stream")
        return
    space: dict[str, str] = {}  # operator -> where the numbers of what it emits come from

    def numbers_of(o: str) -> str:
        if o not in space:
            space[o] = "?"  # no loops inside a region (refused above); guards the walk
            here = graph.op(o)
            by_port: dict[str, set[str]] = {}
            for _, s in ix.ins[o]:
                by_port.setdefault(s.dst.port, set()).add(
                    f"entry {s.src} -> {s.dst}" if s.src.op not in members else numbers_of(s.src.op))
            feeds = sorted(set().union(*by_port.values())) if by_port else []
            if kind_of(here).number_bits(here):  # it renumbers what it emits; each input keeps its own numbers
                for port, f in sorted(by_port.items()):
                    if len(f) > 1:
                        problems.append(f"input '{port}' of '{o}' receives streams numbered apart "
                                        f"({', '.join(sorted(f))}); streams of different entries or joins may "
                                        f"meet only in a join, one on each side")
                space[o] = f"'{o}'"
            elif len(feeds) > 1:
                problems.append(f"operator '{o}' receives streams numbered apart ({', '.join(feeds)}); streams "
                                f"of different entries or joins may meet only in a join, one on each side")
                space[o] = feeds[0]
            else:
                space[o] = feeds[0] if feeds else "?"
        return space[o]

    for o in ops:
        numbers_of(o)


def feeding_region(graph: AppGraph, regions: tuple[Region, ...], down: Region) -> Region | None:
    """The region whose output port is the stream entering ``down`` (its first entry), or None."""
    entry = check_region(graph, down.name, down.operators).entry
    if entry is None:
        return None
    return next((r for r in regions if r.name != down.name and entry.src.op in r.operators), None)


def exchange_problem(graph: AppGraph, up: Region, down: Region) -> str | None:
    """Why the channels of region ``up`` cannot send straight to the channels of region
    ``down`` (a key exchange: a hash split at the end of each of ``up``'s channels, a merge
    by sequence number at the head of each of ``down``'s, no merge and split between the
    regions), or None when they can. ``down`` must be fed by ``up``'s output alone;
    ``up``'s channels must carry numbers comparable across channels (a dynamic region, or
    a static one numbered for the exchange; not a region led by a partitioned source,
    whose channels interleave by arrival); ``down`` must be dynamic. An event-time window
    in ``down`` takes its watermark frames from the exchange splits (``plan.eventtime``)."""
    us = check_region(graph, up.name, up.operators)
    ds = check_region(graph, down.name, down.operators)
    if ds.entry is None or len(ds.entries) != 1 or us.exit is None or ds.entry.src != us.exit:
        return f"region '{down.name}' is not entered by region '{up.name}''s output alone"
    others = [s for s in graph.streams if s.src == us.exit and s.dst.op not in up.operators and s != ds.entry]
    if others:
        return (f"region '{up.name}''s output {us.exit} also feeds {', '.join(str(s.dst) for s in others)}, "
                f"which needs its merge")
    if us.ordering == ARRIVAL:
        return (f"region '{up.name}' is led by partitioned source '{us.source}': its channels are merged by "
                f"arrival and carry no sequence numbers, so the channels of region '{down.name}' could not "
                f"merge them in one order")
    if ds.ordering != DYNAMIC:
        return (f"region '{down.name}' is static-rate (functors only, no key): it needs no exchange, put its "
                f"operators in region '{up.name}'")
    return None


def choose_exchanges(graph: AppGraph, regions: tuple[Region, ...]) -> tuple[Region, ...]:
    """``regions`` with each region that follows another (its entering stream is that
    region's output) fed by a key exchange from it when both run wider than 1 and
    :func:`exchange_problem` allows it (``fed == "exchange"``, ``after`` naming the
    other); every other region fed as its shape says. A static-rate region that feeds an
    exchange runs dynamic (numbered), since the receiving channels merge by number."""
    shapes = {r.name: check_region(graph, r.name, r.operators) for r in regions}
    out = {r.name: replace(r, ordering=shapes[r.name].ordering, fed=shapes[r.name].fed, after="") for r in regions}
    for down in regions:
        up = feeding_region(graph, regions, down)
        if up is None or up.width < 2 or down.width < 2 or exchange_problem(graph, up, down) is not None:
            continue
        out[down.name] = replace(out[down.name], fed=EXCHANGE, after=up.name)
        if out[up.name].ordering == STATIC:
            out[up.name] = replace(out[up.name], ordering=DYNAMIC)
    return tuple(out[r.name] for r in regions)


def exchanges_json(graph: AppGraph, regions: tuple[Region, ...]) -> list[dict[str, Any]]:
    """Every pair of adjacent regions both wider than 1 (the second entered by the first's
    output): ``{"from", "to", "exchange": true}``, or ``false`` with ``why`` (the reason
    merge and split stay), for ``explain.json``'s ``fission.exchanges``."""
    out = []
    for down in regions:
        up = feeding_region(graph, regions, down)
        if up is None or up.width < 2 or down.width < 2:
            continue
        doc: dict[str, Any] = {"from": up.name, "to": down.name, "exchange": down.fed == EXCHANGE}
        if down.fed != EXCHANGE:
            doc["why"] = exchange_problem(graph, up, down) or "the plan keeps merge and split"
        out.append(doc)
    return out


def resolve_regions(graph: AppGraph, widths: Mapping[str, int] | None,
                    declared_widths: bool = False) -> tuple[Region, ...]:
    """The plan's regions: each declared region at its width (``widths`` overrides; else
    the app's declared width with ``declared_widths``, the strategy's fact: FMAN's,
    ``optimize.strategies.Strategy.declared_widths``; else 1). Regions
    of width 1 are recorded but not rewritten. Every declared region is checked, whatever
    its width: an illegal one raises ``UsageError`` naming the operator and the reason."""
    declared = {name: (ops, w) for name, ops, w in graph.annotations.parallel}
    widths = dict(widths or {})
    unknown = sorted(set(widths) - set(declared))
    if unknown:
        have = ", ".join(sorted(declared)) or "none (declare one with App.parallel)"
        raise UsageError(f"--width names unknown region(s) {', '.join(unknown)}; app '{graph.name}' "
                         f"declares: {have}")
    order = {op.name: i for i, op in enumerate(graph.operators)}
    out = []
    for name, (ops, declared_width) in sorted(declared.items()):
        width = widths.get(name, declared_width if declared_widths else 1)
        if isinstance(width, bool) or not isinstance(width, int) or not 1 <= width <= MAX_REGION_WIDTH:
            raise UsageError(f"region '{name}': width must be an integer from 1 to {MAX_REGION_WIDTH}, "
                             f"got {width!r}")
        ops = tuple(sorted(ops, key=lambda o: order.get(o, -1)))
        shape = check_region(graph, name, ops)
        check_width(name, width, shape)
        out.append(Region(name, ops, width, shape.key, shape.ordering, shape.fed))
    return choose_exchanges(graph, tuple(out))


def check_width(name: str, width: int, shape: Shape) -> None:
    """A region led by a partitioned source runs at most one channel per partition (each
    channel's copy reads its own stream keys): ``WidthError`` naming both, else nothing."""
    if shape.partitions and width > shape.partitions:
        raise WidthError(f"region '{name}': width {width} is more than the {shape.partitions} stream keys "
                         f"source '{shape.source}' reads; a region led by it runs one reader per channel, "
                         f"so its width must be at most {shape.partitions}")

