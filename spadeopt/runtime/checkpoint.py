"""Consistent checkpoints inside a PE: barriers, alignment, snapshots, restore.

The protocol is Flink's asynchronous barrier snapshots (Chandy-Lamport for FIFO
channels), with the PE as the unit
(docs/decisions/037-aligned-barrier-checkpoints-with-the-pe-as-unit.md):

* The driver's coordinator (``spadeopt.deploy.checkpoints``) triggers checkpoint ``n``
  in every PE that has sources. The PE's sources thread takes it at a turn boundary
  (``drive_sources``): every source of the PE is then between two batches, and
  every batch it emitted has run through all operators fused behind it (direct calls).
* A PE's *channels* are its input links and, when it has sources, its sources
  thread. Barrier ``n`` is aligned when every channel delivered it (a finished source
  thread counts as delivered); a link that delivered it is *blocked*: its later frames
  are held, in order, until the alignment completes.
* Aligned, the PE snapshots every operator's state (``rt.state`` registrations made by
  the generated code of a checkpointing build), the positions of its sources (records
  passed on; for a resumable source such as a broker, its ``resume_state`` at the last
  record passed on: the entry ID per stream key) and its sinks (committed count; the file
  lines since the last barrier; a transactional sink's uncommitted epochs), sends the
  snapshot to the coordinator, sends barrier ``n`` on every outgoing link (after
  everything emitted before it), then releases the held frames. A parallel region led
  by a partitioned broker source needs nothing more: each channel's copy of the source
  is a source of its PE (its own keys, so its own entry IDs), and the PE holding the
  arrival merge aligns on every channel like any PE with several inputs (the guarantee
  after that merge is per partition key:
  docs/decisions/040-checkpoints-of-arrival-regions-are-exactly-once-per-key.md).
* When every PE's part is stored the coordinator says checkpoint ``n`` is complete; a
  transactional sink (the Redis sink) then commits its epochs up to ``n`` (entries and a
  marker of ``n`` in one transaction, an id already marked skipped). A restored part's
  epochs are committed at once (its checkpoint is complete), so an epoch whose
  completion message was lost in a failure is neither lost nor appended twice.
* A PE that has seen a final marker or whose source ended is *unclean*: it passes
  barriers on at once and reports no snapshot, so no later checkpoint completes (Flink
  before FLIP-147 stopped checkpointing the same way once a task finished). A final on
  a blocked link ends the alignment the same way (its held frames are released).

State crosses to the driver and back as msgpack (``encode_state``), never pickle:
tuples, deques and big ints are extension types, and so are collections of flat rows
(a window's groups, packed in one call: ``_fast``), everything else is msgpack's own;
``decode_state`` builds only those types, and a restore checks the snapshot's shape
against the PE before changing anything.
"""

from __future__ import annotations

import hashlib
import os
import queue
import secrets
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from itertools import chain
from typing import Any

import msgpack
import zmq

from spadeopt import wire

SOURCES = "sources"  # the alignment channel of a PE's sources thread
_TUPLE, _DEQUE, _GROUPS, _ROWS = 2, 3, 4, 5
_FLAT = frozenset({str, int, float, bool, bytes, type(None)})  # what a row's field may be on the fast path
_JUST_TUPLE, _JUST_LIST = frozenset({tuple}), frozenset({list})
MAX_STATE = 1 << 31  # bytes: msgpack's own limits are per object; a snapshot part is one blob


class CheckpointError(RuntimeError):
    """A snapshot that cannot be taken, read or restored; names the PE and what was wrong."""


# ---- the state codec -------------------------------------------------------------------

_depth = threading.local()  # per thread: the nesting depth and a reused Packer per depth (not reentrant)


def _nested(data: Any) -> bytes:
    """``data`` packed by this depth's reused Packer (half the time of ``packb`` per
    tuple: a window's state is mostly small tuples)."""
    d = getattr(_depth, "d", 0)
    packers = getattr(_depth, "packers", None)
    if packers is None:
        packers = _depth.packers = []
    if d == len(packers):
        packers.append(msgpack.Packer(default=_encode_other, strict_types=True))
    _depth.d = d + 1
    try:
        return packers[d].pack(data)
    finally:
        _depth.d = d


