"""The PE container runtime: what a generated PE module's ``build(rt)`` talks to.

This module holds ``PERuntime`` (state, the generated code's calls, running, failure
reports) and ``OperatorFailure``; the sources thread is ``runtime.pe_sources``, the
sockets ``runtime.pe_sockets``, the main loop ``runtime.pe_inputs``, latency markers
``runtime.pe_markers``, input ports and ``LinkError`` ``runtime.pe_ports``.

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

import linecache
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import zmq

from spadeopt import wire
from spadeopt.connectors.contract import Source
from spadeopt.model.schema import ungid
from spadeopt.runtime import pe_samples, transport
from spadeopt.runtime.latency import Latency
from spadeopt.runtime.metrics import Metrics
from spadeopt.runtime.ordered import Ordered
from spadeopt.runtime.pe_inputs import InputLoop
from spadeopt.runtime.pe_markers import LatencyMarkers
from spadeopt.runtime.pe_ports import InputPort, LinkError, Pending
from spadeopt.runtime.pe_sockets import PESockets
from spadeopt.runtime.pe_sources import SourceDriving, check_shape
from spadeopt.runtime.security import Guard
from spadeopt.runtime.sinks import Sink

__all__ = ["OperatorFailure", "PERuntime", "check_shape", "user_traceback"]  # check_shape: generated code imports it here
STOP_POLL = 0.1  # s between two looks for the run's stop file


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


class PERuntime(SourceDriving, LatencyMarkers, PESockets, InputLoop):
    """One PE process's runtime. Its concerns live in mixins: ``SourceDriving`` (the sources
    thread, live batching: ``runtime.pe_sources``), ``LatencyMarkers`` (``runtime.pe_markers``),
    ``PESockets`` (bind, connect, close: ``runtime.pe_sockets``) and ``InputLoop`` (the main
    loop: ``runtime.pe_inputs``); this class holds the state, the calls generated code makes,
    running, progress, stopping and failure reports."""

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
        self._t_run: float | None = None  # when run() began (``stopping``)
        self.progress_file = progress_file
        self._failed = threading.Event()
        self._done = threading.Event()
        self.secure = secure
        self.max_frame = max_frame
        self.guard: Guard | None = None
        self.server_key: tuple[str, str] | None = None  # (public, secret) of this PE's PULL sockets
        self.link_keys: dict[str, tuple[str, str]] = {}  # out link id -> (public, secret)
        self.received = 0  # frames taken off the input sockets (progress, for stall detection)
        self.idle_s = 0.0  # time the PE's threads waited for input (runtime.pe_live)
        self.live: Any = None  # a runtime.pe_live.LiveReporter when the driver collects live metrics
        self.states: dict[str, tuple] = {}  # operator -> its state objects (checkpointing builds: rt.state)
        self.checkpoints: Any = None  # a runtime.barrier_alignment.Checkpointer when the run takes checkpoints
        self.latency = Latency()  # latency markers sent, taken and recorded (runtime.latency)
        self.metrics = Metrics()  # operator counters (a window's late tuples) and warnings (runtime.metrics)
        self._came_in = 0.0  # wall time the oldest record of the sources thread's next batch came in
        self.sources_cpu_s: float | None = None  # CPU of the sources thread, once it ended (reported)
        self.cyclic_inputs: frozenset[str] = frozenset()  # input ports a cycle of PEs closes through

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
        ``connector``: a sink connector (``spadeopt.connectors.contract.Sink``) it writes to."""
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
        (``spadeopt.runtime.checkpoint_codec``: snapshot and restored in place)."""
        self.states[op] = objs

    def input(self, ref: str, fn: Callable, final: Callable, links: int, point: Any = None) -> None:
        self.inputs[ref] = InputPort(ref, fn, final, links, point=point,
                                     countdown=point.countdown if point is not None else 0)

    def point(self, op: str, port: str, direction: str, subscribers: tuple[str, ...] = ()):
        """A profiling build's instrumentation point (see ``spadeopt.profiling``)."""
        from spadeopt.profiling import PointKey

        return self.profiler.point(PointKey(op, port, direction), subscribers)

    def key_sampler(self, op: str, port: str, idx: tuple[int, ...], types: tuple[str, ...], fn, arity: int = 0):
        """Keyed operator ``op``'s input ``port`` function ``fn``, its batches' key hashes
        sampled first (instrumented builds: ``profiling.keys``); ``fn`` itself otherwise."""
        if self.profiler is None:
            return fn
        return self.profiler.key_sampler(op, port, idx, types, arity).wrap(fn)

    def window(self):
        """A profiling build's timing window for one thread (``spadeopt.profiling.CpuWindow``)."""
        from spadeopt.profiling.window import CpuWindow, window_stride

        return CpuWindow(window_stride(self.profiler.sample_rate))

    def source(self, name: str, fn: Callable[[], Iterator[None]]) -> None:
        """Register a source: ``fn()`` gives a generator that runs one batch per step."""
        self.sources[name] = fn


    # ---- running ----------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Run all threads to completion; raises ``OperatorFailure`` on the first error."""
        t0, c0 = time.time(), time.process_time()
        self._t_run = t0
        if self.duration is not None:
            timer = threading.Timer(self.duration, self._end_sources, args=("duration",))
            timer.daemon = True
            timer.start()
        if self.stop_file and self.sources:
            threading.Thread(target=self._watch_stop, daemon=True, name="stop").start()
        snapshots = None
        if self.stop_file and self.profiler is not None and self.profile_dir:  # run --adaptive's snapshots
            snapshots = threading.Thread(target=pe_samples.watch, args=(
                self.pe_id, self.profiler, self.profile_dir, self.stop_file, self._done, STOP_POLL),
                daemon=True, name="samples")
            snapshots.start()
        if self.progress_file:
            threading.Thread(target=self._report_progress, daemon=True, name="progress").start()
        if self.live is not None:
            self.live.start()
        if not (self.sources and self.inputs):  # one thread sends on every port: markers may go on any
            for s in self.senders.values():
                s.sole = True
        threads = [threading.Thread(target=self._guard, args=("sources", self.drive_sources),
                                    daemon=True, name="sources")] if self.sources else []
        for t in threads:
            t.start()
        if self.inputs:
            self._main_thread = threading.get_ident()
            if self.cyclic_inputs & self.inputs.keys():  # a full link: take their frames while waiting
                for s in self.senders.values():
                    s.waiter = self.wait_to_send
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
            if snapshots is not None:
                snapshots.join(5.0)  # a snapshot being written must not land over the final samples
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

    def stopping(self) -> bool:
        """The run is being stopped mid-stream: this PE's sources were told to end, its
        stop file is there, or its ``--duration`` is (all but) up (a merge PE without sources
        may see its channels end just before its own timer fires)."""
        if self.stop_sources or (self.stop_file and os.path.exists(self.stop_file)):
            return True
        return self.duration is not None and self._t_run is not None and \
            time.time() >= self._t_run + self.duration - 1.0

    def _watch_stop(self) -> None:
        """End the sources when the run's stop file appears (``deploy.launcher.request_stop``)."""
        while not self._done.wait(STOP_POLL):
            if os.path.exists(self.stop_file):
                print(f"spadeopt: PE {self.pe_id}: stop requested: its sources end", file=sys.stderr, flush=True)
                self._end_sources("request")
                return

    def unbounded(self) -> list[str]:
        """This PE's sources that have no end of their own (``connectors.contract.Source.unbounded``)."""
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
