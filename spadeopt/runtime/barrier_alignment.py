"""Consistent checkpoints inside a PE: barriers, alignment, snapshots, restore.

This module holds the alignment (``Checkpointer``) and the source positions
(``Tracked``); the state codec is ``runtime.checkpoint_codec``, the channel to the
driver's coordinator ``runtime.checkpoint_channel``.

The protocol is Flink's asynchronous barrier snapshots (Chandy-Lamport for FIFO
channels), with the PE as the unit
(docs/decisions/037-aligned-barrier-checkpoints-with-the-pe-as-unit.md):

* The driver's coordinator (``spadeopt.deploy.checkpoint_coordinator``) triggers
  checkpoint ``n`` in every PE that has sources. The PE's sources thread takes it at a turn boundary
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

State crosses to the driver and back as msgpack, never pickle
(``runtime.checkpoint_codec``); a restore checks the snapshot's shape against the PE
before changing anything.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

from spadeopt import wire
from spadeopt.runtime.checkpoint_codec import (
    CheckpointError,
    decode_state,
    encode_state,
    restore_ops,
    snapshot_ops,
)
from spadeopt.runtime.pe_ports import LinkError

SOURCES = "sources"  # the alignment channel of a PE's sources thread


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
        if skip > 0 and not self.resumable and callable(getattr(self.src, "skip", None)):
            skip -= self.src.skip(skip)  # records it can pass over unread (a splittable source's copy)
            if skip > 0:
                raise CheckpointError(f"PE {self.ck.pe}: source '{self.name}' ended {skip} record(s) before "
                                      f"the position its checkpoint recorded")
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

    def __init__(self, rt: Any, channel: Any) -> None:
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
        if self.release_due:  # an alignment the sources thread ended while this thread waited for
            self.release()  # a frame: the frames it held came first, so they reach the operators first
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
            ended = self.release_due  # the sources thread ended the alignment while this waited for the lock
        if ended:  # this frame came after the held ones: they reach the operators first
            self.release()
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