def _encode_other(obj: object) -> msgpack.ExtType:
    t = type(obj)
    if t is tuple:
        return msgpack.ExtType(_TUPLE, _nested(list(obj)))
    if t is deque:
        return msgpack.ExtType(_DEQUE, _nested([obj.maxlen, list(obj)]))
    if t is int:  # only ints past 64 bits get here
        return msgpack.ExtType(wire.BIGINT_EXT, obj.to_bytes(obj.bit_length() // 8 + 1, "big", signed=True))
    raise CheckpointError(f"a {t.__name__} ({obj!r:.60}) cannot be checkpointed: state is made of None, bool, "
                          f"int, float, str, bytes, list, tuple, dict and deque")


# The fast path. A window's state is a dict of key -> list (or deque) of rows, a row a
# tuple of scalars; packing each row through ``default`` (an ExtType per tuple, a Python
# call each) cost ~35 ms for 26 k rows. A collection of flat rows (checked at C speed:
# the set of the types of its items, then of their fields) is packed in one call by a
# Packer that writes tuples as arrays, inside one extension (``_ROWS``: a list of rows;
# ``_GROUPS``: a dict of key -> list of rows, keys scalars or flat tuples; a list may
# also hold scalars: a tumbling window's running values), and unpacked
# with every array as a tuple (``use_list=False``): 3-4x less CPU both ways, and the
# decoded value is the same as on the slow path.

def _loose(data: Any) -> bytes | None:
    """``data`` (flat rows: only scalars inside) packed with tuples as arrays; None for
    an int past 64 bits (the slow path packs it)."""
    packer = getattr(_depth, "loose", None)
    if packer is None:
        packer = _depth.loose = msgpack.Packer(strict_types=False, autoreset=True)
    try:
        return packer.pack(data)
    except (OverflowError, ValueError):  # an int past 64 bits
        packer.reset()
        return None


def _flat_keys(d: dict) -> bool:
    kinds = {*map(type, d)}
    if kinds <= _FLAT:
        return True
    return kinds <= _FLAT | _JUST_TUPLE and {*map(type, chain.from_iterable(k for k in d if type(k) is tuple))} <= _FLAT


def _flat_items(vals: Any) -> bool:
    """Every list in ``vals`` holds flat items: scalars, or tuples of scalars (a window's
    rows, or a tumbling window's running values: a count, sums, its first tuple)."""
    kinds = {*map(type, chain.from_iterable(vals))}
    if kinds <= _JUST_TUPLE:
        return {*map(type, chain.from_iterable(chain.from_iterable(vals)))} <= _FLAT
    if kinds <= _FLAT:
        return True
    return kinds <= _FLAT | _JUST_TUPLE and \
        {*map(type, chain.from_iterable(x for x in chain.from_iterable(vals) if type(x) is tuple))} <= _FLAT


def _fast(obj: Any) -> Any:
    """``obj`` with its collections of flat rows replaced by ``_ROWS`` / ``_GROUPS``
    extensions; everything else as it is (``_encode_other`` packs it). Every container on
    the way is copied or packed, never changed."""
    t = type(obj)
    if t is dict:
        vals = obj.values()
        if obj and {*map(type, vals)} == _JUST_LIST and _flat_items(vals) and _flat_keys(obj):
            data = _loose(obj)
            if data is not None:
                return msgpack.ExtType(_GROUPS, data)
        return {k: _fast(v) if type(v) in _CONTAINERS else v for k, v in obj.items()}
    if t is list or t is deque:
        if obj and {*map(type, obj)} == _JUST_TUPLE and {*map(type, chain.from_iterable(obj))} <= _FLAT:
            data = _loose(obj if t is list else list(obj))
            if data is not None:
                rows = msgpack.ExtType(_ROWS, data)
                return rows if t is list else msgpack.ExtType(_DEQUE, _nested([obj.maxlen, rows]))
        if t is list:
            return [_fast(v) if type(v) in _CONTAINERS else v for v in obj]
    return obj


_CONTAINERS = frozenset({dict, list, deque})


def _no_ext(code: int, data: bytes) -> Any:
    raise ValueError(f"extension type {code} inside flat rows")


def _rows(data: bytes) -> list:
    rows = msgpack.unpackb(data, ext_hook=_no_ext, raw=False, use_list=False, strict_map_key=False)
    if type(rows) is not tuple or not {*map(type, rows)} <= _JUST_TUPLE:
        raise ValueError("bad rows")
    return list(rows)


def _groups(data: bytes) -> dict:
    groups = msgpack.unpackb(data, ext_hook=_no_ext, raw=False, use_list=False, strict_map_key=False)
    if type(groups) is not dict or not {*map(type, groups.values())} <= _JUST_TUPLE or \
            not _flat_items(groups.values()):
        raise ValueError("bad groups")
    return {k: list(v) for k, v in groups.items()}


def _decode_ext(code: int, data: bytes) -> Any:
    if code == _TUPLE:
        return tuple(_unpack(data))
    if code == _DEQUE:
        maxlen, items = _unpack(data)
        if maxlen is not None and (type(maxlen) is not int or maxlen < 0):
            raise ValueError(f"bad deque maxlen {maxlen!r}")
        return deque(items, maxlen)
    if code == _ROWS:
        return _rows(data)
    if code == _GROUPS:
        return _groups(data)
    if code == wire.BIGINT_EXT:
        return int.from_bytes(data, "big", signed=True)
    raise ValueError(f"unknown extension type {code}")


def _unpack(data: bytes) -> Any:
    return msgpack.unpackb(data, ext_hook=_decode_ext, raw=False, use_list=True, strict_map_key=False)


def encode_state(obj: Any) -> bytes:
    """``obj`` as msgpack: tuples stay tuples, deques keep their maxlen (collections of
    flat rows take the fast path, ``_fast``).

    >>> decode_state(encode_state({(1, "a"): [deque([(2**70,)], 3), None]}))
    {(1, 'a'): [deque([(1180591620717411303424,)], maxlen=3), None]}
    """
    return msgpack.packb(_fast(obj), default=_encode_other, strict_types=True)


def decode_state(data: bytes) -> Any:
    """The value ``encode_state`` made; ``CheckpointError`` for anything else."""
    try:
        return _unpack(data)
    except Exception as exc:  # noqa: BLE001 - msgpack raises several kinds for garbage
        raise CheckpointError(f"not a spadeopt snapshot ({type(exc).__name__}: {exc or 'no detail'})") from None


# ---- operator state: what the generated code registers --------------------------------

def _take(obj: Any) -> Any:
    """The state of one registered object: a dict or list as it is, an object with
    ``snapshot()`` (a custom operator) its answer, any other object its attributes."""
    if type(obj) in (dict, list):
        return obj
    snap = getattr(obj, "snapshot", None)
    if callable(snap):
        return snap()
    return dict(vars(obj))


def _put(obj: Any, value: Any, where: str) -> None:
    """Restore ``obj`` in place (the generated code holds references to it)."""
    if type(obj) is dict:
        if type(value) is not dict:
            raise CheckpointError(f"{where}: expected a dict in the snapshot, found a {type(value).__name__}")
        obj.clear()
        obj.update(value)
    elif type(obj) is list:
        if type(value) is not list or len(value) != len(obj):
            raise CheckpointError(f"{where}: expected a list of {len(obj)} in the snapshot, found {value!r:.60}")
        obj[:] = value
    elif callable(getattr(obj, "snapshot", None)):
        obj.restore(value)
    else:
        if type(value) is not dict or set(value) != set(vars(obj)):
            raise CheckpointError(f"{where}: the snapshot's fields {sorted(value) if type(value) is dict else value!r:.80} "
                                  f"are not {type(obj).__name__}'s {sorted(vars(obj))}")
        vars(obj).update(value)


def snapshot_ops(states: dict[str, tuple]) -> dict[str, list]:
    return {op: [_take(o) for o in objs] for op, objs in states.items()}


def restore_ops(pe: str, states: dict[str, tuple], snap: Any) -> None:
    if type(snap) is not dict or set(snap) != set(states):
        have = sorted(snap) if type(snap) is dict else type(snap).__name__
        raise CheckpointError(f"PE {pe}: the snapshot holds operators {have}, the PE {sorted(states)}")
    for op, objs in states.items():
        vals = snap[op]
        if type(vals) is not list or len(vals) != len(objs):
            raise CheckpointError(f"PE {pe}, operator '{op}': the snapshot holds {vals!r:.60}, "
                                  f"expected {len(objs)} state value(s)")
        for i, (o, v) in enumerate(zip(objs, vals, strict=True)):
            _put(o, v, f"PE {pe}, operator '{op}' (state {i})")


# ---- source positions ----------------------------------------------------------------

class Tracked:
    """A source connector whose position the checkpointer records; on restore it skips
    the records a checkpoint had already passed on (replay by count: sources of a bounded
    run give the same records in the same order every time), or, for a ``resumable``
    source (a broker), reopens it just after the last record passed on (``resume``).

    The position is the records *passed on* (``Checkpointer.emitted``, called by
    ``PERuntime.source_batches`` as it hands a batch to the operators), not the records
    read: a live source holds a partial batch for up to ``--max-batch-delay``
    (``PERuntime._live_batches``), and a barrier injected while it holds one must not
    count those records, which no operator has seen yet (they would be skipped after a
    restore: lost). Held records belong to the next checkpoint: read again after a
    restore, passed on once. For a resumable source each read's ``resume_state()`` is
    kept with the records read through it (``marks``); a batch passed on is always
    whole reads (``_live_batches`` joins reads), so the state at the last record passed
    on is the mark whose count the records passed on have reached."""

    def __init__(self, ck: Checkpointer, name: str, src: Any) -> None:
        self.ck, self.name, self.src = ck, name, src
        self.resumable = bool(getattr(src, "resumable", False))
        self.read_n = 0  # records read (a resumable source's marks count them)
        self.marks: deque = deque()  # (records read through a read, resume_state after it)
        self.state: Any = None  # resume_state at the last record passed on (resumable sources)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.src, attr)

    def open(self) -> None:
        at = self.ck.rewind.get(self.name, 0)
        if type(at) is dict:  # a resumable source's state: reopen just after it
            if not self.resumable:
                raise CheckpointError(f"PE {self.ck.pe}: source '{self.name}' cannot resume from the position "
                                      f"its checkpoint recorded ({at!r:.80})")
            try:
                self.src.resume(at)
            except ValueError as exc:
                raise CheckpointError(f"PE {self.ck.pe}: {exc}") from None
            self.src.open()
            self.state = at
            self.ck.rewind.pop(self.name, None)
            return
        self.src.open()
        if self.resumable:
            self.state = self.src.resume_state()
        skip = self.ck.rewind.pop(self.name, 0)
        while skip > 0:
            batch = self.read(min(skip, 4096))
            if batch is None:
                raise CheckpointError(f"PE {self.ck.pe}: source '{self.name}' ended {skip} record(s) before "
                                      f"the position its checkpoint recorded")
            skip -= len(batch)
            if skip < 0:
                raise CheckpointError(f"PE {self.ck.pe}: source '{self.name}' read past its checkpointed position")
        if self.resumable:
            self.position(self.read_n)

    def read(self, n: int):
        batch = self.src.read(n)
        if batch is None:
            self.ck.source_ended(self.name)
        elif self.resumable:
            self.read_n += len(batch)
            st = self.src.resume_state()
            marks = self.marks
            if batch or st != (marks[-1][1] if marks else self.state):  # records, or entries skipped (dead letters)
                marks.append((self.read_n, st))
        return batch

    def position(self, passed: int) -> Any:
        """The resume state at the last record passed on (``passed`` records so far)."""
        marks = self.marks
        while marks and marks[0][0] <= passed:
            self.state = marks.popleft()[1]
        return self.state

    def close(self) -> None:
        self.ck.source_ended(self.name)
        self.src.close()


# ---- the PE's checkpointer -----------------------------------------------------------

class Checkpointer:
    """Attached to a ``PERuntime`` by ``attach`` (checkpointing builds, runs with
    ``--checkpoint-interval``); see the module doc for the protocol."""

    def __init__(self, rt: Any, channel: Channel | None) -> None:
        self.rt = rt
        self.pe = rt.pe_id
        self.channel = channel
        self.lock = threading.RLock()
        self.positions: dict[str, int] = dict.fromkeys(rt.sources, 0)  # records passed on (restored: from there)
        self.rewind: dict[str, Any] = {}  # source -> records to skip, or a resumable source's state
        self.tracked: dict[str, Tracked] = {}
        self.transactional: dict[str, Any] = {}  # sink -> its transactional connector (exactly once)
        self.recovered: dict[str, Any] = {}  # sink -> uncommitted epochs of the restored part
        self.ended: set[str] = set()
        self.clean = True
        self.trigger = 0  # the latest checkpoint the coordinator asked for
        self.due = False  # the sources thread has a trigger to take
        self.taken = 0  # the last checkpoint this PE's sources injected
        self.forwarded = 0  # the last barrier sent downstream
        self.aligning: int | None = None
        self.arrived: set[Any] = set()
        self.held: list[tuple[Any, Any]] = []
        self.release_due = False
        self._aligned = threading.Condition(self.lock)
        self.sources_done = not rt.sources
        self.snapshots = 0  # how many parts this PE sent (stats)
        self.snapshot_s = 0.0  # time spent taking them and sending the barriers on
        self.snapshot_cpu_s = 0.0  # the CPU of that in the aligning thread (the sources thread, or main)

    def stats(self) -> dict[str, Any]:
        """For the PE's report: parts sent, and the time and CPU the aligning thread spent
        taking them (``spadeopt bench checkpoint``)."""
        return {"snapshots": self.snapshots, "snapshot_s": self.snapshot_s, "snapshot_cpu_s": self.snapshot_cpu_s}

    def track(self, name: str, src: Any) -> Tracked:
        t = self.tracked[name] = Tracked(self, name, src)
        return t

    def emitted(self, name: str, n: int) -> None:
        """Source ``name`` passes ``n`` records on to its operators (sources thread, in
        the turn that runs them: no barrier comes between; see ``Tracked``)."""
        self.positions[name] += n
        t = self.tracked.get(name)
        if t is not None and t.resumable:
            t.position(self.positions[name])

    def _source_position(self, name: str) -> Any:
        """Records passed on, or a resumable source's state at the last one passed on
        (a restored state until the source has reopened)."""
        t = self.tracked.get(name)
        if t is not None and t.state is not None:
            return t.position(self.positions[name])
        at = self.rewind.get(name)
        return at if type(at) is dict else self.positions[name]

    def complete(self, n: int) -> None:
        """From the channel thread: checkpoint ``n`` is complete (every PE's part is
        stored): transactional sinks commit their epochs up to ``n``. A failure fails the
        PE (the run restarts from the checkpoint, whose part holds those epochs)."""
        if self.transactional:
            self.rt._guard("checkpoints", lambda: [c.commit(n) for _, c in sorted(self.transactional.items())])

    # -- channels --
    def _expected(self) -> set[Any]:
        want = {(ref, link) for ref, p in self.rt.inputs.items() for link in p.upstream if link not in p.finaled}
        if not self.sources_done:
            want.add(SOURCES)
        return want

    def source_ended(self, name: str) -> None:
        with self.lock:
            if name in self.ended:
                return
            self.ended.add(name)
            self.clean = False
            if self.ended >= set(self.rt.sources):
                self.sources_done = True
            if self.aligning is not None:
                self._abort()

    # -- the sources thread --
    def on_trigger(self, n: int) -> None:
        """From the channel thread: the coordinator asks for checkpoint ``n``."""
        if n > self.trigger:
            self.trigger = n
            self.due = True

    def source_barrier(self) -> None:
        """At a turn boundary of the sources thread (``drive_sources``): inject the
        triggered barrier and wait until this PE's alignment of it is over."""
        with self.lock:
            self.due = False
            n = self.trigger
            if n <= self.taken:
                return
            self.taken = n
            if not self.clean:
                self._forward(n)
                return
            self._arrive(n, SOURCES)
            while self.aligning == n and not self.rt.stop:
                self._aligned.wait(0.1)

    # -- the main thread --
    def intercept(self, port: Any, frame: Any, data: Any) -> bool:
        """Called for every frame off an input socket before the PE handles it: True
        when this took it (a barrier, or a frame of a blocked link, held)."""
        tag = data[:1]
        if tag == wire.BARRIER_TAG:
            self._barrier(port, frame, data)
            return True
        if tag == wire.FINAL_TAG:
            with self.lock:
                self.clean = False
                if self.aligning is not None:
                    self._abort()
            if self.release_due:  # frames held before this final reach the operators first
                self.release()
            return False
        if self.aligning is None:
            return False
        with self.lock:
            if self.aligning is not None and (port.ref, self._link(port, frame)) in self.arrived:
                self.held.append((port, frame))
                return True
        return False

    def release(self) -> None:
        """Hand the held frames to the PE, in arrival order (main thread only)."""
        with self.lock:
            held, self.held = self.held, []
            self.release_due = False
        for port, frame in held:  # a barrier among them may start (and end) another alignment
            if not self.intercept(port, frame, frame.buffer):
                self._dispatch(port, frame)

    def _link(self, port: Any, frame: Any) -> str:
        return frame.get("User-Id") if self.rt.secure else next(iter(port.upstream), "?")

    def _barrier(self, port: Any, frame: Any, data: Any) -> None:
        from spadeopt.runtime.pe import LinkError

        link = self._link(port, frame)
        try:
            n, claimed = wire.parse_barrier(data)
        except wire.WireError as exc:
            raise LinkError(self.pe, port, link, str(exc)) from None
        if self.rt.secure and claimed != link:
            raise LinkError(self.pe, port, link, f"checkpoint barrier names link {claimed!r}")
        if port.upstream and link not in port.upstream:
            raise LinkError(self.pe, port, None, f"checkpoint barrier of {link!r}, not an upstream link of this port")
        with self.lock:
            if not self.clean:
                if n > self.forwarded:
                    self._forward(n)
                return
            self._arrive(n, (port.ref, link))
        if self.release_due:
            self.release()

    def _arrive(self, n: int, channel: Any) -> None:
        if self.aligning is not None and n > self.aligning:  # the channel skipped the one aligning
            self._abort()
        if n <= self.forwarded:
            return
        if self.aligning is None:
            self.aligning = n
        self.arrived.add(channel)
        if self._expected() <= self.arrived:
            self._complete(n)

    def _complete(self, n: int) -> None:
        t0 = time.perf_counter()
        c0 = time.thread_time()
        if self.clean and self.channel is not None:
            self.channel.send_part(n, self.take(n))
            self.snapshots += 1
        self._forward(n)
        self.snapshot_s += time.perf_counter() - t0
        self.snapshot_cpu_s += time.thread_time() - c0
        self._end_alignment()

    def _abort(self) -> None:
        n = self.aligning
        if n is not None and n > self.forwarded:
            self._forward(n)
        self._end_alignment()

    def _end_alignment(self) -> None:
        self.aligning = None
        self.arrived = set()
        if self.held:
            self.release_due = True
        self._aligned.notify_all()

    def _forward(self, n: int) -> None:
        for sender in self.rt.senders.values():
            flush = getattr(sender, "flush", None)
            if flush is not None:  # a sender holding a partial batch sends it first, as before a final:
                flush()  # its tuples are in this snapshot's state, so they belong before the barrier
            sender.barrier(n)
        self.forwarded = n

    def _dispatch(self, port: Any, frame: Any) -> None:
        from spadeopt.runtime.pe import LinkError

        rt = self.rt
        if frame.buffer[:1] == wire.MARKER_TAG:  # a latency marker held with its link's frames
            rt.take_marker(port, frame, frame.buffer)
            return
        try:
            batch = wire.decode_batch(frame.buffer, port.types, rt.max_frame, port.pulsed)
        except wire.WireError as exc:
            raise LinkError(rt.pe_id, port, self._link(port, frame), str(exc)) from None
        if port.point is None:
            port.fn(batch)
        else:
            rt._sampled_dispatch(port, batch)

    # -- snapshots --
    def take(self, n: int) -> tuple[bytes, dict[str, bytes]]:
        """This PE's part of checkpoint ``n``: its state, and each file sink's lines since
        the previous barrier (committed by the coordinator with the checkpoint)."""
        sinks = self.rt.sinks
        doc = {"pe": self.pe, "id": n, "ops": snapshot_ops(self.rt.states),
               "sources": {name: self._source_position(name) for name in self.positions},
               "sinks": {name: s.count for name, s in sinks.items()}}
        if self.transactional:  # each one's epochs not committed yet, this barrier's the last
            doc["commits"] = {name: c.prepare(n) for name, c in sorted(self.transactional.items())}
        return encode_state(doc), {name: s.take() for name, s in sorted(sinks.items()) if s.staged}

    def restore(self, data: bytes) -> int:
        """Restore operator state, sink counts and source positions from a part
        ``take`` made; the checkpoint id."""
        doc = decode_state(data)
        fields = {"pe", "id", "ops", "sources", "sinks"}
        if type(doc) is not dict or not fields <= set(doc) <= fields | {"commits"}:
            raise CheckpointError(f"PE {self.pe}: not a snapshot part (fields {sorted(doc) if type(doc) is dict else doc!r:.60})")
        if doc["pe"] != self.pe:
            raise CheckpointError(f"PE {self.pe}: the snapshot part is PE {doc['pe']!r}'s")
        srcs, sinks, commits = doc["sources"], doc["sinks"], doc.get("commits", {})
        if type(srcs) is not dict or set(srcs) != set(self.rt.sources) or \
                any(not (type(v) is int and v >= 0 or type(v) is dict) for v in srcs.values()):
            raise CheckpointError(f"PE {self.pe}: the snapshot's source positions {srcs!r:.80} do not fit its "
                                  f"sources {sorted(self.rt.sources)}")
        if type(sinks) is not dict or set(sinks) != set(self.rt.sinks) or \
                any(type(v) is not int or v < 0 for v in sinks.values()):
            raise CheckpointError(f"PE {self.pe}: the snapshot's sink counts {sinks!r:.80} do not fit its "
                                  f"sinks {sorted(self.rt.sinks)}")
        if type(commits) is not dict or not set(commits) <= set(self.rt.sinks) or any(
                not getattr(self.rt.sinks[name].connector, "transactional", False) for name in commits):
            raise CheckpointError(f"PE {self.pe}: the snapshot holds epochs of sinks {sorted(commits)!r:.80}, "
                                  f"not transactional sinks of this PE")
        restore_ops(self.pe, self.rt.states, doc["ops"])
        for name, count in sinks.items():
            self.rt.sinks[name].count = count
        self.rewind = dict(srcs)
        self.positions = {name: v if type(v) is int else 0 for name, v in srcs.items()}
        self.recovered = commits
        self.taken = self.forwarded = self.trigger = doc["id"]
        return doc["id"]


# ---- the channel to the driver's coordinator -------------------------------------------

class Channel:
    """A DEALER socket to the coordinator (CURVE, the coordinator's server key; every
    message carries the run's token). ``hello`` is synchronous (the restore part comes
    back); afterwards one thread owns the socket: it takes triggers and sends parts.

    The thread sleeps in a poll of the socket and of a wake-up pipe (``send_part``,
    ``finish`` write a byte to it), not in a 20 ms poll loop: each wake-up takes the GIL
    from the thread running the operators, and on a loaded machine a GIL hand-off can
    wait for the scheduler (docs/decisions/041-checkpoint-cost-and-running-value-windows.md)."""

    IDLE_MS = 1000  # the longest sleep once there is nothing to watch (a wake-up ends it)
    WATCH_MS = 20  # the sleep while waiting for the first output (a restart's)

    def __init__(self, pe: str, cfg: dict[str, Any]) -> None:
        from spadeopt.runtime.security import keypair

        self.pe = pe
        self.token = cfg["token"]
        self.ctx = zmq.Context.instance()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 10_000)
        pub, sec = keypair()
        self.sock.curve_secretkey, self.sock.curve_publickey = sec.encode(), pub.encode()
        self.sock.curve_serverkey = cfg["server_key"].encode()
        self.sock.connect(cfg["endpoint"])
        self.out: queue.Queue = queue.Queue()
        self.unacked: set[int] = set()
        self.acked = threading.Condition()
        self.on_trigger: Callable[[int], None] = lambda n: None
        self.on_complete: Callable[[int], None] = lambda n: None
        self.lineage = self.run = ""  # the checkpoint directory's identity and this run's (hello)
        self.outputs: Callable[[], int] | None = None  # tuples the PE's sinks took (attach)
        self._outputs_at_start = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)

    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"\0")
        except (BlockingIOError, OSError):  # full: a wake-up is pending anyway; closed: finished
            pass

    def _send(self, doc: dict) -> None:
        self.sock.send(msgpack.packb({**doc, "pe": self.pe, "token": self.token}))

    def _recv(self, timeout: float) -> dict | None:
        if not self.sock.poll(int(timeout * 1000)):
            return None
        doc = msgpack.unpackb(self.sock.recv(), raw=False)
        if type(doc) is not dict:
            raise CheckpointError(f"PE {self.pe}: the coordinator sent {doc!r:.60}")
        return doc

    def hello(self, has_sources: bool, timeout: float = 60.0) -> bytes | None:
        self._send({"t": "hello", "sources": has_sources})
        deadline = time.time() + timeout
        while time.time() < deadline:
            doc = self._recv(1.0)
            if doc is not None and doc.get("t") == "restore":
                part = doc.get("part")
                if part is not None and type(part) is not bytes:
                    raise CheckpointError(f"PE {self.pe}: the coordinator's restore part is not bytes")
                self.lineage, self.run = str(doc.get("lineage", "")), str(doc.get("run", ""))
                return part
        raise CheckpointError(f"PE {self.pe}: the checkpoint coordinator did not answer within {timeout:.0f} s")

    def start(self, outputs: Callable[[], int] | None = None) -> None:
        """Take triggers and send parts from now on; ``outputs()`` (the tuples this PE's
        sinks took) is watched, and the coordinator told once when it first grows (the
        time to the first new output after a restart)."""
        if outputs is not None:
            self.outputs, self._outputs_at_start = outputs, outputs()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="checkpoints")
        self._thread.start()

    def send_part(self, n: int, part: tuple[bytes, dict[str, bytes]]) -> None:
        with self.acked:
            self.unacked.add(n)
        self.out.put({"t": "part", "id": n, "state": part[0], "sinks": part[1],
                      "sha256": hashlib.sha256(part[0]).hexdigest()})
        self._wake()

    def _loop(self) -> None:
        outputs = self.outputs
        poller = zmq.Poller()
        poller.register(self.sock, zmq.POLLIN)
        poller.register(self._wake_r, zmq.POLLIN)
        while True:
            stopping = self._stop.is_set()  # a run that ended fast still reports its first output
            if outputs is not None and outputs() > self._outputs_at_start:  # once: a restart's first new output
                self.out.put({"t": "output"})
                outputs = None
            try:
                while True:
                    self._send(self.out.get_nowait())
            except queue.Empty:
                pass
            if stopping:
                return
            ready = dict(poller.poll(self.WATCH_MS if outputs is not None else self.IDLE_MS))
            if self._wake_r in ready:
                try:
                    while os.read(self._wake_r, 4096):
                        pass
                except BlockingIOError:
                    pass
            doc = self._recv(0) if self.sock in ready else None
            while doc is not None:
                kind = doc.get("t")
                if kind == "trigger" and type(doc.get("id")) is int:
                    self.on_trigger(doc["id"])
                elif kind == "complete" and type(doc.get("id")) is int:
                    self.on_complete(doc["id"])
                elif kind == "ack" and type(doc.get("id")) is int:
                    with self.acked:
                        self.unacked.discard(doc["id"])
                        self.acked.notify_all()
                doc = self._recv(0)

    def finish(self, timeout: float = 60.0) -> None:
        """Wait until the coordinator has every part this PE sent (end of the run)."""
        deadline = time.time() + timeout
        with self.acked:
            while (self.unacked or not self.out.empty()) and time.time() < deadline:
                self.acked.wait(0.05)
        if self.unacked:
            print(f"spadeopt: PE {self.pe}: checkpoint part(s) {sorted(self.unacked)} not acknowledged by "
                  f"the coordinator", file=sys.stderr, flush=True)
        self._stop.set()
        self._wake()
        if self._thread is not None:
            self._thread.join(2.0)
        self.sock.close(linger=0)
        if self._thread is None or not self._thread.is_alive():
            fds, self._wake_r, self._wake_w = (self._wake_r, self._wake_w), -1, -1
            for fd in fds:
                os.close(fd)


