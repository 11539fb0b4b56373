"""The PE container runtime: what a generated PE module's ``build(rt)`` talks to.

One main thread drains the PE's input ports; one more thread drives every source
operator of the PE, one batch per turn in turn (``PERuntime.drive_sources``), each
batch down its chain by direct calls (paper 003 §2.5). Python runs one thread at a
time, so a thread per source bought no parallelism and cost a GIL hand-off every few
milliseconds: 1.3-1.5x the CPU per tuple for two or six sources in one PE
(docs/decisions/004-one-thread-drives-all-sources-of-a-pe.md). The first exception in any
thread stops the PE and is reported with the operator and input port it came from.

Every frame is checked at the boundary, before any operator sees it
(``wire.decode_batch``): a malformed frame stops the PE with a ``LinkError``
naming this PE, the input port and the upstream link it came on. Finals are counted
per upstream link (a link's second final is ignored and logged); with secure links
(the default) the link of every message is the ZAP User-Id its CURVE key was
admitted under, so a final can only end the link it really came on.

Input sockets take frames of at most ``max_frame`` (``transport.pull_socket``): ZeroMQ
drops a connection that sends a larger one. With secure links such a link reconnects
and is admitted a second time (``Guard.dropped``), and the PE stops with a
``LinkError`` naming the port and link ("oversized frame") before it counts the port's
last final; honest PEs never send one (``transport.Sender`` refuses it at the source).
"""

from __future__ import annotations

import itertools
import linecache
import os
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import zmq

from spadeopt import wire
from spadeopt.connectors.base import LimitedSource, Source, as_source
from spadeopt.model.schema import ungid
from spadeopt.protocol import SEQ as FISSION_SEQ
from spadeopt.runtime import transport
from spadeopt.runtime.fission import read_splits as fission_read_splits
from spadeopt.runtime.latency import MARK_EVERY, Latency
from spadeopt.runtime.metrics import Metrics
from spadeopt.runtime.ordered import Ordered
from spadeopt.runtime.security import Guard, keypair, make_client, make_server
from spadeopt.runtime.sinks import Sink

IDLE_SLEEP = 0.001  # s: drive_sources' first back-off when every source of the PE was idle for a round
IDLE_SLEEP_MAX = 0.01  # s: the longest back-off (doubling from IDLE_SLEEP), never above max_batch_delay
LAG_EVERY = 1.0  # s between two lag() calls of a live source (made in the sources thread)
STOP_POLL = 0.1  # s between two looks for the run's stop file
WAIT_MS = 100  # ms the main thread waits for a frame before it looks at stop, checkpoints, dropped links


class Pending:
    """Counts finals per input port; ``arrive`` is True once, when all have arrived."""

    def __init__(self, op: str, counts: dict[str, int]) -> None:
        self.op = op
        self.left = dict(counts)
        self.total = sum(counts.values())
        self._lock = threading.Lock()

    def arrive(self, port: str | None) -> bool:
        with self._lock:
            if port is not None:
                self.left[port] -= 1
                self.total -= 1
            return self.total == 0


@dataclass
class InputPort:
    ref: str
    fn: Callable
    final: Callable
    links: int
    socket: Any = None
    finals: int = 0
    point: Any = None  # profiling builds: the PE input port's submit signal
    countdown: int = 0
    types: tuple | None = None  # wire types of the port's attributes (None: unchecked)
    pulsed: bool = False  # inside a parallel region: a batch may end with a fission pulse
    upstream: dict[str, str] = field(default_factory=dict)  # link id -> "PE pe1 (op.port)"
    finaled: set[str] = field(default_factory=set)  # links whose final has arrived


class LinkError(Exception):
    """A frame that must not enter an operator: names the PE, input port and link."""

    def __init__(self, pe: str, port: InputPort, link: str | None, problem: str) -> None:
        if link is None:
            src = "an unidentified sender (--insecure-links: links are not authenticated)"
        else:
            src = f"link {link} of {port.upstream.get(link, 'an unknown PE')}"
        super().__init__(f"malformed frame on input port '{port.ref}' of PE {pe}, from {src}: {problem}")
        self.op, self.port = port.ref.split(".", 1)


