"""Event-time windows in a parallel region: where each window's watermark frames come
from, and what the region's shape must be for its channels to close windows exactly
where width 1 does (legality only; ``plan.regions.check_region`` calls this).

A keyed event-time window (``Kind.event_time``) closes every key's group on *any* key's
tuple, so its channel copy must learn how far the window's whole input stream has got.
It learns it from *watermark frames*: copies of the tuples that move the stream into a
later window, numbered ``-1 - n`` (``protocol.WATERMARK``) with ``n`` the position the
copied tuple holds in the window's width-1 input. A frame travels like a tuple (through
links, fused calls and merges) and is dropped by the window it serves. Two places make
them:

- the *entry clock* (the older, cheaper form): the window is reached from one entering
  stream only, everything that stream reaches in the region is before the window or
  after it, and every operator before it emits exactly one tuple per tuple with the time
  attribute unchanged; then that stream's split (or, behind a key exchange, every
  upstream channel's exchange split) reads the window's event time off the entering
  tuple and sends the frames (each entering stream clocks one window at most);
- a *window exchange* in front of the window (every other case: filters or keyed custom
  operators before it, a window after another, a stream that also feeds something
  beside the window): in each channel an
  exchange split on the region's key sends every tuple to its own channel (the key is
  forwarded unchanged, so the same hash names the same channel) and a frame to every
  other channel whenever the tuple moves *its channel's* stream into a later window;
  each channel's exchange merge releases tuples and frames in number order once every
  sender has passed them (a channel's watermark is the minimum over its senders). Every
  tuple that moves the whole stream into a later window also moves its own channel's,
  so each window copy sees, in width-1 order, every tuple that advances the width-1
  window (frames of the others change nothing), and so closes its groups and drops late
  tuples exactly where width 1 does (``docs/decisions/035-watermark-frames-in-regions.md``).

Lateness is a function of the window's width-1 input alone: a tuple is late when the
windows it belongs to were closed by an earlier tuple of that input. It never depends
on how channels interleave. A window's allowed lateness (``Window.lateness``) shifts its
clock (event time minus the lateness: the splits' and exchanges' too,
``kinds.fission_split.clock_context``), and a frame is never late: a window copy counts
and sends on (``late=True``) only tuples, so the channels' late counts and late ports
add up to width 1's (docs/decisions/060-late-data-counted-and-sent-on.md).

A join side that a tumbling count window reaches gets the same exchange, a *side
exchange* (``flushed_sides``): the window's end-of-stream flush goes back in order value,
and the width-1 join takes such a row at its side's high-water mark (the largest order
value so far), a fact of the whole side. The exchange's clock is the order attribute: a
frame to every other channel whenever a row raises its channel's mark, so each channel's
join has the width-1 mark at every row
(``docs/decisions/067-joins-take-flushed-rows-at-the-high-water-mark.md``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spadeopt.kinds import kind_of, selectivity
from spadeopt.model.graph import STATIC, AppGraph, PortRef, Stream

Clock = tuple[str, str, Any]  # (window operator, time attribute, Window)
Side = tuple[str, str, str]  # (join, input port, order attribute): a join side fed by a side exchange


def walk(start: str, step: Mapping[str, set[str]], members: set[str]) -> set[str]:
    """Operators of ``members`` reached from ``start`` by one or more ``step`` edges inside
    ``members`` (``start`` itself only around a cycle; callers have none)."""
    out: set[str] = set()
    stack = [start]
    while stack:
        for n in step[stack.pop()]:
            if n in members and n not in out and n != start:
                out.add(n)
                stack.append(n)
    return out


def _entry_clock(graph: AppGraph, ix: Any, members: set[str], entry: Stream, exit_port: PortRef | None,
                 op: str, attr: str) -> bool:
    """Whether window ``op`` can take its frames from the split of ``entry`` (module
    docstring: the entry clock): everything the entry reaches in the region is before the
    window or after it, what is before it emits one tuple per tuple with ``attr``
    unchanged (the split's frames flow through it into the window, which drops them), the
    entering stream has ``attr``, and the region is not left before the window."""
    before, after = walk(op, ix.pred, members), walk(op, ix.succ, members)
    reached = walk(entry.dst.op, ix.succ, members) | {entry.dst.op}
    if op not in reached or any(o != op and o not in before and o not in after for o in reached):
        return False
    if any(selectivity(graph.op(o)) != STATIC or not kind_of(graph.op(o)).forwards(graph.op(o), attr)
           for o in before):
        return False
    schema = graph.op(entry.dst.op).in_port(entry.dst.port).schema
    return schema is not None and attr in schema and (exit_port is None or exit_port.op not in before)


def event_time_shape(graph: AppGraph, ops: tuple[str, ...], ix: Any, members: set[str], entries: list[Stream],
                     exit_port: PortRef | None, problems: list[str]
                     ) -> tuple[tuple[Clock | None, ...], tuple[Clock, ...]]:
    """Each entering stream's clock (its split's: the one window that reads its time off
    that stream, or None) and the windows that get a window exchange, each ``(operator,
    attribute, window)``, appending what keeps a window from being replicated."""
    timed = [(o, kind_of(graph.op(o)).event_time(graph.op(o))) for o in ops]
    timed = [(o, t[0], t[1]) for o, t in timed if t is not None]
    clocks: list[Clock | None] = [None] * len(entries)
    if not timed or not entries:  # a source-led region holds no partitioned operator (refused apart)
        return tuple(clocks), ()
    inner = []
    for clock in timed:
        op = clock[0]
        before, after = walk(op, ix.pred, members), walk(op, ix.succ, members)
        feeds = [s for _, s in ix.ins[op] if s.dst.port == "in"]
        if len(feeds) != 1:
            problems.append(f"event-time window '{op}' is fed by {len(feeds)} streams; a replicated window "
                            f"needs exactly one (its watermark frames follow one stream)")
        for _, s in sorted((i, s) for o in before for i, s in ix.outs[o]):
            if s.dst.op in after:
                problems.append(f"'{s.src.op}' feeds '{s.dst.op}' past event-time window '{op}'; after the "
                                f"window only its rows may flow")
        if exit_port is not None and exit_port.op in before:
            problems.append(f"the region is left from '{exit_port.op}', before event-time window '{op}'; it "
                            f"must be left from the window or after it")
        mine = [i for i, e in enumerate(entries) if e.dst.op == op or e.dst.op in before]
        if len(mine) == 1 and clocks[mine[0]] is None and \
                _entry_clock(graph, ix, members, entries[mine[0]], exit_port, op, clock[1]):
            clocks[mine[0]] = clock
        else:
            inner.append(clock)
    return tuple(clocks), tuple(inner)


def flushed_sides(graph: AppGraph, ops: tuple[str, ...], ix: Any) -> tuple[Side, ...]:
    """The sides of the region's joins that get a *side exchange*: each ``(join, port,
    order attribute)`` whose input a tumbling count window reaches (in the region or
    before it), whose end-of-stream flush makes the side go back in order value.

    The width-1 join merges its sides by their heads (``runtime.ordered``), which is the
    merge by each side's *running maximum* order value (left first on ties, then
    arrival): a row that goes back is processed at its side's high-water mark. That mark
    is a fact of the whole side, which no channel sees; so, as for an event-time window,
    an exchange in front of the side sends every other channel a frame (a copy of the
    row, numbered below zero) whenever a row raises its channel's mark, and each channel's
    join merges its rows and the frames, learns the width-1 mark at every row, and
    numbers its matches with it (``docs/decisions/067-joins-take-flushed-rows-at-the-high-water-mark.md``)."""
    everything = set(ix.pred)
    out: list[Side] = []
    for j in ops:
        op = graph.op(j)
        for _, s in sorted(ix.ins[j]):
            order = kind_of(op).order_of(op, s.dst.port)
            if order is None:
                continue  # not a port merged by an order attribute (not a join)
            up = map(graph.op, {s.src.op} | walk(s.src.op, ix.pred, everything))
            if any(kind_of(u).flushes_out_of_order(u) for u in up):
                side = (j, s.dst.port, order)
                if side not in out:
                    out.append(side)
    return tuple(out)
