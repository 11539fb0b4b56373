"""Runtime side of profiling: stride sampling, reservoirs, per-point recorders.

Paper §3.1-3.2 (digest 003 §3): every submit signal (operator output port, PE input
port) and every non-main thread is an instrumentation point. Metrics are collected
only for every ``1/s``-th tuple (stride sampling) and each point keeps a uniform random
subset of at most ``S`` sampled tuples' records, each holding all the point's metrics
(reservoir sampling: one reservoir per point, issue 14).

How the generated PE code uses this module. The hot path keeps, per point, an integer
countdown and handles it inline; it calls into this module only when a sample is due,
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

A recorder is not thread-safe. A point whose submit can run in several threads must be
called under the lock that already guards the operator (codegen inserts one wherever
an operator is shared by threads); the countdown variable needs the same lock.

**Timing windows** (issue 14, rounds 3-4). A thread CPU clock read is a system call
(about 0.7-1 us on the machines measured, against 0.06 us for ``perf_counter_ns``), and
a chain of operators that all sample the same batch used to pay two of them per point.
Where no call below a submit can block (``CpuWindow``), the outermost sampled submit of
a thread opens a window: it alone reads the thread CPU clock, around itself; sampled
submits nested inside it read only the wall clock and append their sample to the
window's log, and the window records them all when it closes, with their times scaled
by its own ``CPU / wall``. See ``CpuWindow`` for why this is unbiased.

**Sample groups** (issue 14, round 8; paper 004's static rates applied to profiling).
A functor without a filter emits exactly one tuple per input tuple, in the same call, so
its output port counts exactly what the port feeding it counts: its stride countdown
would always equal that port's. Codegen (``codegen.spec.assign_followers``) gives such a
*follower* no countdown at all; the group's *leader* (the first port up the chain that
is not one) counts for the whole group, and when it samples a batch it calls the
followers' sampled variants, which time their submit by wall clock into fixed slots of
the leader's times list and, if they make new tuples, leave their output batch in a slot
of its outputs list (a ``Group``). Each of the leader's records carries, after its own
fields, the window's ``r``, the end of its call, the group's times and the sizes of the
new tuples at its sampled offset (``MetricRecorder.lead``); a follower's samples are
rebuilt from its leader's records when the profile is written (``MetricRecorder.follow``):
the same tuples a countdown of the follower's own would have sampled, with the
follower's own sizes and times, one reservoir decision for the group, and per follower
only one or two clock reads and a store on the hot path. A follower whose one call is a
tail call of the leader's reads the clock once, where its submit starts: its submit ends
where the leader's call does (issue 14, round 10: a tuple per follower, appended and
copied into its own reservoir at every sample, had cost ~0.2 us each).
"""

from __future__ import annotations

import hashlib
import math
import os
import random
import time
from collections.abc import Callable, Iterable, Sequence
from fractions import Fraction
from operator import mul
from pathlib import Path
from typing import Any, Final, NamedTuple

from spadeopt.errors import ProfileError, UsageError
from spadeopt.profiling.records import SampleRecord, pe_file, write_pe_samples
from spadeopt.runtime.transport import pack as wire_pack
from spadeopt.runtime.transport import packer as wire_packer

DEFAULT_SAMPLE_RATE: Final = 0.001
DEFAULT_RESERVOIR_SIZE: Final = 5000

DIRECTIONS: Final = ("in", "out", "thread")

Sample = tuple[float, float]
"""A timestamped sample: (wall-clock seconds from ``time.time()``, value)."""


def _fraction_of(s: object) -> Fraction:
    """Validate a sampling fraction and return it as an exact fraction of its decimal form."""
    if isinstance(s, bool) or not isinstance(s, int | float | Fraction):
        msg = f"sampling fraction s must be a number in (0, 1]; got {s!r}"
        raise UsageError(msg)
    if isinstance(s, float) and not math.isfinite(s):
        msg = f"sampling fraction s must be a number in (0, 1]; got {s!r}"
        raise UsageError(msg)
    # repr() of a float is the shortest decimal that reads back as the same float, so
    # s=0.001 becomes exactly 1/1000 rather than the binary approximation.
    frac = Fraction(repr(float(s))) if isinstance(s, float) else Fraction(s)
    if not 0 < frac <= 1:
        msg = (
            f"sampling fraction s must be in (0, 1] (1 = every tuple, 0.001 = one in "
            f"1000); got {s!r}"
        )
        raise UsageError(msg)
    return frac