class OperatorFailure(Exception):
    """An exception escaped an operator; carries where it happened, the full traceback
    (for the PE log) and the user's part of it (for the user's terminal)."""

    def __init__(self, op: str | None, port: str | None, thread: str, tb: str, exc: BaseException,
                 user_tb: str | None = None):
        super().__init__(f"{type(exc).__name__}: {exc}")
        self.op, self.port, self.thread, self.tb, self.exc = op, port, thread, tb, exc
        self.user_tb = user_tb


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # .../spadeopt/


def user_traceback(exc: BaseException, generated_dir: str) -> str | None:
    """The traceback of ``exc`` from the first frame of the user's code on, or None when
    every frame is spadeopt's (its package, or a generated PE module in ``generated_dir``):
    a built-in operator's error message says all a user needs."""
    frames = traceback.extract_tb(exc.__traceback__)
    generated = os.path.join(os.path.abspath(generated_dir), "")
    first = next((i for i, f in enumerate(frames)
                  if not os.path.abspath(f.filename).startswith((_PACKAGE, generated))), None)
    if first is None:
        return None
    return ("Traceback (most recent call last):\n" + "".join(traceback.format_list(frames[first:]))
            + "".join(traceback.format_exception_only(type(exc), exc)))


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


class PERuntime:
    def __init__(self, pe_id: str, operators: tuple[str, ...], module_file: str,
                 out_dir: str | None = None, batch_size: int = wire.DEFAULT_BATCH,
                 hwm: int = transport.DEFAULT_HWM, profiler: Any = None,
                 duration: float | None = None, progress_file: str | None = None,
                 secure: bool = True, max_frame: int = transport.DEFAULT_MAX_FRAME,
                 max_batch_delay: float = wire.DEFAULT_BATCH_DELAY, stop_file: str | None = None,
                 source_limit: int | None = None) -> None:
        self.pe_id = pe_id
        self.operators = operators
        self.module_file = module_file
        self.out_dir = out_dir
        self.batch_size = batch_size
        self.max_batch_delay = max_batch_delay
        self.stop_file = stop_file  # a file whose appearance ends the sources (a stop request)
        self.stopped_by: str | None = None  # "duration" or "request" once the sources were told to end
        self.source_limit = source_limit  # records each source passes on before it ends (--verify-fission)
        self._split_sources: set[str] = set()  # sources read through read_splits (limited by whole splits)
        self.hwm = hwm
        self.ctx = zmq.Context.instance()
        self.senders: dict[str, transport.Sender] = {}
        self.inputs: dict[str, InputPort] = {}
        self.sources: dict[str, Callable[[], Iterator[None]]] = {}  # name -> its generator function
        self.connectors: dict[str, Source] = {}  # source name -> its connector (position, lag)
        self.lags: dict[str, int | None] = {}  # live source -> its last lag() (entries behind the feed's end)
        self._idle_turns = 0  # turns a live source found nothing to read (drive_sources backs off)
        self._turn: str | None = None  # the source whose batch the sources thread is running
        self._turn_cpu: dict[str, int] | None = None  # profiling, several sources: CPU ns of each one's turns
        self._turn_start = 0  # thread CPU ns when the running turn began
        self.sinks: dict[str, Sink] = {}
        self.sink_connectors: dict[str, Any] = {}  # sink name -> its connector (report())
        self.source_stats: dict[str, list] = {}
        self.failure: OperatorFailure | None = None
        self.stop = False  # set on failure: every thread winds down
        self.stop_sources = False  # set when --duration is up: sources end, finals flow
        self.profiler = profiler
        self.duration = duration
        self.progress_file = progress_file
        self._failed = threading.Event()
        self._done = threading.Event()
        self.secure = secure
        self.max_frame = max_frame
        self.guard: Guard | None = None
        self.server_key: tuple[str, str] | None = None  # (public, secret) of this PE's PULL sockets
        self.link_keys: dict[str, tuple[str, str]] = {}  # out link id -> (public, secret)
        self.received = 0  # frames taken off the input sockets (progress, for stall detection)
        self.states: dict[str, tuple] = {}  # operator -> its state objects (checkpointing builds: rt.state)
        self.checkpoints: Any = None  # a runtime.checkpoint.Checkpointer when the run takes checkpoints
        self.latency = Latency()  # latency markers sent, taken and recorded (runtime.latency)
        self.metrics = Metrics()  # operator counters (a window's late tuples) and warnings (runtime.metrics)
        self._came_in = 0.0  # wall time the oldest record of the sources thread's next batch came in
        self.sources_cpu_s: float | None = None  # CPU of the sources thread, once it ended (reported)

    # ---- called by generated build(rt) -----------------------------------------------
    def sender(self, ref: str, locked: bool = False) -> transport.Sender:
        s = transport.Sender(ref, locked, self.max_frame)
        self.senders[ref] = s
        return s

    def pending(self, op: str, counts: dict[str, int]) -> Pending:
        return Pending(op, counts)

    def lock(self) -> threading.RLock:
        return threading.RLock()

    def ordered(self, n: int, key_index: list[int]) -> Ordered:
        return Ordered(n, key_index)

    def sink(self, name: str, mode: str, names: list[str], types: list[str], report_as: str | None = None,
             connector: Any = None) -> Sink:
        """``report_as``: a counting sink's channel copy counts under its logical name;
        ``connector``: a sink connector (``spadeopt.connectors.base.Sink``) it writes to."""
        s = Sink(report_as or name, mode, names, types, self.out_dir, connector, part=name)
        self.sinks[name] = s
        if connector is not None:
            self.sink_connectors[name] = connector
        return s

    def sink_counts(self) -> dict[str, int]:
        """Tuples per reported sink name (channel copies of a counting sink summed)."""
        counts: dict[str, int] = {}
        for s in list(self.sinks.values()):
            counts[s.name] = counts.get(s.name, 0) + s.count
        return counts

    def state(self, op: str, *objs: Any) -> None:
        """A checkpointing build's operator registers the objects holding its state
        (``spadeopt.runtime.checkpoint``: snapshot and restored in place)."""
        self.states[op] = objs

    def input(self, ref: str, fn: Callable, final: Callable, links: int, point: Any = None) -> None:
        self.inputs[ref] = InputPort(ref, fn, final, links, point=point,
                                     countdown=point.countdown if point is not None else 0)

    def point(self, op: str, port: str, direction: str, subscribers: tuple[str, ...] = ()):
        """A profiling build's instrumentation point (see ``spadeopt.profiling``)."""
        from spadeopt.profiling import PointKey

        return self.profiler.point(PointKey(op, port, direction), subscribers)

    def window(self):
        """A profiling build's timing window for one thread (``spadeopt.profiling.CpuWindow``)."""
        from spadeopt.profiling.window import CpuWindow, window_stride

        return CpuWindow(window_stride(self.profiler.sample_rate))

    def source(self, name: str, fn: Callable[[], Iterator[None]]) -> None:
        """Register a source: ``fn()`` gives a generator that runs one batch per step."""
        self.sources[name] = fn

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
        """The records of splittable source ``name``'s copy (``runtime.fission.read_splits``).
        With a source limit (``--verify-fission N``) the copy reads only the splits that
        begin among the stream's first N records, so every width reads the same records."""
        self._split_sources.add(name)
        if self.source_limit is not None:
            first = -(-self.source_limit // size)  # the splits 0 .. first-1 begin before record N
            splits = itertools.islice(splits, max(0, -(-(first - part) // parts)))
        return fission_read_splits(name, splits, part, parts, size, stamp)

    def source_batches(self, name: str, iterable: Iterable, arity: int | None = None) -> Iterable[list]:
        """Read a source in batches through the connector contract
        (``spadeopt.connectors.base``), counting them for throughput: a source connector
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
        n = 0
        try:
            src.open()
            for batch in (self._live_batches(name, src, size) if src.live else self._batches(src, size)):
                if not batch:
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
                n += 1
                if thread_point and n % 64 == 0:
                    thread_point.sample_thread(self._source_cpu_ns(name))
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

    def _mark(self, origin: str, came_in: float, now: float) -> None:
        """A latency marker of source ``origin`` whose batch came in at ``came_in`` and has
        just gone through this PE's operators (sources thread; ``runtime.latency``)."""
        self._pass_marker(wire.marker_frame(origin, self.latency.next_seq(origin), came_in), came_in, now)

    def take_marker(self, port: InputPort, frame: zmq.Frame, data) -> None:
        """A latency marker off ``port``: every frame before it on its link has been
        processed; recorded when this PE has sinks, passed on once (``runtime.latency``)."""
        try:
            origin, seq, came_in = wire.parse_marker(data)
        except wire.WireError as exc:
            raise LinkError(self.pe_id, port, frame.get("User-Id") if self.secure else None, str(exc)) from None
        if self.latency.take(origin, seq):
            self._pass_marker(bytes(data), came_in, time.time())

    def _pass_marker(self, frame: bytes, came_in: float, now: float) -> None:
        """Record a marker's latency when this PE has sinks, and send it on every port."""
        if self.sinks:
            self.latency.record((now - came_in) * 1000.0)
        for s in self.senders.values():
            s.marker(frame)

    def _sample_lag(self, name: str, src: Source) -> None:
        try:
            self.lags[name] = src.lag()
        except Exception as exc:  # noqa: BLE001 - a lag is a report, never a reason to fail
            self.lags[name] = None
            print(f"spadeopt: PE {self.pe_id}: lag of source '{name}' unknown: {exc}", file=sys.stderr, flush=True)

    # ---- wiring -----------------------------------------------------------------------
    def bind(self, ipc_dir: str | None, host: str | None,
             schemas: dict[str, list | None] | None = None) -> dict[str, dict[str, str]]:
        """Bind a PULL socket per exposed input port (a CURVE server when secure);
        returns its endpoints. ``schemas``: port ref -> ``[[name, type], ...]``."""
        endpoints = {}
        if self.secure and self.inputs:
            self.guard = Guard(self.ctx, self.pe_id)  # before bind: no connection unasked
            self.server_key = keypair()
        for ref, port in sorted(self.inputs.items()):
            schema = (schemas or {}).get(ref)
            port.types = wire.wire_types(schema)
            port.pulsed = bool(schema) and schema[-1][0] == FISSION_SEQ  # batches may end with a pulse
            s = transport.pull_socket(self.ctx, self.hwm, self.max_frame)
            if self.guard is not None:
                make_server(s, *self.server_key, domain=ref)
                self.guard.watch(s, ref)
            eps = {}
            if ipc_dir:
                eps["ipc"] = f"ipc://{ipc_dir}/{self.pe_id}-{ref}"
                s.bind(eps["ipc"])
            if host:
                port_no = s.bind_to_random_port(f"tcp://{host}")
                eps["tcp"] = f"tcp://{host}:{port_no}"
            port.socket = s
            endpoints[ref] = eps
        if self.guard is not None:
            self.guard.start_monitor()
        return endpoints

    def public_keys(self, out_links: list[str]) -> dict[str, Any]:
        """Make a client keypair per outgoing link; return every public key of this PE."""
        if not self.secure:
            return {}
        self.link_keys = {link: keypair() for link in sorted(out_links)}
        return {"server": self.server_key[0] if self.server_key else None,
                "links": {link: pub for link, (pub, _) in self.link_keys.items()}}

    def connect(self, links: dict[str, list[dict[str, str]]],
                upstream: dict[str, dict[str, dict[str, str]]] | None = None) -> None:
        """``links``: exposed output port -> ``[{link, endpoint, server_key}]`` of its
        downstream input ports; ``upstream``: input port -> link id -> ``{key, from}``,
        the only peers this PE's input ports admit."""
        upstream = upstream or {}
        for ref, port in self.inputs.items():
            port.upstream = {link: v["from"] for link, v in upstream.get(ref, {}).items()}
        if self.guard is not None:
            self.guard.allow({ref: {v["key"]: link for link, v in ups.items()} for ref, ups in upstream.items()})
        for ref, outs in links.items():
            sender = self.senders[ref]
            for out in outs:
                s = transport.push_socket(self.ctx, self.hwm)
                if self.secure:
                    make_client(s, *self.link_keys[out["link"]], server_public=out["server_key"])
                s.connect(out["endpoint"])
                sender.sockets.append(s)
                sender.links.append(out["link"])

    # ---- running ----------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Run all threads to completion; raises ``OperatorFailure`` on the first error."""
        t0, c0 = time.time(), time.process_time()
        if self.duration is not None:
            timer = threading.Timer(self.duration, self._end_sources, args=("duration",))
            timer.daemon = True
            timer.start()
        if self.stop_file and self.sources:
            threading.Thread(target=self._watch_stop, daemon=True, name="stop").start()
        if self.progress_file:
            threading.Thread(target=self._report_progress, daemon=True, name="progress").start()
        if not (self.sources and self.inputs):  # one thread sends on every port: markers may go on any
            for s in self.senders.values():
                s.sole = True
        threads = [threading.Thread(target=self._guard, args=("sources", self.drive_sources),
                                    daemon=True, name="sources")] if self.sources else []
        for t in threads:
            t.start()
        if self.inputs:
            self._guard("main", self._main_loop)
        for t in threads:
            while t.is_alive() and not self._failed.is_set():
                t.join(0.05)
        self._done.set()
        if self.failure:
            raise self.failure
        for s in self.sinks.values():
            s.close()
        t_end, cpu = time.time(), time.process_time() - c0
        if self.profiler is not None and self.profile_dir:
            self.profiler.write(self.profile_dir)  # after timing: not part of the run
        return {
            "pe": self.pe_id,
            "cpu_s": cpu,
            "wall_s": t_end - t0,
            "t_end": t_end,
            "sources": {n: v for n, v in self.source_stats.items()},
            "sinks": self.sink_counts(),
            "connectors": self.connector_report(),
            "stopped_by": self.stopped_by,
            "refused": self.guard.refusals() if self.guard is not None else {},
            "secure_links": self.secure,
            "latency_ms": self.latency.samples,
            "sources_cpu_s": self.sources_cpu_s,
            "checkpoints": self.checkpoints.stats() if self.checkpoints is not None else None,
            "metrics": self.metrics.report(),
        }

    def progress(self) -> tuple[int, dict[str, list[str]]]:
        """A counter that advances while this PE does work, and the input ports still
        open with the upstream links whose final has not arrived (for stall reports)."""
        n = self.received + sum(s.batches for s in self.senders.values())
        n += sum(v[0] for v in list(self.source_stats.values()))
        if self.unbounded():  # polling a live feed that is quiet is waiting on the world, not a stall
            n += self._idle_turns
        waiting = {ref: sorted(set(p.upstream) - p.finaled) or [f"{p.links - p.finals} link(s)"]
                   for ref, p in self.inputs.items() if p.finals < p.links}
        return n, waiting

    profile_dir: str | None = None

    def _end_sources(self, why: str = "request") -> None:
        """Sources end as if their input had: what they hold is passed on, finals follow
        the in-flight tuples, windows close by their end-of-stream rules, sinks flush."""
        if not self.stop_sources:
            self.stopped_by = why
        self.stop_sources = True

    def _watch_stop(self) -> None:
        """End the sources when the run's stop file appears (``deploy.launcher.request_stop``)."""
        while not self._done.wait(STOP_POLL):
            if os.path.exists(self.stop_file):
                print(f"spadeopt: PE {self.pe_id}: stop requested: its sources end", file=sys.stderr, flush=True)
                self._end_sources("request")
                return

    def unbounded(self) -> list[str]:
        """This PE's sources that have no end of their own (``connectors.base.Source.unbounded``)."""
        return sorted(n for n, src in list(self.connectors.items()) if src.unbounded)

    def connector_report(self) -> dict[str, dict[str, Any]]:
        """Each live source's position (where a next run would resume) and last lag, and
        each connector sink's report (counts, last entry ID)."""
        out: dict[str, dict[str, Any]] = {}
        for n, src in sorted(self.connectors.items()):
            if src.live:
                try:
                    pos = src.position()
                except Exception:  # noqa: BLE001 - a report
                    pos = None
                out[n] = {"position": pos, "lag": self.lags.get(n), "unbounded": src.unbounded}
        for n, conn in sorted(self.sink_connectors.items()):
            try:
                out[n] = conn.report()
            except Exception:  # noqa: BLE001 - a report
                continue
        return out

    def _report_progress(self) -> None:
        """Every second, write this PE's source counts (and pid) where the driver can read them."""
        import json
        import os

        while not self._done.wait(1.0):
            doc = {"pe": self.pe_id, "pid": os.getpid(), "t": time.time(),
                   "sources": {n: v[0] for n, v in list(self.source_stats.items())},
                   "sinks": self.sink_counts(), "lag": dict(self.lags), "unbounded": self.unbounded(),
                   "stopping": self.stopped_by, "metrics": self.metrics.report()}
            tmp = f"{self.progress_file}.tmp"
            with open(tmp, "w") as f:
                json.dump(doc, f)
            os.replace(tmp, self.progress_file)

    def _guard(self, thread: str, fn: Callable) -> None:
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - every escape is reported
            if thread == "sources":
                thread = f"source:{self._turn}"  # the source whose turn it was
            if self.failure is None:
                op, port = (exc.op, exc.port) if isinstance(exc, LinkError) else self._locate(exc)
                self.failure = OperatorFailure(op, port, thread, traceback.format_exc(), exc,
                                               user_traceback(exc, os.path.dirname(self.module_file)))
            self.stop = True
            self._failed.set()

    def _locate(self, exc: BaseException) -> tuple[str | None, str | None]:
        """Find the innermost generated frame in the traceback: that is the operator.

        Generated function names carry the operator mangled by ``model.schema.gid``; a
        line of a collapsed loop names its operator in a trailing ``# op: <name>``
        comment (``codegen.collapse``), which wins over the enclosing function's name."""
        op = port = None
        tb = exc.__traceback__
        while tb is not None:
            code = tb.tb_frame.f_code
            if code.co_filename == self.module_file:
                hit = ungid(code.co_name)
                if hit is not None and hit[0] in self.operators:
                    name, rest = hit
                    if name != op:
                        op, port = name, None
                    rest = rest.removeprefix("__").removesuffix("__body")
                    if rest and rest not in ("final", "run") and not rest.startswith(("_", "submit_")):
                        port = rest
                line = linecache.getline(self.module_file, tb.tb_lineno)
                marker = line.rpartition("# op: ")[2].strip() if "# op: " in line else ""
                if marker in self.operators:
                    op, port = marker, "in"
            tb = tb.tb_next
        return op, port

    def _main_loop(self) -> None:
        """Take frames off the input ports until every port has all its finals.

        A PE with one input port (most of them) blocks in ``recv`` (``WAIT_MS`` at a
        time, then looks at ``stop``, checkpoints and dropped links again); with several
        a poller waits for any of them and drains up to 64 frames of a ready port. A
        poll and the failed non-blocking ``recv`` that ends a drain cost 7-10 us a frame
        where the sender is the slower end and every frame is waited for
        (docs/decisions/007-inter-pe-link-cost.md)."""
        ports = list(self.inputs.values())
        if len(ports) == 1:
            self._one_port_loop(ports[0])
            return
        poller = zmq.Poller()
        by_socket = {}
        for port in ports:
            poller.register(port.socket, zmq.POLLIN)
            by_socket[port.socket] = port
        open_ports = len(by_socket)
        take, guard, ck = self._take, self.guard, self.checkpoints
        while open_ports and not self.stop:
            if ck is not None and ck.release_due:  # an alignment the sources thread completed
                ck.release()
            if guard is not None and guard.dropped:  # promptly, for the ports still open
                self._check_dropped(p for p in by_socket.values() if p.finals < p.links)
            for sock, _ in poller.poll(WAIT_MS):
                port = by_socket[sock]
                for _ in range(64):
                    try:
                        frame = sock.recv(zmq.NOBLOCK, copy=False)
                    except zmq.Again:
                        break
                    if take(port, frame):
                        poller.unregister(sock)
                        open_ports -= 1
                        break

    def _one_port_loop(self, port: InputPort) -> None:
        """``_main_loop`` for a PE with one input port: a blocking ``recv`` per frame."""
        sock = port.socket
        sock.setsockopt(zmq.RCVTIMEO, WAIT_MS)
        take, guard, ck = self._take, self.guard, self.checkpoints
        while not self.stop:
            if ck is not None and ck.release_due:  # an alignment the sources thread completed
                ck.release()
            if guard is not None and guard.dropped:
                self._check_dropped([port])
            try:
                frame = sock.recv(copy=False)
            except zmq.Again:  # WAIT_MS without a frame
                continue
            if take(port, frame):
                return

    def _take(self, port: InputPort, frame: zmq.Frame) -> bool:
        """One frame off ``port``'s socket: a checkpoint's, a final marker (True when it
        was the port's last) or a batch, checked (``wire.decode_batch``) and handed to
        the port's operator."""
        self.received += 1
        data = frame.buffer
        ck = self.checkpoints
        if ck is not None and ck.intercept(port, frame, data):  # barriers, blocked links
            return False
        tag = data[:1]
        if tag == wire.FINAL_TAG:
            return self._final(port, frame, self.secure)
        if tag == wire.MARKER_TAG:
            self.take_marker(port, frame, data)
            return False
        try:
            batch = wire.decode_batch(data, port.types, self.max_frame, port.pulsed)
        except wire.WireError as exc:
            raise LinkError(self.pe_id, port, frame.get("User-Id") if self.secure else None, str(exc)) from None
        if port.point is None:
            port.fn(batch)
        else:
            self._sampled_dispatch(port, batch)
        return False

    def _final(self, port: InputPort, frame: zmq.Frame, secure: bool) -> bool:
        """Count a final marker once per upstream link; True when the port is final."""
        claimed = bytes(frame.buffer[1:]).decode(errors="replace")
        link = frame.get("User-Id") if secure else claimed
        if claimed != link:
            raise LinkError(self.pe_id, port, link, f"final marker names link {claimed!r}")
        if port.upstream and link not in port.upstream:
            raise LinkError(self.pe_id, port, None, f"final marker of {link!r}, not an upstream link of this port")
        if link in port.finaled:
            print(f"spadeopt: PE {self.pe_id} ignored a second final marker on link {link} into "
                  f"{port.ref}", file=sys.stderr, flush=True)
            return False
        port.finaled.add(link)
        port.finals += 1
        if port.finals == port.links and self.guard is not None and self.guard.dropped:
            self._check_dropped([port])  # its admission came before any frame it then sent
        if port.point is not None and port.finals == port.links:
            port.point.close(port.countdown)
        port.final(port.ref.split(".", 1)[1])
        return port.finals == port.links

    def _check_dropped(self, ports: Iterable[InputPort]) -> None:
        """Stop with a ``LinkError`` if a link into one of ``ports`` was dropped."""
        for port in ports:
            link = self.guard.dropped.get(port.ref)
            if link is not None:
                raise LinkError(self.pe_id, port, link, (
                    f"oversized frame: ZeroMQ dropped the link's connection and the link reconnected; "
                    f"it drops a connection that sends a frame over max_frame ({self.max_frame:,} bytes) "
                    f"before reading it, so frames sent on it may be lost"))

    @staticmethod
    def _sampled_dispatch(port: InputPort, batch) -> None:
        """A PE input port's submit signal: time the process call when a sample is due."""
        cd = port.countdown - len(batch)
        if cd > 0:
            port.countdown = cd
            port.fn(batch)
            return
        t0 = time.thread_time_ns()
        port.fn(batch)
        port.countdown = port.point.sample_process(cd, batch, time.thread_time_ns() - t0)

    def close(self) -> None:
        if self.guard is not None:
            self.guard.close()
        for s in self.senders.values():
            for sock in s.sockets:
                sock.close(linger=0)  # everything was delivered: all PEs are done
        for p in self.inputs.values():
            if p.socket is not None:
                p.socket.close(linger=0)
        self.ctx.term()
