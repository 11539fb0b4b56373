"""Fission as a graph rewrite: logical ``AppGraph`` + regions -> physical ``AppGraph``.

A region of width k > 1 becomes, in the physical graph:

- a ``fission_split`` operator ``<region>__split`` on the stream entering the region, and
  ``<region>__split<i>`` on its i-th entering stream when several enter it (keyed alike:
  every split hashes the same key, so a key's tuples of every entry meet in one channel;
  none when the region starts at a splittable source: channel c's copy of the source
  reads splits c, c + k, c + 2k, ... itself, and a static region's merge takes back
  whole splits in turn; none either when it starts at a partitioned connector source:
  channel c's copy reads stream keys c, c + k, ..., and the region's ``ARRIVAL`` merge
  passes each channel's batches on as they come, with no sequence number);
- k copies of every region operator, ``<op>__<c>`` for channel c (shown as ``op@c``),
  wired exactly like the originals inside the region;
- a ``fission_merge`` operator ``<region>__merge`` collecting the k copies of the one
  output port that leaves the region, and publishing to its original subscribers.

Two regions one after the other (the second entered by the first's output alone), both
wider than 1, are joined by a *key exchange* when ``plan.regions.choose_exchanges`` says
so (the second region's ``fed == "exchange"``): the first region's merge and the second's
split are replaced by an ``exchange_split`` ``<second>__xsplit<c>`` at the end of each of
the first region's channels (hashing the second region's key into its width, renumbering
each tuple ``(n << EXCHANGE_BITS) | i``, ``kinds.numbering``) and an ``exchange_merge``
``<second>__xmerge<d>`` at the head of each of the second region's channels (merging the
senders by number, pulses passed on), so each downstream channel sees its keys' part of
the width-1 stream in the width-1 order; the second region's merge restores the rest.

In a dynamic region the channel copies carry the split's sequence number as a hidden
last attribute (``_fission_seq``): every copy's input and output schemas gain it, and
its parameters are rewritten to forward it (each kind's ``channel_params``: a functor
copies it, a count-window aggregate emits the sequence number of the tuple that
triggered the row, an event-time window the number of its group's first tuple, a join
its width-1 processing position (``kinds.numbering``); a custom operator's generated code numbers what
the user submits with the input tuple's number). The merge strips it, so everything
after the region sees the width-1 schema. Regions of width 1 are not rewritten at all.
A region whose event-time window reads its time off the entering tuple gives its split
the window's clock (attribute, window, bounds' type), so the split (behind a key exchange,
every exchange split) sends watermark frames; every other event-time window gets a
*window exchange* in front of its copies (``_window_exchange``, ``plan.eventtime``).

The physical graph is an ordinary ``AppGraph``: fusion, placement, codegen and the
runtime treat the split, the channels and the merge like any other operators. Its
annotations are the logical ones carried over: a colocate/exlocate/fuse group inside
one region is repeated per channel; FMAN's layout for a region is added as fuse groups
(each channel one PE, the split with its producer, the merge with its first consumer).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import defaultdict

from spadeopt.errors import UsageError
from spadeopt.kinds import kind_of
from spadeopt.kinds.exchange_merge import ExchangeMergeParams
from spadeopt.kinds.exchange_split import ExchangeSplitParams
from spadeopt.kinds.fission_merge import FissionMergeParams
from spadeopt.kinds.fission_split import FissionSplitParams
from spadeopt.kinds.numbering import input_bits
from spadeopt.kinds.windows import bound_type
from spadeopt.model.graph import (
    STATEFUL,
    Annotations,
    AppGraph,
    InPort,
    Operator,
    OutPort,
    PortRef,
    Stream,
)
from spadeopt.model.schema import Schema
from spadeopt.plan.eventtime import walk
from spadeopt.plan.regions import (
    ARRIVAL,
    BLOCK,
    DYNAMIC,
    EXCHANGE,
    Region,
    check_region,
    check_width,
    exchange_problem,
    feeding_region,
)
from spadeopt.protocol import SEQ  # SEQ: the hidden sequence-number attribute


def _with_seq(schema: Schema | None, where: str) -> Schema | None:
    if schema is None:
        return None
    if SEQ in schema:
        raise UsageError(f"{where}: attribute name '{SEQ}' is reserved for fission's sequence number")
    if not len(schema):  # a 1-tuple in a channel is a pulse
        raise UsageError(f"{where}: a stream without attributes cannot run in a dynamic parallel region")
    return Schema((*schema.attrs, (SEQ, "int")))


def _channel_copy(op: Operator, c: int, k: int, dynamic: bool) -> Operator:
    """``op``'s copy in channel ``c`` of ``k``: its kind says how its parameters change
    (``Kind.channel_params``); in a dynamic region every schema gains the sequence number."""
    name = Region.channel_op(op.name, c)
    params = kind_of(op).channel_params(op, c, k, dynamic)
    if not dynamic:
        return dataclasses.replace(op, name=name, params=params)
    where = f"operator '{op.name}'"
    ins = tuple(dataclasses.replace(p, schema=_with_seq(p.schema, where)) for p in op.inputs)
    outs = tuple(dataclasses.replace(p, schema=_with_seq(p.schema, where)) for p in op.outputs)
    return dataclasses.replace(op, name=name, inputs=ins, outputs=outs, params=params)


def _copies_of(graph: AppGraph, region: Region, dynamic: bool, copies: dict | None) -> list[Operator]:
    """Every channel copy of ``region`` (channel by channel, operators in region order).
    ``copies`` (the logical graph's memo of them, keyed by the operator object, channel,
    width and ordering) lends the copies made for an earlier width vector: a copy is a
    pure function of those, and operators are immutable, so the same objects serve."""
    k = region.width
    if copies is None:
        return [_channel_copy(graph.op(o), c, k, dynamic) for c in range(k) for o in region.operators]
    out = []
    for c in range(k):
        for o in region.operators:
            op = graph.op(o)
            key = (id(op), c, k, dynamic)
            got = copies.get(key)
            if got is None or got[0] is not op:
                got = copies[key] = (op, _channel_copy(op, c, k, dynamic))
            out.append(got[1])
    return out


def _rewrite_one(graph: AppGraph, region: Region, copies: dict | None = None) -> AppGraph:
    shape = check_region(graph, region.name, region.operators)
    check_width(region.name, region.width, shape)
    if (region.ordering == ARRIVAL) != (shape.ordering == ARRIVAL):
        raise UsageError(f"parallel region '{region.name}' has ordering '{region.ordering}', but the graph makes "
                         f"it '{shape.ordering}'; plan it again")
    members = set(region.operators)
    k = region.width
    dynamic = region.ordering == DYNAMIC
    fed = shape.entry is not None  # else the region starts at a splittable source: no split
    merged = shape.exit is not None  # else the region ends in counting sinks: no merge
    entries = shape.entries or ((shape.entry,) if fed else ())  # one split per entering stream
    splits = {e: region.split_of(i) for i, e in enumerate(entries)}
    new_names = list(splits.values()) + ([region.merge] if merged else []) + [
        Region.channel_op(o, c) for o in region.operators for c in range(k)]
    clash = sorted(n for n in new_names if n in graph.by_name)
    if clash:
        raise UsageError(f"parallel region '{region.name}': the physical operator name(s) {', '.join(clash)} "
                         f"are already taken by operators of the app; rename them")
    head: list[Operator] = []
    for i, (entry, split) in enumerate(splits.items()):
        entry_schema = graph.op(entry.dst.op).in_port(entry.dst.port).schema
        chan_schema = _with_seq(entry_schema, f"region '{region.name}'") if dynamic else entry_schema
        clock = _clock(graph, shape.clocks[i] if i < len(shape.clocks) else None)
        head.append(Operator(split, "fission_split", (InPort("in", entry_schema),),
                             tuple(OutPort(f"out{c}", chan_schema) for c in range(k)),
                             FissionSplitParams(k, region.key, region.ordering, BLOCK, clock), STATEFUL, (),
                             f"parallel region '{region.name}'"))
    tail: list[Operator] = []
    if merged:
        exit_schema = graph.op(shape.exit.op).out_port(shape.exit.port).schema
        exit_chan = _with_seq(exit_schema, f"region '{region.name}'") if dynamic else exit_schema
        block = BLOCK if fed else shape.split_size  # a source-led static region's merge takes back whole splits
        if region.ordering == ARRIVAL:
            block = 0  # by arrival: no blocks
        tail.append(Operator(region.merge, "fission_merge", tuple(InPort(f"in{c}", exit_chan) for c in range(k)),
                             (OutPort("out", exit_schema),), FissionMergeParams(k, region.ordering, block),
                             STATEFUL, (), f"parallel region '{region.name}'"))
    ops: list[Operator] = []
    for op in graph.operators:
        if op.name not in members:
            ops.append(op)
        elif op.name == region.operators[0]:
            ops.extend(head)
            ops.extend(_copies_of(graph, region, dynamic, copies))
            ops.extend(tail)
    streams: list[Stream] = []
    exit_done = False
    for s in graph.streams:
        src_in, dst_in = s.src.op in members, s.dst.op in members
        if not src_in and not dst_in:
            streams.append(s)
        elif s in splits:
            streams.append(Stream(s.src, PortRef(splits[s], "in")))
            streams.extend(Stream(PortRef(splits[s], f"out{c}"), PortRef(Region.channel_op(s.dst.op, c), s.dst.port))
                           for c in range(k))
        elif src_in and dst_in:
            streams.extend(Stream(PortRef(Region.channel_op(s.src.op, c), s.src.port),
                                  PortRef(Region.channel_op(s.dst.op, c), s.dst.port)) for c in range(k))
        else:  # leaves the region through its exit port
            if not exit_done:
                streams.extend(Stream(PortRef(Region.channel_op(s.src.op, c), s.src.port), PortRef(region.merge, f"in{c}"))
                               for c in range(k))
                exit_done = True
            streams.append(Stream(PortRef(region.merge, "out"), s.dst))
    order = {op.name: i for i, op in enumerate(graph.operators)}
    consumers = sorted({s.dst.op for s in graph.streams if s.src == shape.exit}, key=order.__getitem__)
    ann = _annotations(graph.annotations, region, members, [(e.src.op, split) for e, split in splits.items()],
                       consumers[0] if merged else None)
    out = AppGraph(graph.name, tuple(ops), tuple(streams), ann, graph.params, graph.module)
    for timed in shape.inner:
        out = _window_exchange(out, graph, region, timed[0], "in", _clock(graph, timed))
    for join, port, attr in shape.sides:  # a join side that goes back in order value (plan.eventtime)
        out = _window_exchange(out, graph, region, join, port, (attr, None, True))
    return out


def _clock(graph: AppGraph, timed: tuple | None) -> tuple | None:
    """An event-time window's clock for the splits that send its watermark frames: its
    ``(attribute, window, int bounds)`` (None: no window)."""
    if timed is None:
        return None
    op, attr, window = timed
    return attr, window, bound_type(window, graph.op(op).inputs[0].schema) == "int"


def _window_exchange(graph: AppGraph, logical: AppGraph, region: Region, op: str, port: str,
                     clock: tuple) -> AppGraph:
    """``graph`` (``region`` rewritten) with a window exchange in front of input ``port`` of
    ``op``'s copies (``plan.eventtime``: an event-time window's ``in``, or a join side that
    goes back in order value, whose clock is its order attribute's running maximum): in
    each channel an ``exchange_split`` on the region's key with the clock (every tuple stays
    in its channel, frames go to the others) and a clocked ``exchange_merge``; both join
    the channel. A fuse group
    (FMAN's, one per channel) holding the window's copy is cut in two at the exchange: what
    is before the window with the split, the merge with the rest; and each channel's part
    before the exchange is exlocated from its part after it (pairwise), so no fusion lets
    two channels' PEs send to each other (a cycle of PEs takes no aligned checkpoint)."""
    k = region.width
    copies = [Region.channel_op(op, c) for c in range(k)]
    schema = graph.op(copies[0]).in_port(port).schema
    at = Region.exchange_at(op, port)
    where = (f"watermark frames of event-time window '{op}' in parallel region '{region.name}'" if port == "in"
             else f"high-water frames of join '{op}''s {port} side in parallel region '{region.name}'")
    senders = [Operator(region.window_split(at, c), "exchange_split", (InPort("in", schema),),
                        tuple(OutPort(f"out{d}", schema) for d in range(k)),
                        ExchangeSplitParams(k, region.key, BLOCK, clock), STATEFUL, (), where) for c in range(k)]
    receivers = [Operator(region.window_merge(at, d), "exchange_merge", tuple(InPort(f"in{c}", schema) for c in range(k)),
                          (OutPort("out", schema),), ExchangeMergeParams(k, clocked=True), STATEFUL, (), where)
                 for d in range(k)]
    ops: list[Operator] = []
    for o in graph.operators:
        if o.name == copies[0]:
            ops.extend(senders)
            ops.extend(receivers)
        ops.append(o)
    streams: list[Stream] = []
    for s in graph.streams:
        if s.dst.op in copies and s.dst.port == port:
            c = copies.index(s.dst.op)
            streams.append(Stream(s.src, PortRef(region.window_split(at, c), "in")))
            streams.extend(Stream(PortRef(region.window_split(at, c), f"out{d}"),
                                  PortRef(region.window_merge(at, d), f"in{c}")) for d in range(k))
            streams.append(Stream(PortRef(region.window_merge(at, c), "out"), s.dst))
        else:
            streams.append(s)
    ann = _cut_channels(graph.annotations, logical, region, op, at)
    return AppGraph(graph.name, tuple(ops), tuple(streams), ann, graph.params, graph.module)


def _cut_channels(ann: Annotations, logical: AppGraph, region: Region, op: str, at: str) -> Annotations:
    """``ann`` with window ``op``'s exchange in each channel of ``region``: the channel's
    split and merge join its channel, a fuse group holding the window's copy is cut in two
    there, and the channel's part before the exchange is exlocated from its part after."""
    k = region.width
    copies = [Region.channel_op(op, c) for c in range(k)]
    mine = {copies[c]: (region.window_split(at, c), region.window_merge(at, c)) for c in range(k)}
    before = {Region.channel_op(o, c) for o in _reach(logical, op, set(region.operators), forward=False) for c in range(k)}
    after = {Region.channel_op(o, c) for o in _reach(logical, op, set(region.operators), forward=True) for c in range(k)}
    fuse: list[tuple[str, ...]] = []
    for g in ann.fuse:  # a fuse group across a window exchange is cut there
        at = next((o for o in g if o in mine), None)
        if at is not None:
            ws, wm = mine[at]
            fuse.append((*[o for o in g if o in before], ws))
            fuse.append((wm, *[o for o in g if o not in before]))
        elif any(o in before for o in g) and any(o in after for o in g):
            fuse.append(tuple(o for o in g if o in before))
            fuse.append(tuple(o for o in g if o not in before))
        else:
            fuse.append(g)

    def widen(group: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(x for o in group for x in (*mine.get(o, ()), o))

    channels = tuple(tuple(widen(ch) for ch in chans) if any(o in mine for ch in chans for o in ch) else chans
                     for chans in ann.channels)
    # no PE may hold both what is before the window exchange and what is after it in one
    # channel (such PEs of two channels would send to each other: a cycle of PEs)
    apart = []
    for c in range(k):
        ws, wm = mine[copies[c]]
        pre = [Region.channel_op(o, c) for o in region.operators if Region.channel_op(o, c) in before] + [ws]
        post = [wm, copies[c], *[Region.channel_op(o, c) for o in region.operators
                                 if Region.channel_op(o, c) in after]]
        apart += [(a, b) for a in pre for b in post]
    ann = dataclasses.replace(ann, fuse=tuple(g for g in fuse if len(g) > 1), channels=channels,
                              exlocate=(*ann.exlocate, *apart))
    return ann


def _reach(graph: AppGraph, op: str, members: set[str], forward: bool) -> set[str]:
    """The operators of ``members`` with a path from ``op`` (``forward``) or to it inside ``members``."""
    step: dict[str, set[str]] = defaultdict(set)
    for s in graph.streams:
        a, b = (s.src.op, s.dst.op) if forward else (s.dst.op, s.src.op)
        step[a].add(b)
    return walk(op, step, members)


def _annotations(ann: Annotations, region: Region, members: set[str], producers: list[tuple[str, str]],
                 consumer: str | None) -> Annotations:
    k = region.width

    def per_channel(groups, kind: str, mixed_ok: bool):
        out = []
        for g in groups:
            inside = [o for o in g if o in members]
            if not inside:
                out.append(g)
            elif len(inside) == len(g):
                out.extend(tuple(Region.channel_op(o, c) for o in g) for c in range(k))
            elif mixed_ok:
                rest = tuple(o for o in g if o not in members)
                if len(rest) > 1:
                    out.append(rest)
            else:
                raise UsageError(f"{kind}({', '.join(g)}) mixes operators of parallel region '{region.name}' "
                                 f"with operators outside it; a region is replicated whole")
        return tuple(out)

    fuse = list(per_channel(ann.fuse, "fuse", mixed_ok=True))
    for c in range(k):
        chan = tuple(Region.channel_op(o, c) for o in region.operators)
        if len(chan) > 1:
            fuse.append(chan)
    fuse.extend(producers)  # each split with its producer
    if consumer is not None:
        fuse.append((region.merge, consumer))
    return Annotations(
        colocate=per_channel(ann.colocate, "colocate", mixed_ok=False),
        exlocate=per_channel(ann.exlocate, "exlocate", mixed_ok=False),
        host=tuple((o, n) for o, n in ann.host if o not in members),
        fuse=tuple(fuse),
        parallel=tuple(p for p in ann.parallel if p[0] != region.name),
        channels=(*ann.channels, tuple(tuple(Region.channel_op(o, c) for o in region.operators) for c in range(k))),
        apart=ann.apart,
    )


def rewrite_region(graph: AppGraph, region: Region, copies: dict | None = None) -> AppGraph:
    """``graph`` with one region (of width > 1) rewritten; ``physical_graph`` applies this
    region by region. ``copies``: :func:`channel_copies` of the logical graph, if any."""
    return _rewrite_one(graph, region, copies)


def rewritten(graph: AppGraph, regions: tuple[Region, ...]) -> AppGraph:
    """``graph`` with ``regions`` (each of width > 1) rewritten one after another by
    :func:`rewrite_region`, each prefix computed once per graph (``AppGraph.memo``): FATM's
    width vectors that share their first regions' widths share those rewrites (and the
    region shapes their graphs memoise), and ``optimize.widths.physical_profile`` maps a
    profile through the same prefixes. The graphs are the ones rewriting from scratch makes."""
    if not regions:
        return graph
    key = ("rewritten", regions)
    out = graph.memo.get(key)
    if out is None:
        out = graph.memo[key] = _rewrite_one(rewritten(graph, regions[:-1]), regions[-1], channel_copies(graph))
    return out


def channel_copies(graph: AppGraph) -> dict:
    """The memo of channel copies made from ``graph``'s operators (:func:`_copies_of`),
    kept with the graph: width vectors that share a region's width share its copies."""
    return graph.memo.setdefault("channel_copies", {})


def physical_graph(graph: AppGraph, regions: tuple[Region, ...]) -> AppGraph:
    """The graph that fusion, placement and codegen work on: every region of width > 1
    rewritten into split, channels and merge (regions are rewritten one after another,
    so a region may follow another's merge), then every key exchange (a region with
    ``fed == "exchange"``) put in place of the merge and split between its two regions
    (:func:`_exchange`). Computed once per graph and regions: the plan, its check,
    codegen and the optimizer share the result (``AppGraph.memo``)."""
    key = ("physical", tuple(r for r in regions if r.width > 1))
    out = graph.memo.get(key)
    if out is None:
        out = graph
        if key[1]:  # the last rewrite is the plan's own graph (its fingerprint is set below)
            out = _rewrite_one(rewritten(graph, key[1][:-1]), key[1][-1], channel_copies(graph))
        if key[1]:  # what it is rewritten from decides it: not hashed again over thousands of copies
            out.__dict__["fingerprint"] = hashlib.sha256(
                f"{graph.fingerprint}/{key[1]!r}".encode()).hexdigest()[:16]
        by_name = {r.name: r for r in regions}
        for r in key[1]:
            if r.fed == EXCHANGE:
                up = by_name.get(r.after)
                problem = (f"it names no region '{r.after}' of the plan" if up is None else
                           f"region '{up.name}' runs at width 1" if up.width < 2 else
                           exchange_problem(graph, up, r))
                if problem is None and feeding_region(graph, regions, r) != up:
                    problem = f"it is not entered by region '{up.name}''s output"
                if problem is not None:
                    raise UsageError(f"parallel region '{r.name}' is fed by an exchange from region "
                                     f"'{r.after}', but {problem}; plan it again")
                out = _exchange(out, up, r)
        if key[1] and "fingerprint" not in out.__dict__:  # the exchanges' graph: decided by the same
            out.__dict__["fingerprint"] = hashlib.sha256(  # (the regions say which are exchanges)
                f"{graph.fingerprint}/{key[1]!r}/exchanges".encode()).hexdigest()[:16]
        graph.memo[key] = out
    return out


def _exchange(graph: AppGraph, up: Region, down: Region) -> AppGraph:
    """``graph`` (both regions rewritten) with the merge of ``up`` and the split of ``down``
    replaced by a key exchange: ``exchange_split`` ``<down>__xsplit<c>`` at the end of each
    of ``up``'s channels, hashing ``down``'s key into ``down.width`` outputs, and
    ``exchange_merge`` ``<down>__xmerge<d>`` at the head of each of ``down``'s channels,
    merging the ``up.width`` senders by number. Each sender joins its upstream channel and
    each receiver its downstream channel (``Annotations.channels``; FMAN's fuse groups)."""
    merge, split = up.merge, down.split
    # an event-time window behind the exchange that reads its clock off the entering tuple:
    # every sender sends its watermark frames (plan.eventtime)
    clock = graph.op(split).params.clock
    into = sorted((int(s.dst.port[2:]), s.src) for s in graph.streams if s.dst.op == merge)
    outof = sorted((int(s.src.port[3:]), s.dst) for s in graph.streams if s.src.op == split)
    schema = graph.op(merge).inputs[0].schema  # the upstream channels' exit schema, with the number
    senders = [Operator(down.exchange_split(c), "exchange_split", (InPort("in", schema),),
                        tuple(OutPort(f"out{d}", schema) for d in range(down.width)),
                        ExchangeSplitParams(down.width, down.key, BLOCK, clock), STATEFUL, (),
                        f"key exchange into parallel region '{down.name}'") for c in range(up.width)]
    receivers = [Operator(down.exchange_merge(d), "exchange_merge",
                          tuple(InPort(f"in{c}", schema) for c in range(up.width)), (OutPort("out", schema),),
                          ExchangeMergeParams(up.width, clocked=clock is not None), STATEFUL, (),
                          f"key exchange into parallel region '{down.name}'") for d in range(down.width)]
    ops: list[Operator] = []
    for op in graph.operators:
        ops.extend(senders if op.name == merge else receivers if op.name == split else (op,))
    streams: list[Stream] = []
    for s in graph.streams:
        if s.dst.op == merge and s.dst.port == "in0":
            streams.extend(Stream(src, PortRef(down.exchange_split(c), "in")) for c, src in into)
            streams.extend(Stream(PortRef(down.exchange_split(c), f"out{d}"), PortRef(down.exchange_merge(d), f"in{c}"))
                           for c in range(up.width) for d in range(down.width))
        elif s.src.op == split and s.src.port == "out0":
            streams.extend(Stream(PortRef(down.exchange_merge(d), "out"), dst) for d, dst in outof)
        elif merge not in (s.src.op, s.dst.op) and split not in (s.src.op, s.dst.op):
            streams.append(s)
    ann = graph.annotations
    fuse = [g for g in ann.fuse if merge not in g and split not in g]
    fuse += [(src.op, down.exchange_split(c)) for c, src in into]
    fuse += [(down.exchange_merge(d), dst.op) for d, dst in outof]
    channels = []
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    for chans in ann.channels:
        if Region.channel_op(up.operators[0], 0) in chans[0]:
            chans = tuple((*ch, down.exchange_split(c)) for c, ch in enumerate(chans))
            before = tuple(o for ch in chans for o in ch)
        elif Region.channel_op(down.operators[0], 0) in chans[0]:
            chans = tuple((down.exchange_merge(d), *ch) for d, ch in enumerate(chans))
            after = tuple(o for ch in chans for o in ch)
        channels.append(chans)
    # no PE holds both sides: a PE of upstream channel c and downstream channel d sends to
    # every receiver and hears every sender, so two of them would send to each other
    apart = (*ann.apart, (before, after)) if before and after else ann.apart
    ann = dataclasses.replace(ann, fuse=tuple(fuse), channels=tuple(channels), apart=apart)
    return AppGraph(graph.name, tuple(ops), tuple(streams), ann, graph.params, graph.module)


def final_base(graph: AppGraph, op: Operator) -> int:
    """The number a channel copy's end-of-stream rows start from (``Kind.final_rows``).

    A row flushed at end of stream is numbered ``base + n`` with ``n`` a number that
    reached the operator (its group's or key's first tuple), so ``n < base`` must hold
    for every such number: ``base = 2**b``, ``b`` the bits of every number that can reach
    it (``kinds.numbering``: the split's are below ``FINAL_BASE = 2**62``, each
    end-of-stream emitter on a path before it adds one bit, a join 65). At width 1 an
    operator's flush comes after everything its upstream flushed; these bases keep that
    order at every width. Numbers from ``2**64`` up cross PEs as big ints."""
    return 1 << input_bits(graph, op, kind_of)


def channel_label(physical: str, regions: tuple[Region, ...]) -> str:
    """``op__c`` -> ``op@c`` for channel copies; other names unchanged."""
    for r in regions:
        if r.width > 1:
            for o in r.operators:
                for c in range(r.width):
                    if physical == Region.channel_op(o, c):
                        return f"{o}@{c}"
    return physical
