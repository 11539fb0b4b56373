"""State dicts (the driver's schema, ``spadeopt.live``) and plan layouts for the live
tests: a full static state, and a provider whose numbers change at every call."""

from __future__ import annotations

import threading
import time
from typing import Any

from spadeopt.plan.picture import PEBox, Picture, layout


def plan() -> dict[str, Any]:
    """The layout JSON of a three-PE, two-node plan with live rows (what /api/plan serves)."""
    pic = Picture("demo", "auto", [[PEBox("pe0", 0, ("src", "f"), 0.4), PEBox("pe1", 0, ("g__1",), 0.2)],
                                   [PEBox("pe2", 1, ("agg", "out"), 0.3)]],
                  [("pe0", "pe1", "1,000/s"), ("pe1", "pe2", "900/s"), ("pe0", "pe2", "100/s")], {})
    return layout(pic, live_lines=3).to_json()


def full_state() -> dict[str, Any]:
    """Every section filled: what a running job with checkpoints and a live source sends."""
    return {
        "app": "demo", "strategy": "auto", "status": "running", "started": 1764330000.0, "now": 1764330012.5,
        "nodes": [{"node": 0, "host": "127.0.0.1"}, {"node": 1, "host": "10.0.0.2"}],
        "pes": [
            {"pe": "pe0", "node": 0, "operators": ["src", "f"], "up": True, "cpu_seconds": 3.2, "cpu": 0.93,
             "busy": 0.9, "idle": 0.05, "backpressure": 0.05, "busy_seconds": 3.0, "idle_seconds": 0.4,
             "backpressure_seconds": 0.3, "tuples_in": 120000, "tuples_out": 118000, "rate_in": 40000.0,
             "rate_out": 39000.0, "queued": 1200, "restarts": 0},
            {"pe": "pe1", "node": 0, "operators": ["g__1"], "up": True, "cpu_seconds": 1.0, "cpu": 0.2,
             "busy": 0.2, "idle": 0.5, "backpressure": 0.3, "busy_seconds": 1.0, "idle_seconds": 2.0,
             "backpressure_seconds": 1.5, "tuples_in": 118000, "tuples_out": 117000, "rate_in": 39000.0,
             "rate_out": 38000.0, "queued": 0, "restarts": 1},
            {"pe": "pe2", "node": 1, "operators": ["agg", "out"], "up": False, "cpu_seconds": 0.5, "cpu": 0.1,
             "busy": 0.1, "idle": 0.9, "backpressure": 0.0, "busy_seconds": 0.5, "idle_seconds": 4.0,
             "backpressure_seconds": 0.0, "tuples_in": 117000, "tuples_out": 500, "rate_in": 38000.0,
             "rate_out": 160.0, "queued": 7, "restarts": 2}],
        "operators": [{"operator": "f", "pe": "pe0", "tuples_in": 120000, "tuples_out": 118000,
                       "rate_in": 40000.0, "rate_out": 39000.0, "counters": {}},
                      {"operator": "agg", "pe": "pe2", "tuples_in": 117000, "tuples_out": 500,
                       "rate_in": 38000.0, "rate_out": 160.0, "counters": {"late": 12}}],
        "links": [{"link": "pe0>pe1", "from_pe": "pe0", "to_pe": "pe1", "port": "f.out", "tuples": 118000,
                   "bytes": 3400000, "rate": 39000.0, "bytes_rate": 1.1e6},
                  {"link": "pe1>pe2", "from_pe": "pe1", "to_pe": "pe2", "port": "g__1.out", "tuples": 117000,
                   "bytes": 3300000, "rate": 38000.0, "bytes_rate": 1.0e6}],
        "sources": [{"source": "src", "pe": "pe0", "tuples": 120000, "rate": 40000.0, "lag": 345, "live": True},
                    {"source": "side", "pe": "pe0", "tuples": 10, "rate": 1.0, "lag": None, "live": False}],
        "sinks": [{"sink": "out", "tuples": 500, "rate": 160.0}],
        "latency": {"count": 40, "sum_ms": 180.0,
                    "buckets_ms": [[1, 3], [2.5, 10], [5, 30], [10, 38], [25, 40], ["+Inf", 40]],
                    "p50_ms": 4.1, "p99_ms": 12.0},
        "checkpoints": {"taken": 3, "last_id": 3, "last_duration_s": 0.4, "last_bytes": 20480, "age_s": 1.2,
                        "duration_seconds_total": 1.1, "bytes_total": 61440},
        "adaptive": {"phase": 2, "plan": "auto, 3 PE(s), widths {'keyed': 2}",
                     "switch": "switched at checkpoint 4 from all (1 PE(s), 52,000 tuples/s measured)",
                     "why": "FATM is predicted at 99,000/s, FALL at 50,000/s (1.98x)", "checkpoint": 4,
                     "predicted": {"start": 50000.0, "fatm": 99000.0}},
        "restarts": 1, "bottleneck": "pe0"}


class Changing:
    """A state provider whose numbers change at every call (the driver's change every
    second): PE i's rate_in is 10,000 * (i + 1) + 100 * call, its CPU 0.1 * i + 0.01 * call.
    ``served`` keeps every state handed out."""

    def __init__(self, status: str = "running", then: list[str] | None = None) -> None:
        self.calls = 0
        self.served: list[dict[str, Any]] = []
        self._status, self._then = status, list(then or [])
        self._lock = threading.Lock()

    def __call__(self) -> dict[str, Any]:
        with self._lock:
            self.calls += 1
            n = self.calls
            status = self._then.pop(0) if self._then else self._status
            s = full_state()
            s["status"], s["now"] = status, s["started"] + n
            for i, p in enumerate(s["pes"]):
                p.update(rate_in=10_000.0 * (i + 1) + 100.0 * n, rate_out=9_000.0 * (i + 1) + 100.0 * n,
                         cpu=0.1 * i + 0.01 * n, busy=min(1.0, 0.3 * i + 0.01 * n), queued=100 * i + n)
            s["sources"][0]["rate"] = 40_000.0 + 100.0 * n
            self.served.append(s)
            return s


def wait_until(cond, timeout: float = 10.0) -> bool:
    end = time.time() + timeout
    while time.time() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()
