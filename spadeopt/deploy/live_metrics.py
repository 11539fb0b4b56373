"""The driver's live metrics: every PE's counts, about once a second, as one job state.

``Collector`` binds a ZeroMQ PULL socket on the driver (CURVE with a fresh server key
per run, like the rendezvous and the checkpoint coordinator; every record carries the
run's token, compared in constant time) and hands its ``channel`` to the node agents in
the job spec, which give it to each PE (``runtime.pe_live``). A record is a
``control.PEMetrics``, checked field by field before anything is read; one from an
unknown PE, with the wrong token or malformed is dropped and counted (``rejected``).

Records hold counts since the PE process started. ``state()`` turns the latest one of
every PE into the job state the presentation reads (``spadeopt.live``: the Prometheus
endpoint, ``spadeopt top``, the web page; its schema is in docs/metrics.md):

* totals never go down: when a PE process is replaced (a restart in place, a new pid),
  the counts of the process that ended are kept as a base and the new one's add to it,
  so a restarted run's totals count the work done again after the rewind as work (the
  sinks' committed output is still exactly once: that is the run's result);
* rates and the busy / idle / backpressure fractions are over the last two records of
  a PE (about a second); ``idle`` is the time the PE's threads waited for input,
  ``backpressure`` the time its sends waited for a full link, ``busy`` the rest of the
  wall time;
* ``queued`` is what the PE's upstream sent on its input links less what it took (the
  two counts are up to a second apart, so it is an estimate, never below 0);
* the bottleneck is the PE with the highest busy fraction, when that is at least
  ``live_state.BOTTLENECK_BUSY`` (a PE held back by a full link is not busy: its wait counts as
  backpressure, so the PE that holds the others back is the busiest one).
"""

from __future__ import annotations

import hmac
import threading
import time
from collections.abc import Callable
from typing import Any

import zmq

from spadeopt import control
from spadeopt.deploy.live_state import BLOCKED, job_state
from spadeopt.errors import UsageError
from spadeopt.plan.deployment import Deployment

LINGER_S = 1.5  # the server stays up this long after the run when a viewer watches it
MAX_RECORD = 1 << 20  # bytes: a record of a PE with many ports is a few kB


def _flat(rec: control.PEMetrics) -> dict[tuple, float]:
    """A record's counts as one map ``path -> number`` (what a restart's base adds up)."""
    out: dict[tuple, float] = {("cpu_s",): rec.cpu_s, ("wall_s",): rec.wall_s, ("idle_s",): rec.idle_s}
    for ref, vals in rec.ports_out.items():
        for i, v in enumerate(vals[:BLOCKED + 1]):
            out["out", ref, i] = v
    for ref, n in rec.ports_in.items():
        out["in", ref] = n
    for op, ports in rec.operators.items():
        for port, n in ports.items():
            out["op", op, port] = n
    for group in ("sources", "sinks"):
        for name, n in getattr(rec, group).items():
            out[group, name] = n
    for op, names in rec.counters.items():
        for name, n in names.items():
            out["counter", op, name] = n
    for i, n in enumerate(rec.latency):
        out["latency", i] = n
    return out


class _PE:
    """What the driver knows of one PE: its base (ended processes), its last two records."""

    def __init__(self) -> None:
        self.base: dict[tuple, float] = {}
        self.pid: int | None = None
        self.last: control.PEMetrics | None = None
        self.total: dict[tuple, float] = {}
        self.prev_total: dict[tuple, float] = {}
        self.dt = 0.0  # seconds between the last two records
        self.restarts = 0
        self.busy_s = 0.0  # never goes down (take)
        self.seen = 0.0  # driver time of the last record
        self.final = False

    def take(self, rec: control.PEMetrics) -> None:
        if self.pid is not None and rec.pid != self.pid:  # a new process: keep what the old one did
            self.base = dict(self.total)  # the old process's totals (its own base included)
            self.restarts += 1
            self.last = None
        elif self.last is not None and rec.seq <= self.last.seq:
            return  # an older record (never expected on one PUSH socket)
        cur = _flat(rec)
        total = dict(self.base)
        for k, v in cur.items():
            total[k] = total.get(k, 0.0) + v
        self.prev_total, self.total = (self.total if self.last is not None else {}), total
        self.dt = rec.at - self.last.at if self.last is not None else 0.0
        self.pid, self.last, self.seen, self.final = rec.pid, rec, time.time(), rec.final
        # busy = wall - idle - blocked: a wait still going on is counted by its end only
        # (input waits end within WAIT_MS), so keep the total from ever going down
        busy = max(0.0, total.get(("wall_s",), 0.0) - total.get(("idle_s",), 0.0)
                   - sum(total[k] for k in self.keys("out", BLOCKED)))
        self.busy_s = max(self.busy_s, busy)

    def keys(self, kind: str, index: int | None = None) -> list[tuple]:
        """The total's keys of one kind ("out", "in", "sources", "op", ...); for "out",
        only position ``index`` of each sender's counts."""
        return [k for k in self.total if k[0] == kind and (index is None or k[2] == index)]

    def rate(self, key: tuple) -> float:
        if self.dt <= 0 or key not in self.prev_total:
            return 0.0
        return max(0.0, (self.total.get(key, 0.0) - self.prev_total[key]) / self.dt)

    def get(self, key: tuple) -> float:
        return self.total.get(key, 0.0)