def attach(rt: Any, cfg: dict[str, Any]) -> Checkpointer:
    """Make ``rt`` take part in checkpoints (``cfg``: the coordinator's endpoint,
    server key and token): restore its state if the coordinator has a checkpoint,
    stage its file sinks, and start taking triggers."""
    channel = Channel(rt.pe_id, cfg)
    ck = Checkpointer(rt, channel)
    rt.checkpoints = ck
    part = channel.hello(bool(rt.sources))
    n = None
    if part is not None:
        n = ck.restore(part)
        print(f"spadeopt: PE {rt.pe_id} restored checkpoint {n}", file=sys.stderr, flush=True)
    for name, s in rt.sinks.items():
        s.stage()
        conn = s.connector
        if conn is not None and getattr(conn, "transactional", False):  # exactly once (the Redis sink)
            conn.stage(f"{rt.pe_id}/{name}", channel.lineage, channel.run)
            ck.transactional[name] = conn
    if n is not None:  # the restored checkpoint is complete: its epochs are committed (once) now
        for name, epochs in sorted(ck.recovered.items()):
            try:
                ck.transactional[name].recover(epochs)
            except ValueError as exc:
                raise CheckpointError(f"PE {rt.pe_id}: {exc}") from None
        for conn in ck.transactional.values():
            conn.commit(n)
        ck.recovered = {}
    channel.on_trigger = ck.on_trigger
    channel.on_complete = ck.complete
    sinks = list(rt.sinks.values())
    channel.start((lambda: sum(s.count for s in sinks)) if sinks else None)
    return ck


def new_token() -> str:
    return secrets.token_hex(16)
