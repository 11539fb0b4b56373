"""Per-point recorders: what a sampled submit, process call or thread records.

Every submit signal (operator output port, PE input port) and every non-main thread is
an instrumentation point (paper §3.1-3.2). A point's ``MetricRecorder`` takes the
samples its stride selects (``spadeopt.profiling.stride``) and keeps a uniform random
subset of at most ``S`` of their records (one reservoir per point; each record holds all
the point's metrics).

How the generated PE code uses a recorder. The hot path keeps, per point, an integer
countdown and handles it inline; it calls into the recorder only when a sample is due,
that is about once every ``1/s`` tuples::

    rec = prof.point(PointKey("B", "out0", "out"), subscribers=("C.in0", "D.in0"))
    cd = rec.countdown                      # once, at PE start
    ...
    cd -= len(batch)
    if cd > 0:
        submit(batch)
    else:                                   # sampled: three timers (paper Fig. 3)
        t0 = thread_time_ns()
        p0 = thread_time_ns(); C_in0(batch); p1 = thread_time_ns(); D_in0(batch)
        p2 = thread_time_ns()
        cd = rec.sample_submit(cd, batch, p2 - t0, (p1 - p0, p2 - p1))
    ...
    rec.close(cd)                           # once, at end of stream

Submits nested in a timing window are recorded by the window instead
(``spadeopt.profiling.window``); ports in a sample group take no samples of their own
(``spadeopt.profiling.groups``).

Invariants: a recorder is not thread-safe. A point whose submit can run in several
threads must be called under the lock that already guards the operator (codegen
inserts one wherever an operator is shared by threads); the countdown variable needs
the same lock. A reservoir's random choices depend on the run's seed and what it
samples, never on the PE (``point_rng``), so an operator samples the same tuples
whatever the fusion.

Cost: the sampled paths are kept flat (the stride's one-sample case and Algorithm R are
inlined, and only the records the reservoir keeps are sized and built); records are
numbers in one flat list per point, so thousands of them allocate nothing the cyclic
garbage collector tracks.
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Callable, Iterable, Sequence
from operator import mul
from typing import Any, Final, NamedTuple

from spadeopt.errors import UsageError
from spadeopt.profiling.groups import Group, group_part
from spadeopt.profiling.reservoir import Cumulative, Reservoir, Sample, check_reservoir_size
from spadeopt.profiling.sizing import msgpack_size, new_size_memo, packer_size
from spadeopt.profiling.stride import StrideSampler

DIRECTIONS: Final = ("in", "out", "thread")

_NS = 1e-9
_time = time.time


class PointKey(NamedTuple):
    """Identifies an instrumentation point within an app.

    ``dir`` is ``"out"`` (operator output port: its submit signal), ``"in"`` (PE input
    port, i.e. an exposed operator input port), or ``"thread"`` (a non-main thread of
    operator ``op``; ``port`` is then the thread's label chosen by codegen).
    """

    op: str
    port: str
    dir: str


def point_rng(seed: int, key: PointKey, sub: str | None, metric: str) -> random.Random:
    """A reservoir's own RNG, derived from the run seed and what it samples (not the PE).

    Not keyed by PE so that the same seed gives the same random choices for an operator's
    port whatever the fusion.
    """
    text = "\x1f".join((str(seed), key.op, key.port, key.dir, sub or "", metric))
    digest = hashlib.sha256(text.encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


class MetricRecorder:
    """Samples of one instrumentation point; the generated code calls one ``sample_*`` method.

    Metrics, each a list of timestamped ``(ts, value)`` samples:

    ``count``
        Cumulative tuples through the point at sample time. The exact first and last
        samples are kept besides the reservoir, for
        ``c = (count_last - count_first) / (ts_last - ts_first)``.
    ``size``
        Bytes of the sampled tuple (``sizeof``, msgpack length by default); one per
        sampled tuple.
    ``submit_cpu``
        ``out`` only: CPU seconds per tuple of the whole submit (all process calls).
    ``process_cpu``
        ``out``: one series per subscriber ``"op.port"`` listed at creation, CPU seconds
        per tuple of that subscriber's process call. ``in``: the PE input port's own
        process call (subscriber ``None``).
    ``thread_cpu``
        ``thread`` only: cumulative CPU seconds of the thread; first and last kept, for
        ``b = dCPU / dwall``. Not stride-sampled: codegen calls it at thread start, at
        the thread's sampled submits, and at thread end.
    ``total``
        Set by ``close``: all tuples through the point, at end of stream (one sample).
        Lets refinement estimate rates of ports that got fewer than two stride samples.

    **One reservoir per point.** Every sampled tuple gives one record
    ``(ts, count, size, call)`` holding all the point's metrics at once (``call`` is the
    sampled call's ``(batch length, submit ns, process ns per subscriber)``, shared by the
    tuples of one batch), and one reservoir of records keeps a uniform sample of them:
    one random draw per sampled tuple instead of one per metric. Each metric's kept
    samples are then a uniform sample of that metric's values, as with one reservoir per
    metric; only the choices are shared (the kept size, count and CPU samples come from
    the same tuples), which no estimate made from them depends on. ``count`` samples of
    tuples of the same batch are one sample (one per call, as before).

    CPU values are per tuple: the timed call's total divided by ``len(batch)``.
    """

    __slots__ = (
        "key",
        "subscribers",
        "_stride",
        "_sizeof",
        "_memo",
        "_nsub",
        "_size",
        "_rng",
        "_seen",
        "_width",
        "_flat",
        "_first",
        "_last",
        "_thread",
        "_total",
        "_own",
        "_ntimes",
        "_lead",
        "_slot",
        "_size_src",
        "_tail",
    )

    def __init__(
        self,
        key: PointKey,
        subscribers: tuple[str, ...],
        sample_rate: float,
        reservoir_size: int,
        seed: int,
        sizeof: Callable[[object], int],
        memo: list[Any] | None = None,
    ) -> None:
        self.key = key
        self.subscribers = subscribers
        self._stride = StrideSampler(sample_rate)
        self._sizeof = packer_size() if sizeof is msgpack_size else sizeof
        # What the points of a PE sized last, shared by their recorders (the size memo
        # of spadeopt.profiling.sizing): a chain that passes tuples on sizes them once.
        self._memo = memo if memo is not None else new_size_memo()
        # sample_submit takes one timing per subscriber, sample_process exactly one
        self._nsub = len(subscribers) if key.dir == "out" else -1
        # The point's reservoir of records, as one flat list: record i is
        # _flat[i*w : (i+1)*w] = [ts, count, size, batch length, submit ns, process ns
        # of each subscriber (one for an in point)]. Numbers only, so keeping thousands
        # of records allocates nothing the cyclic garbage collector tracks and scans.
        check_reservoir_size(reservoir_size)
        self._size = reservoir_size
        self._rng = point_rng(seed, key, None, "record").random
        self._seen = 0  # records offered to the reservoir
        self._width = 5 + (len(subscribers) if key.dir == "out" else 1)
        self._flat: list[float] = []
        self._first: Sample | None = None  # the exact first and last count samples
        self._last: Sample | None = None
        self._thread = Cumulative(
            Reservoir(reservoir_size, point_rng(seed, key, None, "thread_cpu"))
        )
        self._total: Sample | None = None
        # sample groups: a leader's records carry its group's part after its own _own
        # fields (``lead``); a follower keeps its leader, its first slot in the leader's
        # times, its size source and whether it is a tail call (``follow``)
        self._own = self._width
        self._ntimes = 0
        self._lead: MetricRecorder | None = None
        self._slot = 0
        self._size_src = -1
        self._tail = False

    def lead(self, times: int, outputs: int) -> None:
        """Make this ``out`` point the leader of a sample group whose followers leave
        ``times`` wall times and ``outputs`` output batches in a sampled submit (a
        ``Group``). Each of its records then carries, after its own fields, the group's
        part: ``r``, the end of its call, the times, the sizes of the new tuples at the
        sampled offset. Numbers only, in the same flat list: the cyclic garbage collector
        never sees a group (a tuple per record made every full collection of a long
        profiling run slower)."""
        if self.key.dir != "out" or self._flat or self._lead:
            self._misuse("lead")
        self._width = self._own + 2 + times + outputs
        self._ntimes = times

    def follow(self, leader: MetricRecorder, slot: int, size_src: int, tail: bool = False) -> None:
        """Make this ``out`` point a follower of ``leader`` (``spadeopt.profiling.groups``):
        its samples are the leader's records with, from each record's group part, the
        wall times at ``slot`` (its submit, then each call's if it has several
        subscribers) scaled by the entry's ``r``, and the size of the leader's sampled
        tuple (``size_src`` -1) or of the new tuple in output slot ``size_src``. A
        ``tail`` follower's slot holds its submit's start (``perf_counter_ns``): its one
        call is a tail call of the leader's, so its submit ends at the group's end."""
        if (self.key.dir != "out" or leader.key.dir != "out" or leader is self or leader._lead
                or leader._width == leader._own):
            self._misuse("follow", f" with leader {leader.key.op}.{leader.key.port}")
        if tail and self._nsub != 1:
            self._misuse("follow", f" as a tail call with {self._nsub} subscribers")
        self._lead, self._slot, self._size_src, self._tail = leader, slot, size_src, tail

    @property
    def countdown(self) -> int:
        """The countdown the generated code starts from (tuples until the first sample)."""
        return self._stride.countdown

    def _record(
        self,
        cd: int,
        batch: Sequence[Any],
        submit_ns: float,
        process_ns: Sequence[float],
        ts: float | None = None,
        group: Group | None = None,
        r: float = 1.0,
    ) -> int:
        """Advance the stride; offer one record per sampled tuple to the point's reservoir.

        Runs once per sampled call, so it is kept flat: the stride's one-sample case
        (``StrideSampler.advance`` with ``due == 1``) and Vitter's Algorithm R
        (``Reservoir.add``) are inlined here; their own tests pin the arithmetic, and
        tests/profiling/test_recorder.py checks this copy against them. ``ts`` is the
        sample's time (``time.time()`` if not given; a closing ``CpuWindow`` passes its own).
        ``group``: the followers' times and outputs in this call, kept beside each record
        (``lead``), their times to be scaled by ``r``.
        """
        stride = self._stride
        k = len(batch)
        seen = stride._seen_at_arm + stride.countdown - cd
        taken = stride.taken
        num = stride._num
        den = stride._den
        if seen * num // den - taken == 1:
            stride.seen = stride._seen_at_arm = seen
            stride.taken = taken + 1
            stride.countdown = -((-(taken + 2) * den) // num) - seen
            offsets: Sequence[int] = (-((-(taken + 1) * den) // num) - seen + k - 1,)
        else:
            offsets = stride.advance(cd, k)
        if offsets:
            if ts is None:
                ts = _time()
            count = (ts, seen)
            if self._first is None:
                self._first = count
            self._last = count
            # Algorithm R's draws first, in offset order: only the records the reservoir
            # keeps are sized and built (once it is full, most are not)
            size = self._size
            kept: list[tuple[int, int]] = []  # (offset, slot): -1 appended, j replaces record j
            for i in offsets:
                j = self._seen
                self._seen = j + 1
                if j < size:
                    kept.append((i, -1))
                elif (j := int(self._rng() * (j + 1))) < size:
                    kept.append((i, j))
            if not kept:
                return stride.countdown
            at = [i for i, _ in kept]
            memo = self._memo
            if (m := memo[1])[0] is batch and m[1] == at:  # see __init__
                sizes = m[2]
            else:
                sizeof = self._sizeof
                sizes = [sizeof(batch[i]) for i in at]
                memo[1] = (batch, at, sizes)
            flat = self._flat
            w = self._width
            for n, (i, j) in zip(sizes, kept, strict=True):
                rec = (ts, seen, n, k, submit_ns, *process_ns)
                if group is not None:
                    rec += group_part(group, i, r, self._sizeof)
                if j < 0:
                    flat.extend(rec)
                else:
                    flat[j * w : j * w + w] = rec
        return stride.countdown

    def sample_submit(
        self,
        cd: int,
        batch: Sequence[Any],
        submit_ns: float,
        process_ns: Sequence[float] = (),
        group: Group | None = None,
        r: float = 1.0,
    ) -> int:
        """Record a sampled submit on an ``out`` point; return the re-armed countdown.

        ``cd``: the countdown after subtracting ``len(batch)`` (``<= 0``). ``submit_ns``:
        thread CPU ns of the whole submit. ``process_ns``: thread CPU ns of each
        subscriber's process call, in the order of ``subscribers``. (Submits nested in a
        timing window do not call this: ``CpuWindow`` records them when it closes.)
        ``group``: the times and outputs the point's followers left in this submit
        (``spadeopt.profiling.groups``), their wall times to be scaled by ``r``.
        """
        if len(process_ns) != self._nsub:
            self._misuse("sample_submit", f" with {len(process_ns)} process timing(s)")
        # The common case, one sampled tuple in the batch (a full reservoir included: a
        # long run's samples come this way), is _record with everything else left out:
        # this runs for every point of every sampled batch.
        stride = self._stride
        seen = stride._seen_at_arm + stride.countdown - cd
        taken = stride.taken
        num = stride._num
        den = stride._den
        if seen * num // den - taken != 1:
            return self._record(cd, batch, submit_ns, process_ns, None, group, r)
        stride.seen = stride._seen_at_arm = seen
        stride.taken = taken + 1
        stride.countdown = cd = -((-(taken + 2) * den) // num) - seen
        self._keep_one(_time(), seen, batch, -((-(taken + 1) * den) // num) - seen + len(batch) - 1,
                       submit_ns, process_ns, group, r)
        return cd

    def _keep_one(self, ts: float, seen: int, batch: Sequence[Any], i: int, submit_ns: float,
                  process_ns: Sequence[float], group: Group | None, r: float) -> None:
        """Offer the record of the one sampled tuple ``batch[i]`` (the stride already
        advanced): the count samples, then Algorithm R's draw first, so a full reservoir
        sizes and builds nothing it does not keep. The one-sample paths
        (``sample_submit``, ``_record_nested``) share it; ``_record`` does the same for
        several offsets."""
        self._last = count = (ts, seen)
        if self._first is None:
            self._first = count
        j = self._seen
        self._seen = j + 1
        if j >= self._size:
            j = int(self._rng() * (j + 1))
            if j >= self._size:
                return
        else:
            j = -1
        t = batch[i]
        memo = self._memo
        if (m := memo[0])[0] is t:  # the tuple the last sample sized (see __init__)
            size = m[1]
        else:
            size = self._sizeof(t)
            memo[0] = (t, size)  # one store: safe when points of several threads share it
        vals = (ts, seen, size, len(batch), submit_ns, *process_ns)
        if group is not None:
            vals += group_part(group, i, r, self._sizeof)
        if j < 0:
            self._flat.extend(vals)
        else:
            w = self._width
            self._flat[j * w : j * w + w] = vals

    def sample_process(self, cd: int, batch: Sequence[Any], process_ns: int) -> int:
        """Record a sampled process call on an ``in`` point; return the re-armed countdown."""
        if self.key.dir != "in":
            self._misuse("sample_process")
        return self._record(cd, batch, 0, (process_ns,))

    def sample_thread(self, cpu_ns: int | None = None) -> None:
        """Record the calling thread's cumulative CPU time (``time.thread_time_ns()``)."""
        if self.key.dir != "thread":
            self._misuse("sample_thread")
        if cpu_ns is None:
            cpu_ns = time.thread_time_ns()
        self._thread.add((time.time(), cpu_ns * _NS))

    def close(self, cd: int) -> None:
        """End of stream on a port point: record ``total`` from the current countdown."""
        if self.key.dir == "thread":
            self._misuse("close")
        self._total = (time.time(), self._stride.total(cd))

    def close_as(self, leader: MetricRecorder) -> None:
        """End of stream on a follower (``spadeopt.profiling.groups``): it counted what its leader
        counted, so its exact first, last and total counts are the leader's. Call after
        the leader's ``close``."""
        if self.key.dir != "out":
            self._misuse("close_as")
        if leader._total is None:
            self._misuse("close_as", f" before its leader {leader.key.op}.{leader.key.port} closed")
        self._first, self._last, self._total = leader._first, leader._last, leader._total

    def _misuse(self, method: str, detail: str = "") -> None:
        k = self.key
        msg = (
            f"{method} called on point {k.op}.{k.port} (dir={k.dir!r}, "
            f"{len(self.subscribers)} subscriber(s)){detail}; out points take "
            f"sample_submit with one timing per subscriber, in points sample_process, "
            f"thread points sample_thread, and only port points close: a codegen bug"
        )
        raise UsageError(msg)

    def _follower_flat(self, live: bool = False) -> list[float]:
        """A follower's records, as its own ``_flat`` would hold them: its leader's time
        stamps, counts and batch lengths, with this follower's sizes and times (``live``:
        of a copy taken while the PE runs, as ``samples``)."""
        lead = self._lead
        assert lead is not None
        src = lead._flat
        w = lead._width
        if live:
            src = src[: len(src) - len(src) % w]
        elif len(src) % w:
            self._misuse("samples", f": leader {lead.key.op}.{lead.key.port} kept a record without its group")
        g = lead._own  # the group part: r, end, times..., sizes...
        q = g + 2 + self._slot
        sz = 2 if self._size_src < 0 else g + 2 + lead._ntimes + self._size_src
        calls = self._width - 5
        tail = self._tail
        out: list[float] = []
        for b in range(0, len(src), w):
            r = src[b + g]
            submit = ((src[b + g + 1] - src[b + q]) if tail else src[b + q]) * r
            out.extend((src[b], src[b + 1], src[b + sz], src[b + 3], submit))
            if calls == 1:
                out.append(submit)
            else:
                out.extend([src[b + q + 1 + c] * r for c in range(calls)])
        return out

    def samples(self, live: bool = False) -> list[tuple[str | None, str, Sample]]:
        """Kept samples as ``(subscriber, metric, (ts, value))``, in a stable order.
        ``live``: taken from another thread while the PE runs (``Profiler.dump``): the
        records are copied at once (one list slice, atomic under the GIL) and a record
        being appended is left out; one being replaced may mix two samples' fields."""
        out: list[tuple[str | None, str, Sample]] = []

        def put(sub: str | None, metric: str, samples: Iterable[Sample]) -> None:
            out.extend((sub, metric, s) for s in sorted(samples))

        if self.key.dir == "thread":
            put(None, "thread_cpu", self._thread.kept())
            return out
        w = self._width
        if self._lead is not None:
            flat = self._follower_flat(live)  # whole records only
        else:
            flat = self._flat[: len(self._flat) - len(self._flat) % w] if live else self._flat
        ts = flat[0::w]
        counts = set(zip(ts, flat[1::w], strict=True))
        counts.update(c for c in (self._first, self._last) if c is not None)
        put(None, "count", counts)
        put(None, "size", zip(ts, flat[2::w], strict=True))
        scale = [_NS / k for k in flat[3::w]]  # ns per batch -> CPU seconds per tuple
        if self.key.dir == "out":
            put(None, "submit_cpu", zip(ts, map(mul, flat[4::w], scale), strict=True))
            for q, sub in enumerate(self.subscribers):
                put(sub, "process_cpu", zip(ts, map(mul, flat[5 + q :: w], scale), strict=True))
        else:
            put(None, "process_cpu", zip(ts, map(mul, flat[5::w], scale), strict=True))
        if self._total is not None:
            put(None, "total", [self._total])
        return out
