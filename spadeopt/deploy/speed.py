"""How fast this machine runs Python while a job runs: a reference loop, timed often.

A shared VM runs the same code at very different speeds from one second to the next.
On the 2-core development VM one 300,000-iteration dict loop took 29-57 ms of *thread
CPU time*, bimodal, pinned to either core and with nothing else running
(docs/decisions.md, "The machine's speed beside every run"). A throughput predicted
from a probe made in one minute and measured in another differs by that much before
any model error. So every node's agent times :func:`reference_ns` every
``SpeedMeter.period`` seconds while its PEs run (a few ms per period: ~1 % of a core),
and a run reports the median: ``compare`` divides a plan's prediction by how much
slower the machine was during the run than during the production probe, beside the
raw ratio, so the two kinds of error can be told apart.

>>> import time
>>> meter = SpeedMeter(period=0.01).start()
>>> time.sleep(0.05)
>>> samples = meter.stop()
>>> len(samples) >= 2 and all(s > 0 for s in samples)
True
"""

from __future__ import annotations

import statistics
import threading
import time

REFERENCE_ITERATIONS = 20_000
"""Iterations of the reference loop: ~2-4 ms of one core on the development VM."""


def reference_ns(iterations: int = REFERENCE_ITERATIONS) -> int:
    """Thread CPU ns of a fixed pure-Python loop (dict stores, integer arithmetic: the
    interpreter work operators do). Larger is slower. Thread CPU, so time the thread
    waited for a core or the GIL does not count: only the speed of the CPU it got."""
    d: dict[int, int] = {}
    t0 = time.thread_time_ns()
    for i in range(iterations):
        d[i & 1023] = (i * 7) % 13
    return time.thread_time_ns() - t0


class SpeedMeter:
    """Times :func:`reference_ns` in a daemon thread every ``period`` seconds until
    ``stop``, which returns the samples (ns each)."""

    def __init__(self, period: float = 0.5) -> None:
        self.period = period
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="speed-meter")

    def start(self) -> SpeedMeter:
        self._thread.start()
        return self

    def _run(self) -> None:
        while True:  # one sample at once, so that even a short run has one
            self.samples.append(reference_ns())
            if self._stop.wait(self.period):
                return

    def stop(self) -> list[int]:
        self._stop.set()
        self._thread.join()
        return list(self.samples)


def median_ns(samples: list[float]) -> float:
    """The median of ``samples``, 0.0 for none (a run too short for one sample)."""
    return float(statistics.median(samples)) if samples else 0.0
