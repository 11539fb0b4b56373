"""A PE's sources thread: driving its sources in turn, batching live sources, lag.

``SourceDriving`` is a mixin of ``runtime.pe.PERuntime`` (the state it reads is made
in ``PERuntime.__init__``): ``drive_sources`` runs every source of the PE one batch per
turn, ``source_batches`` reads one source through the connector contract and counts
it, ``_live_batches`` holds a live source's records up to ``max_batch_delay``.
"""

from __future__ import annotations

import itertools
import sys
import time
from collections import deque
from collections.abc import Iterable, Iterator

from spadeopt.connectors.contract import LimitedSource, Source, as_source
from spadeopt.runtime.latency import MARK_EVERY
from spadeopt.runtime.merges import read_splits as fission_read_splits

IDLE_SLEEP = 0.001  # s: drive_sources' first back-off when every source of the PE was idle for a round
IDLE_SLEEP_MAX = 0.01  # s: the longest back-off (doubling from IDLE_SLEEP), never above max_batch_delay
LAG_EVERY = 1.0  # s between two lag() calls of a live source (made in the sources thread)
THREAD_CPU_EVERY = 0.1  # s: a source's thread CPU is sampled this often (runtime.pe_samples' snapshots use it)


def check_shape(what: str, batch: list, arity: int) -> None:
    """A user-made batch (a source's, a custom operator's) holds tuples of ``arity``
    attributes: its first and last are checked (two ``len`` calls a batch). Generated
    operators read attributes by position and a collapsed loop unpacks each tuple, so a
    wrong shape must fail where it is made, naming its maker, not later or silently."""
    for t in (batch[0], batch[-1]):
        if type(t) is not tuple or len(t) != arity:
            shape = f"a {len(t)}-tuple" if type(t) is tuple else f"a {type(t).__name__}"
            raise ValueError(f"{what} made {shape} ({t!r:.80}) where its schema has {arity} attributes: "
                             f"yield/submit one tuple per record, one value per attribute in schema order")