def stride_of(s: float) -> int:
    """Return the nominal stride ``1/s`` rounded half up: one sample every that many tuples.

    Raises ``UsageError`` unless ``0 < s <= 1``.

    >>> stride_of(0.001), stride_of(1), stride_of(0.3)
    (1000, 1, 3)
    """
    frac = _fraction_of(s)
    return math.floor(1 / frac + Fraction(1, 2))


class StrideSampler:
    """Count-based stride sampling over batches: exactly ``floor(n*s)`` samples of n tuples.

    The j-th sample (j = 1, 2, ...) is taken at the tuple with 1-based cumulative index
    ``ceil(j/s)``, ``s`` read as the exact decimal it was written as. So after n tuples
    ``floor(n*s)`` samples have been taken, however the tuples were batched. When
    ``1/s`` is an integer this is exactly one sample every ``stride_of(s)`` tuples;
    otherwise the gaps alternate between ``floor(1/s)`` and ``ceil(1/s)`` so that the
    long-run fraction is ``s`` itself (rounding the stride would give ``1/stride_of(s)``).

    A batch of k tuples yields one sample per boundary crossed, usually 0 or 1, but
    several when ``k > 1/s``. ``advance`` returns the offsets inside the batch of the
    sampled tuples. Per-tuple quantities that can only be measured per batch (CPU time)
    are recorded as ``batch total / k`` once per sampled tuple, so every tuple has the
    same chance of being represented, and a reservoir mean estimates the mean over tuples
    (total CPU / total tuples), which is what the refinement's ``c * t`` needs.

    The countdown protocol: ``countdown`` is what the generated code decrements by
    ``len(batch)``; when the result is ``<= 0`` it calls ``advance(cd, len(batch))``,
    which re-arms ``countdown``. ``offer(k)`` does both, for tests and pure-Python callers.
    """

    __slots__ = ("_num", "_den", "seen", "taken", "countdown", "_seen_at_arm", "_cd")

    def __init__(self, s: float) -> None:
        frac = _fraction_of(s)
        self._num = frac.numerator
        self._den = frac.denominator
        self.seen = 0
        """Tuples accounted for so far (exact at each ``advance``)."""
        self.taken = 0
        """Samples taken so far."""
        self._seen_at_arm = 0
        self.countdown = self._boundary(1)
        """Tuples left until the next sample, as last armed."""
        self._cd = self.countdown  # the running countdown of ``offer``

    def _boundary(self, j: int) -> int:
        """1-based cumulative index of the tuple taken as the j-th sample: ceil(j/s)."""
        return -((-j * self._den) // self._num)

    def total(self, cd: int) -> int:
        """Tuples seen in all, given the generated code's current countdown ``cd``."""
        return self._seen_at_arm + self.countdown - cd

    def advance(self, cd: int, k: int) -> range | list[int]:
        """Account for tuples up to ``cd``; return the in-batch offsets of the sampled tuples.

        ``cd`` is the countdown after the generated code subtracted the last batch's
        length ``k``. Returns an empty range if no boundary was crossed (``cd > 0``).
        """
        seen = self._seen_at_arm + self.countdown - cd
        num = self._num
        den = self._den
        taken = self.taken
        due = seen * num // den - taken
        self.seen = self._seen_at_arm = seen
        if due == 1:  # the common case, with _boundary inlined (it runs once per sample)
            self.taken = taken + 1
            self.countdown = -((-(taken + 2) * den) // num) - seen
            return [-((-(taken + 1) * den) // num) - seen + k - 1]
        first = taken + 1
        self.taken = taken = taken + max(due, 0)
        self.countdown = self._boundary(taken + 1) - seen
        if due <= 0:
            return range(0)
        start = seen - k  # cumulative index of the tuple before the batch
        # _boundary(j) - start - 1, inlined: this runs once per sample at high rates
        return [-((-j * den) // num) - start - 1 for j in range(first, first + due)]

    def offer(self, k: int) -> range | list[int]:
        """Reference path: take a batch of ``k`` tuples, return the sampled offsets."""
        self._cd -= k
        if self._cd > 0:
            self.seen += k
            return range(0)
        offsets = self.advance(self._cd, k)
        self._cd = self.countdown
        return offsets


def _check_size(size: object) -> None:
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        msg = f"reservoir size S must be an integer >= 1; got {size!r}"
        raise UsageError(msg)


class Reservoir:
    """Reservoir sampling, Vitter's Algorithm R: a uniform sample of at most ``size`` values.

    The i-th value offered (0-based) is kept with probability ``S/(i+1)``, replacing a
    uniformly chosen slot. This deviates from the paper's printed ``S/i``, which is an
    off-by-one for 0-based ``i`` (the value at i = S would always enter, and the first S
    values end up under-represented); with ``S/(i+1)`` every value offered so far is in
    the reservoir with probability exactly ``min(1, S/seen)``.

    >>> r = Reservoir(2, random.Random(0))
    >>> for v in "abc":
    ...     r.add(v)
    >>> len(r.values), r.seen
    (2, 3)
    """

    __slots__ = ("size", "values", "seen", "_rng")

    def __init__(self, size: int, rng: random.Random) -> None:
        _check_size(size)
        self.size = size
        self.values: list[Any] = []
        self.seen = 0
        self._rng = rng

    def add(self, value: Any) -> None:
        """Offer one value."""
        i = self.seen
        self.seen = i + 1
        if i < self.size:
            self.values.append(value)
            return
        # int(random() * n) instead of randrange(n): 5x cheaper, and its bias (below
        # 2**-53 * n) is far under anything the chi-square test or refinement can see.
        j = int(self._rng.random() * (i + 1))
        if j < self.size:
            self.values[j] = value


class _Cumulative:
    """Samples of a cumulative quantity: a reservoir plus the exact first and last sample."""

    __slots__ = ("reservoir", "first", "last")

    def __init__(self, reservoir: Reservoir) -> None:
        self.reservoir = reservoir
        self.first: Sample | None = None
        self.last: Sample | None = None

    def add(self, sample: Sample) -> None:
        if self.first is None:
            self.first = sample
        self.last = sample
        self.reservoir.add(sample)

    def kept(self) -> list[Sample]:
        """Reservoir contents plus first and last, each sample once."""
        out = list(self.reservoir.values)
        ids = {id(s) for s in out}
        for s in (self.first, self.last):
            if s is not None and id(s) not in ids:
                ids.add(id(s))
                out.append(s)
        return out


class PointKey(NamedTuple):
    """Identifies an instrumentation point within an app.

    ``dir`` is ``"out"`` (operator output port: its submit signal), ``"in"`` (PE input
    port, i.e. an exposed operator input port), or ``"thread"`` (a non-main thread of
    operator ``op``; ``port`` is then the thread's label chosen by codegen).
    """

    op: str
    port: str
    dir: str


def msgpack_size(tup: object) -> int:
    """Bytes of one tuple as the wire encodes it (msgpack, big ints as an extension): the
    default tuple-size estimator."""
    try:
        return len(wire_pack(tup))
    except (TypeError, ValueError, OverflowError) as e:
        msg = (
            f"cannot measure the size of a tuple of type {type(tup).__name__} with msgpack "
            f"({e}); tuples must be msgpack-encodable, or pass sizeof= to Profiler"
        )
        raise ProfileError(msg) from e


def _rng_for(seed: int, key: PointKey, sub: str | None, metric: str) -> random.Random:
    """A reservoir's own RNG, derived from the run seed and what it samples (not the PE).

    Not keyed by PE so that the same seed gives the same random choices for an operator's
    port whatever the fusion.
    """
    text = "\x1f".join((str(seed), key.op, key.port, key.dir, sub or "", metric))
    digest = hashlib.sha256(text.encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


_NS = 1e-9
_time = time.time
_NOTHING = object()


def _new_memo() -> list[Any]:
    """The size memo of one PE's recorders (see ``MetricRecorder.__init__``)."""
    return [(_NOTHING, 0), (_NOTHING, (), [])]


def packer_size() -> Callable[[object], int]:
    """A ``msgpack_size`` with its own ``msgpack.Packer`` (4x cheaper than ``packb``).

    One per recorder: a Packer holds a buffer and is not thread-safe, and a recorder is
    only ever used by one thread at a time.
    """
    pack = wire_packer().pack

    def size(tup: object) -> int:
        try:
            return len(pack(tup))
        except (TypeError, ValueError, OverflowError):
            return msgpack_size(tup)  # raises the ProfileError naming the type

    return size


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

    **One reservoir per point** (issue 14). Every sampled tuple gives one record
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
        # What the points of a PE sized last, shared by their recorders: operators that
        # pass tuples (or whole batches) on unchanged have every point of a chain sample
        # the same tuples in one pass. [0]: (tuple, size) of a one-sample call; [1]:
        # (batch, offsets, sizes) of a call with several. Each item is replaced in one
        # store, so points of several threads may share it.
        self._memo = memo if memo is not None else _new_memo()
        # sample_submit takes one timing per subscriber, sample_process exactly one
        self._nsub = len(subscribers) if key.dir == "out" else -1
        # The point's reservoir of records, as one flat list: record i is
        # _flat[i*w : (i+1)*w] = [ts, count, size, batch length, submit ns, process ns
        # of each subscriber (one for an in point)]. Numbers only, so keeping thousands
        # of records allocates nothing the cyclic garbage collector tracks and scans.
        _check_size(reservoir_size)
        self._size = reservoir_size
        self._rng = _rng_for(seed, key, None, "record").random
        self._seen = 0  # records offered to the reservoir
        self._width = 5 + (len(subscribers) if key.dir == "out" else 1)
        self._flat: list[float] = []
        self._first: Sample | None = None  # the exact first and last count samples
        self._last: Sample | None = None
        self._thread = _Cumulative(
            Reservoir(reservoir_size, _rng_for(seed, key, None, "thread_cpu"))
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
        never sees a group (issue 14, round 10: a tuple per record made every full
        collection of a long profiling run slower)."""
        if self.key.dir != "out" or self._flat or self._lead:
            self._misuse("lead")
        self._width = self._own + 2 + times + outputs
        self._ntimes = times

    def follow(self, leader: MetricRecorder, slot: int, size_src: int, tail: bool = False) -> None:
        """Make this ``out`` point a follower of ``leader`` (module docstring, sample
        groups): its samples are the leader's records with, from each record's group
        part, the wall times at ``slot`` (its submit, then each call's if it has several
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
                    rec += _group_part(group, i, r, self._sizeof)
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
        (module docstring), their wall times to be scaled by ``r``.
        """
        if len(process_ns) != self._nsub:
            self._misuse("sample_submit", f" with {len(process_ns)} process timing(s)")
        # The common case, one sampled tuple in the batch (a full reservoir included: a
        # long run's samples come this way), is _record with everything else left out:
        # this runs for every point of every sampled batch (issue 14, round 3).
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
        sizes and builds nothing it does not keep (issue 14). The one-sample paths
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
            vals += _group_part(group, i, r, self._sizeof)
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
        """End of stream on a follower (module docstring): it counted what its leader
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

    def _follower_flat(self) -> list[float]:
        """A follower's records, as its own ``_flat`` would hold them: its leader's time
        stamps, counts and batch lengths, with this follower's sizes and times."""
        lead = self._lead
        assert lead is not None
        src = lead._flat
        w = lead._width
        if len(src) % w:
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

    def samples(self) -> list[tuple[str | None, str, Sample]]:
        """Kept samples as ``(subscriber, metric, (ts, value))``, in a stable order."""
        out: list[tuple[str | None, str, Sample]] = []

        def put(sub: str | None, metric: str, samples: Iterable[Sample]) -> None:
            out.extend((sub, metric, s) for s in sorted(samples))

        if self.key.dir == "thread":
            put(None, "thread_cpu", self._thread.kept())
            return out
        w = self._width
        flat = self._flat if self._lead is None else self._follower_flat()
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


Group = tuple[Sequence[float], Sequence[Sequence[Any]], float]
"""What a leader's followers left in one sampled submit: their wall ns by slot (each
follower's submit, then each call's if it has several; a tail call's start time), the
output batches of those that make new tuples, and the ``perf_counter_ns`` at which the
leader's call ended (``MetricRecorder.follow``)."""

def _group_part(group: Group, i: int, r: float, sizeof: Callable[[object], int]) -> tuple[float, ...]:
    """The group's part of a leader's record of the tuple at offset ``i`` (``MetricRecorder.lead``):
    ``r``, the end of the call, the followers' times, the sizes of their new tuples at ``i``."""
    times, outs, end = group
    return (r, end, *times, *[sizeof(out[i]) for out in outs]) if outs else (r, end, *times)




def window_stride(s: float) -> int:
    """The stride ``1/s`` if it is a whole number (every usual ``s``), else 0.

    Timing windows re-arm nested countdowns inline as ``cd % N or N`` (one sample every
    ``N`` tuples), which is exact only for a whole stride; with any other ``s`` codegen's
    windows stay closed and every sampled submit records itself (``CpuWindow``).

    >>> window_stride(0.001), window_stride(1), window_stride(0.3)
    (1000, 1, 0)
    """
    frac = _fraction_of(s)
    return frac.denominator if frac.numerator == 1 else 0


class CpuWindow:
    """One thread's timing window: nested samples logged by wall clock, recorded at close.

    Protocol (generated code; issue 14, rounds 3, 4 and 8). A sampled submit that finds
    its thread's window closed is the outermost: it opens the window (if ``stride``),
    reads the thread CPU clock and the wall clock around its calls, and ends with
    ``close_submit``, which closes the window with ``r = min(1, C/W)`` (scaling the wall
    times it split its own submit into) and records it after the nested samples. A sampled submit that
    finds the window open (it runs inside that submit, in the same thread) reads only
    the wall clock and appends ``(recorder, cd, batch, submit_ns, process_ns, group)``
    to ``log`` (``process_ns`` ``None`` when the submit is one call, whose time is the
    submit's; ``group`` a copy of its followers' ``Group`` or ``None``),
    re-arming its countdown inline as ``cd % stride or stride``. That is all it
    does: a nested sample costs two clock reads, a tuple and an append. ``close``
    records every logged sample, in order, with the window's time stamp and its times
    multiplied by ``r``, through the same stride and reservoir steps as
    ``MetricRecorder.sample_submit``.

    Why scaling is unbiased. In a window of thread CPU ``C`` and wall time ``W``, the
    thread was off the CPU for ``D = W - C`` (preempted by other processes, or waiting
    for the GIL). A timed interval of CPU ``c`` inside the window reads ``c + d``, where
    ``d`` is the part of ``D`` that fell inside it. Preemption points fall at random in
    the thread's CPU time, so ``E[d] = D * c / C``, and ``E[(c + d) * C / W] = c``:
    scaling by ``r = C / W`` removes the off-CPU time on average, per window, exactly
    where it happened (a ratio per PE or per point does not: blocking comes in bursts).
    This holds only if nothing inside the window blocks: a blocking call would
    concentrate ``D`` in the interval around it. So codegen opens windows only at
    submits under which every call stays in the PE's own thread and cannot block
    (``codegen.spec``: no send to another PE, no lock, no custom or fission operator);
    every other submit keeps thread CPU timers of its own. ``r`` is capped at 1: without
    preemption the CPU clock, read outside the wall clock, sees slightly more.

    Only one thread ever uses a window: codegen gives each thread of a PE its own, and
    only operators reached by exactly one thread use one. ``stride`` is the profiler's
    whole stride (``window_stride``); 0 keeps the window closed for good.
    """

    __slots__ = ("open", "stride", "log")

    def __init__(self, stride: int) -> None:
        self.open = False
        self.stride = stride
        self.log: list[tuple[MetricRecorder, int, Sequence[Any], float, tuple[float, ...] | None,
                             Group | None]] = []
        """Nested samples of the open window, in the order they were taken."""

    def close(self, cpu_ns: int, wall_ns: int) -> float:
        """Close the window; record its nested samples with times scaled by ``r = min(1, C/W)``."""
        r = cpu_ns / wall_ns if wall_ns > cpu_ns else 1.0
        self._record_log(r)
        return r

    def _record_log(self, r: float) -> None:
        """Close the window and record its log, times scaled by ``r``."""
        self.open = False
        log = self.log
        if not log:
            return
        ts = _time()
        n = self.stride
        scale = r.__mul__
        for rec, cd, batch, submit_ns, process_ns, group in log:
            submit_ns *= r
            _record_nested(rec, cd, batch, submit_ns,
                           (submit_ns,) if process_ns is None else [*map(scale, process_ns)], group, ts, n, r)
        log.clear()

    def close_submit(self, cpu_ns: int, wall_ns: int, rec: MetricRecorder, cd: int,
                     batch: Sequence[Any], calls_ns: tuple[float, ...] | None = None,
                     group: Group | None = None) -> int:
        """Close the window opened by the outermost sampled submit and record that submit
        too; return its re-armed countdown.

        ``cpu_ns``/``wall_ns``: the thread CPU and wall ns of the whole submit;
        ``calls_ns``: the wall ns of each process call, or ``None`` when the submit is
        one call (whose time is the submit's); ``group``: its followers' ``Group``. With a
        whole stride it is recorded after the nested samples: through the log (its CPU
        time divided by ``r``, so the loop's scaling gives it back) if there are any,
        else directly (``_record_nested``). Without one the log is empty and
        ``sample_submit`` records it.
        """
        r = cpu_ns / wall_ns if wall_ns > cpu_ns else 1.0
        n = self.stride
        if not n or not r:  # (r = 0: a thread clock too coarse to see the submit)
            self._record_log(r)
            calls = (cpu_ns,) if calls_ns is None else [p * r for p in calls_ns]
            return rec.sample_submit(cd, batch, cpu_ns, calls, group, r)
        if self.log:  # nested samples first, in the order they were taken, then this one
            self.log.append((rec, cd, batch, cpu_ns / r, calls_ns, group))
            self._record_log(r)
            return rec._stride.countdown
        self.open = False
        _record_nested(rec, cd, batch, cpu_ns, (cpu_ns,) if calls_ns is None else [p * r for p in calls_ns],
                       group, _time(), n, r)
        return rec._stride.countdown


def _record_nested(rec: MetricRecorder, cd: int, batch: Sequence[Any], submit_ns: float,
                   process_ns: Sequence[float], group: Group | None, ts: float, n: int,
                   r: float) -> None:
    """Record one sample of a closing ``CpuWindow`` (whole stride ``n``), its times already
    scaled to CPU; ``group``'s are kept beside it, to be scaled by ``r``.

    ``MetricRecorder._record``'s one-sampled-tuple case for num = 1, den = n: the stride
    step inlined, the record offered by ``MetricRecorder._keep_one`` (as
    ``sample_submit`` does); it runs once per sample of every window. Anything else goes
    through ``MetricRecorder._record``.
    """
    stride = rec._stride
    seen = stride._seen_at_arm + stride.countdown - cd
    taken = stride.taken
    if seen // n - taken != 1:
        rec._record(cd, batch, submit_ns, process_ns, ts, group, r)
        return
    stride.seen = stride._seen_at_arm = seen
    stride.taken = taken + 1
    stride.countdown = (taken + 2) * n - seen
    rec._keep_one(ts, seen, batch, len(batch) - 1 + cd, submit_ns, process_ns, group, r)


def _check_name(what: str, value: object) -> None:
    if not isinstance(value, str) or not value:
        msg = f"{what} must be a non-empty string; got {value!r}"
        raise UsageError(msg)


class Profiler:
    """The registry of one PE's instrumentation points.

    ``seed`` is the run's recorded seed; each reservoir gets its own ``random.Random``
    derived from ``(seed, point key, subscriber, metric)``, so a run is reproducible and
    an operator's reservoirs make the same choices whichever PE it is fused into.
    """

    def __init__(
        self,
        pe: str,
        *,
        sample_rate: float = DEFAULT_SAMPLE_RATE,
        reservoir_size: int = DEFAULT_RESERVOIR_SIZE,
        seed: int = 0,
        sizeof: Callable[[object], int] = msgpack_size,
    ) -> None:
        pe_file(pe)  # validates the id: it names the PE's sample file
        _fraction_of(sample_rate)
        _check_size(reservoir_size)
        if isinstance(seed, bool) or not isinstance(seed, int):
            msg = f"profiling seed must be an integer; got {seed!r}"
            raise UsageError(msg)
        self.pe = pe
        self.sample_rate = sample_rate
        self.reservoir_size = reservoir_size
        self.seed = seed
        self._sizeof = sizeof
        self._memo = _new_memo()  # shared by the points' recorders
        self._points: dict[PointKey, MetricRecorder] = {}

    def point(self, key: PointKey, subscribers: Sequence[str] = ()) -> MetricRecorder:
        """Return the recorder of ``key``, creating it on first use.

        ``subscribers`` (``out`` points only) are the ``"op.port"`` names of the in-PE
        input ports whose process calls the submit times, in the order in which
        ``sample_submit`` receives their timings. Asking again for the same key with
        other subscribers is a ``UsageError``.
        """
        key = PointKey(*key)
        _check_name("operator id", key.op)
        _check_name("port name", key.port)
        if key.dir not in DIRECTIONS:
            msg = f"point {key.op}.{key.port}: dir must be one of {DIRECTIONS}; got {key.dir!r}"
            raise UsageError(msg)
        subs = tuple(subscribers)
        if subs and key.dir != "out":
            msg = f"point {key.op}.{key.port}: only 'out' points have subscribers; got {subs}"
            raise UsageError(msg)
        for sub in subs:
            if not isinstance(sub, str) or sub.count(".") < 1 or sub.startswith("."):
                msg = f"point {key.op}.{key.port}: subscriber must be 'op.port'; got {sub!r}"
                raise UsageError(msg)
        if len(set(subs)) != len(subs):
            msg = f"point {key.op}.{key.port}: duplicate subscribers in {subs}"
            raise UsageError(msg)
        rec = self._points.get(key)
        if rec is None:
            rec = MetricRecorder(
                key, subs, self.sample_rate, self.reservoir_size, self.seed, self._sizeof,
                self._memo,
            )
            self._points[key] = rec
        elif rec.subscribers != subs:
            msg = (
                f"point {key.op}.{key.port} ({key.dir}) already exists with subscribers "
                f"{rec.subscribers}; got {subs}"
            )
            raise UsageError(msg)
        return rec

    def dump(self) -> list[SampleRecord]:
        """All kept samples of this PE, one record each, sorted by point, metric and time."""
        out: list[SampleRecord] = []
        for key in sorted(self._points):
            rec = self._points[key]
            for sub, metric, (ts, value) in rec.samples():
                out.append(SampleRecord(self.pe, key.op, key.port, key.dir, sub, metric, ts, value))
        return out

    def write(self, run_dir: str | os.PathLike[str]) -> Path:
        """Write ``dump()`` to ``RUN_DIR/raw/<pe>.jsonl`` (atomically); return the path."""
        return write_pe_samples(run_dir, self.pe, self.dump())
