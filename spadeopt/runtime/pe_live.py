"""A PE's live metrics: what it has done so far, sent to the driver every second.

The driver's collector (``deploy.live_metrics``) binds a ZeroMQ PULL socket (CURVE, a
fresh server key per run) and hands its channel to every PE inside the agent's
``Connect`` (``control.LIVE``: endpoint, server key, the run's token). ``LiveReporter``
is the PE's end: a PUSH socket and a thread that sends a ``control.PEMetrics`` record
every ``INTERVAL`` seconds, and one more, marked ``final``, when the PE has run to its
end. A record holds counts since the PE process started, never deltas, so a record
lost on the way costs nothing but freshness: the send never blocks (a full queue drops
the record), and the operators never wait for the driver.

What it reads costs the operators nothing new per tuple: the counters the runtime keeps
per batch (``transport.Sender``: tuples, bytes, batches, the time blocked on a full
link; ``InputPort.tuples``; the operators' ``tally`` boxes), the sources' and sinks'
counts, the latency markers' histogram (``runtime.latency``), the process's CPU time and
the time its threads waited for input (``PERuntime.idle_s``).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any

import zmq

from spadeopt import control

INTERVAL = 1.0  # s between two records of one PE
FINAL_WAIT_MS = 2_000  # how long the final record may wait for the driver (LINGER)


class LiveReporter:
    """The PE's PUSH socket to the driver's live metrics and the thread that feeds it."""

    def __init__(self, rt: Any, channel: dict[str, str]) -> None:
        from spadeopt.runtime.security import keypair

        self.rt = rt
        self.token = channel["token"]
        self.host = socket.gethostname()
        self.sock = zmq.Context.instance().socket(zmq.PUSH)
        self.sock.setsockopt(zmq.SNDHWM, 4)  # a few records queue while the driver is busy; more are dropped
        self.sock.setsockopt(zmq.LINGER, FINAL_WAIT_MS)
        pub, sec = keypair()
        self.sock.curve_secretkey, self.sock.curve_publickey = sec.encode(), pub.encode()
        self.sock.curve_serverkey = channel["server_key"].encode()
        self.sock.connect(channel["endpoint"])
        self.seq = 0
        self.dropped = 0
        self._t0 = time.time()
        self._c0 = time.process_time()
        self._stop = threading.Event()
        self._lock = threading.Lock()  # the thread and finish() share the socket
        self._thread = threading.Thread(target=self._loop, daemon=True, name="live-metrics")

    def start(self) -> None:
        self._t0, self._c0 = time.time(), time.process_time()
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(INTERVAL):
            self.send(final=False)

    def send(self, final: bool) -> None:
        """One record, now; dropped (counted) when the driver's queue is full."""
        with self._lock:
            self.seq += 1
            try:
                self.sock.send(self.record(final).to_bytes(), zmq.NOBLOCK)
            except zmq.Again:
                self.dropped += 1

    def finish(self) -> None:
        """The final record (after the PE ran to its end); the socket lingers to deliver it."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(INTERVAL + 1.0)
        self.send(final=True)
        self.sock.close()

    def record(self, final: bool) -> control.PEMetrics:
        rt = self.rt
        lat = rt.latency
        return control.PEMetrics(
            pe=rt.pe_id, token=self.token, host=self.host, pid=os.getpid(), seq=self.seq, at=time.time(), final=final,
            cpu_s=time.process_time() - self._c0, wall_s=time.time() - self._t0, idle_s=rt.idle_s,
            ports_out={ref: [s.tuples, s.bytes, s.batches, _blocked(s)] for ref, s in list(rt.senders.items())},
            ports_in={ref: p.tuples for ref, p in list(rt.inputs.items())},
            operators=rt.metrics.tallies(),
            sources={n: v[0] for n, v in list(rt.source_stats.items())},
            sinks=rt.sink_counts(),
            lags={n: (lag if isinstance(lag, int) else None) for n, lag in list(rt.lags.items())},
            counters=rt.metrics.report()["counters"],
            latency=[*lat.buckets, lat.sum_ms])


def _blocked(sender: Any) -> float:
    """A sender's time blocked on full links, the wait going on now included."""
    since = sender.blocked_since
    return sender.blocked_s + (time.perf_counter() - since if since is not None else 0.0)