class Collector:
    """The driver's PULL socket for live metrics and the thread that reads it."""

    def __init__(self, deploy: Deployment, local: bool, *, extras: Callable[[], dict] | None = None) -> None:
        from spadeopt.runtime.checkpoint_channel import new_token
        from spadeopt.runtime.security import driver_server

        self.deploy = deploy
        self.token = new_token()
        self.extras = extras or dict  # the driver's own: {"checkpoints": {...}, "restarts": n}
        self.status = "starting"
        self.started = time.time()
        self.rejected = 0
        self.pes = {p.pe: _PE() for p in deploy.pes}
        self._lock = threading.Lock()
        self.sock, self.server_key, self.endpoint = driver_server(zmq.PULL, local, MAX_RECORD)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="live-metrics")
        self._thread.start()

    def channel(self) -> dict[str, str]:
        """What a PE needs to report (travels in the task closure and the PE's stdin only)."""
        return {"endpoint": self.endpoint, "server_key": self.server_key, "token": self.token}

    def _loop(self) -> None:
        while not self._stop.is_set():
            if not self.sock.poll(200):
                continue
            data = self.sock.recv()
            try:
                rec = control.decode(data, control.PEMetrics)
            except control.ControlError:
                self.rejected += 1
                continue
            if not hmac.compare_digest(rec.token, self.token) or rec.pe not in self.pes:
                self.rejected += 1
                continue
            with self._lock:
                self.pes[rec.pe].take(rec)
                if self.status == "starting":
                    self.status = "running"

    def finished(self, status: str) -> None:
        """The run ended (``done`` or ``failed``): the state says so from now on."""
        self.status = status

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2.0)
        self.sock.close()

    def wait_final(self, timeout: float) -> bool:
        """Wait until every PE's final record came (or ``timeout`` s): the run's last counts."""
        end = time.time() + timeout
        while time.time() < end:
            with self._lock:
                if all(p.final for p in self.pes.values()):
                    return True
            time.sleep(0.02)
        return False

    def state(self) -> dict[str, Any]:
        """The job state (docs/metrics.md): every PE, operator, link, source and sink,
        latency, checkpoints, restarts, the bottleneck."""
        with self._lock:
            return job_state(self)


class Live:
    """A run's live metrics: the collector and the server that shows it (``spadeopt.live``)."""

    def __init__(self, collector: Collector, server: Any, linger: float = 0.0) -> None:
        self.collector, self.server, self.linger = collector, server, linger

    def channel(self) -> dict[str, str]:
        return self.collector.channel()

    def end(self, status: str, wait: float = 3.0) -> dict[str, Any]:
        """The run ended: wait (up to ``wait`` s) for every PE's final record after a
        success; the job state from now on says ``status``. Returns that last state."""
        if status == "done":
            self.collector.wait_final(wait)
        self.collector.finished(status)
        return self.collector.state()

    def close(self) -> None:
        if self.server is not None:
            if self.linger:  # a viewer (run --live) polls once a second: let it see the end
                time.sleep(self.linger)
            self.server.close()
        self.collector.close()


def _serve(collector: Collector, layout: dict, options: Any) -> Any:
    """The server on ``options``' address. A fixed port still held by this process's
    previous run (its server lingers ``LINGER_S`` for a viewer: ``run --adaptive``'s
    phase 1 before phase 2) is waited for, up to that long."""
    import errno

    from spadeopt.live.server import serve

    give_up = time.monotonic() + LINGER_S + 0.5
    while True:
        try:
            return serve(collector.state, layout, host=options.metrics_host, port=options.metrics_port)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE or not options.metrics_port or time.monotonic() > give_up:
                raise
            time.sleep(0.1)


def start(deploy: Deployment, local: bool, build_dir: Any, options: Any) -> Live | None:
    """Live metrics for a run whose ``options.metrics_port`` is set (None: off): the
    collector, and the server on ``options.metrics_host`` (``spadeopt.live.server``; its
    URL is said, with the token a non-loopback address needs)."""
    if options.metrics_port is None:
        return None
    from spadeopt.plan.picture import plan_layout

    collector = Collector(deploy, local, extras=options.live_extras)
    try:
        server = _serve(collector, plan_layout(build_dir), options)
    except OSError as exc:
        collector.close()
        raise UsageError(f"cannot serve the live metrics on {options.metrics_host}:{options.metrics_port} "
                         f"({exc.strerror or exc}): choose another --metrics-port (0: a free one) or "
                         f"--metrics-host, or run with --no-metrics") from None
    except BaseException:
        collector.close()
        raise
    shown = f"{server.url}?token={server.token}" if server.token else server.url
    options.say(f"live metrics: {shown} (the job's page; Prometheus scrapes {server.url}metrics)")
    if options.on_live is not None:
        options.on_live(server)
    return Live(collector, server, linger=LINGER_S if options.on_live is not None else 0.0)