class SourceDriving:
    """The sources thread of a ``PERuntime`` (see the module doc)."""

    def drive_sources(self) -> None:
        """Run every source of this PE in the calling thread until all have ended: one
        batch of one source per turn, the sources in turn (round-robin, by name), so no
        source starves and merges downstream see their inputs advance together.

        A live source with nothing to read ends its turn at once (``source_batches``);
        when a whole round found every source idle, the thread sleeps ``IDLE_SLEEP`` (a
        millisecond), doubling while the rounds stay idle up to ``IDLE_SLEEP_MAX`` or the
        run's ``max_batch_delay`` if shorter: the latency an idle live source may add is
        what a partial batch may wait anyway, and an idle PE wakes 200 times a second at
        the default 5 ms instead of 1,000 (each wake-up asks the broker).
        A source must not block (as in Bytewax, whose sources share a worker the same
        way): a source waiting on the outside world holds up the others of its PE; fuse
        such a source into a PE of its own. With a profiler and several sources, each
        source's thread CPU point counts the CPU of its own turns (``_source_cpu_ns``).
        """
        turns = deque((name, fn()) for name, fn in sorted(self.sources.items()))
        timed = self.profiler is not None and len(turns) > 1
        if timed:
            self._turn_cpu = dict.fromkeys(self.sources, 0)
            self._turn_start = time.thread_time_ns()
        left = len(turns)  # turns until the round ends
        idle_before = self._idle_turns
        longest = max(IDLE_SLEEP, min(IDLE_SLEEP_MAX, self.max_batch_delay))
        nap = IDLE_SLEEP
        while turns and not self.stop:
            if left <= 0:  # a round is over: when every source was idle (live, nothing new), back off
                if self._idle_turns - idle_before >= len(turns):
                    time.sleep(nap)
                    self.idle_s += nap  # waiting for a live feed (live metrics)
                    nap = min(2 * nap, longest)
                else:
                    nap = IDLE_SLEEP
                left, idle_before = len(turns), self._idle_turns
            left -= 1
            if self.checkpoints is not None and self.checkpoints.due:  # every source is between batches
                self.checkpoints.source_barrier()
            name, steps = turns.popleft()
            self._turn = name
            try:
                next(steps)
            except StopIteration:
                continue
            finally:
                if timed:
                    now = time.thread_time_ns()
                    self._turn_cpu[name] += now - self._turn_start
                    self._turn_start = now
            turns.append((name, steps))
        self._turn = None
        self.sources_cpu_s = time.thread_time()  # this thread's CPU: the sources and everything fused behind them

    def _source_cpu_ns(self, name: str) -> int:
        """Thread CPU ns of source ``name`` so far: its thread's, or with several sources
        sharing the thread (``drive_sources``), that of its own turns."""
        now = time.thread_time_ns()
        if self._turn_cpu is None:
            return now
        return self._turn_cpu[name] + (now - self._turn_start if self._turn == name else 0)

    def read_splits(self, name: str, splits: Iterable, part: int, parts: int, size: int, stamp: bool) -> Iterator[tuple]:
        """The records of splittable source ``name``'s copy (``runtime.merges.read_splits``).
        With a source limit (``--verify-fission N``) the copy reads only the splits that
        begin among the stream's first N records, so every width reads the same records."""
        self._split_sources.add(name)
        if self.source_limit is not None:
            first = -(-self.source_limit // size)  # the splits 0 .. first-1 begin before record N
            splits = itertools.islice(splits, max(0, -(-(first - part) // parts)))
        return fission_read_splits(name, splits, part, parts, size, stamp)

    def source_batches(self, name: str, iterable: Iterable, arity: int | None = None) -> Iterable[list]:
        """Read a source in batches through the connector contract
        (``spadeopt.connectors.contract``), counting them for throughput: a source connector
        as it is, any other iterable as an ``IterableSource`` (a list or tuple cut by
        slicing, anything else through ``islice``, ~11 ns a tuple on the development VM).
        A live source's records are passed on when ``batch_size`` have come or the
        oldest has waited ``max_batch_delay`` (``_live_batches``); an idle turn is
        yielded as an empty batch, which the generated code skips: its turn ends, and
        ``drive_sources`` backs off when every source of the PE was idle. With
        ``arity``, each batch's first and last tuple are checked against it
        (``check_shape``). The source is closed however the loop ends."""
        stats = self.source_stats[name] = [0, None, None, []]  # count, first, last, timeline
        timeline = stats[3]
        next_mark = next_marker = 0.0
        size = self.batch_size
        src = as_source(iterable)
        if self.source_limit is not None and name not in self._split_sources:
            src = LimitedSource(src, self.source_limit)  # a live source is refused before the run
        if self.checkpoints is not None:  # positions recorded, rewound on restore
            src = self.checkpoints.track(name, src)
        self.connectors[name] = src
        thread_point = self.point(name, "thread", "thread") if self.profiler else None
        if thread_point:
            thread_point.sample_thread(self._source_cpu_ns(name))
        next_cpu = 0.0
        try:
            src.open()
            for batch in (self._live_batches(name, src, size) if src.live else self._batches(src, size)):
                if not batch:
                    if thread_point and time.time() >= next_cpu:  # an idle live source's turns cost CPU too
                        thread_point.sample_thread(self._source_cpu_ns(name))
                        next_cpu = time.time() + THREAD_CPU_EVERY
                    yield batch
                    continue
                if arity is not None:
                    check_shape(f"source '{name}'", batch, arity)
                if stats[1] is None:
                    stats[1] = time.time()
                n_batch = len(batch)  # counted as given: the consumer may append a fission pulse
                if self.checkpoints is not None:  # the position is what the operators were given
                    self.checkpoints.emitted(name, n_batch)
                came_in = self._came_in
                yield batch
                stats[0] += n_batch
                now = stats[2] = time.time()
                if now >= next_mark:  # a point every 0.2 s, for steady-state rates
                    timeline.append((now, stats[0]))
                    next_mark = now + 0.2
                if now >= next_marker:  # the batch went through this PE's operators: a latency marker
                    self._mark(name, came_in, now)
                    next_marker = now + MARK_EVERY
                if thread_point and now >= next_cpu:  # by time, not batches: a live snapshot's is recent
                    thread_point.sample_thread(self._source_cpu_ns(name))
                    next_cpu = now + THREAD_CPU_EVERY
        finally:
            if src.live:
                self._sample_lag(name, src)
            src.close()
        if thread_point:
            thread_point.sample_thread(self._source_cpu_ns(name))
        if stats[2] is not None:
            timeline.append((stats[2], stats[0]))

    def _batches(self, src: Source, size: int) -> Iterator[list]:
        """A bounded source's batches as it reads them (it is never idle)."""
        while not (self.stop or self.stop_sources):
            self._came_in = time.time()
            batch = src.read(size)
            if batch is None:
                return
            yield batch

    def _live_batches(self, name: str, src: Source, size: int) -> Iterator[list]:
        """A live source's batches: records are held until ``size`` have come or the
        oldest has waited ``max_batch_delay`` seconds (0: passed on as read), so a fast
        feed makes full frames and a slow one is not held; ``[]`` for a turn that passes
        nothing on (counted idle: ``drive_sources`` sleeps a millisecond when every
        source of the PE was). When the sources are told to end (``--duration``, a stop
        request), what is held is passed on, then the loop ends. Every ``LAG_EVERY``
        seconds the source's ``lag()`` is sampled here, in its own thread."""
        delay, clock = self.max_batch_delay, time.monotonic
        unbounded = src.unbounded  # a feed's own clock counts only for a live feed (a backlog replay: the read)
        held: list = []
        first = next_lag = 0.0
        while not (self.stop or self.stop_sources):
            got = src.read(size - len(held))
            now = clock()
            if now >= next_lag:
                self._sample_lag(name, src)
                next_lag = now + LAG_EVERY
            if got is None:
                break
            if got:
                if held:
                    held += got
                else:
                    held, first = got, now
                    came_in = src.arrived() if unbounded else None
                    self._came_in = time.time() if came_in is None else came_in
            if held and (len(held) >= size or now - first >= delay):
                out, held = held, []
                yield out
                continue
            self._idle_turns += 1  # nothing (or less than asked) to read now
            yield []
        if held and not self.stop:
            yield held


    def _sample_lag(self, name: str, src: Source) -> None:
        try:
            self.lags[name] = src.lag()
        except Exception as exc:  # noqa: BLE001 - a lag is a report, never a reason to fail
            self.lags[name] = None
            print(f"spadeopt: PE {self.pe_id}: lag of source '{name}' unknown: {exc}", file=sys.stderr, flush=True)
