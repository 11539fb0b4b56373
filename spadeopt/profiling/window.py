"""Timing windows: one thread CPU clock read pair for a whole chain of sampled submits.

A thread CPU clock read is a system call (about 0.7-1 us on the machines measured,
against 0.06 us for ``perf_counter_ns``), and a chain of operators that all sample the
same batch would pay two per point. Where no call below a submit can block, the
outermost sampled submit of a thread opens a ``CpuWindow``: it alone reads the thread
CPU clock, around itself; sampled submits nested inside it read only the wall clock and
append their sample to the window's log, and the window records them all when it
closes, with their times scaled by its own ``r = min(1, CPU / wall)``.

Invariants: a window is used by one thread only; codegen opens windows only where
nothing below the submit blocks (``codegen.pe_spec``), which is what makes the scaling
unbiased (``CpuWindow``); a window needs a whole stride (``window_stride``), and with
any other ``s`` it stays closed and every sampled submit records itself.

Cost per nested sample: two wall clock reads, a tuple and an append on the hot path;
the stride and reservoir steps run once, when the window closes.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from spadeopt.profiling.stride import sampling_fraction

if TYPE_CHECKING:
    from spadeopt.profiling.groups import Group
    from spadeopt.profiling.recorder import MetricRecorder

_time = time.time


def window_stride(s: float) -> int:
    """The stride ``1/s`` if it is a whole number (every usual ``s``), else 0.

    Timing windows re-arm nested countdowns inline as ``cd % N or N`` (one sample every
    ``N`` tuples), which is exact only for a whole stride; with any other ``s`` codegen's
    windows stay closed and every sampled submit records itself (``CpuWindow``).

    >>> window_stride(0.001), window_stride(1), window_stride(0.3)
    (1000, 1, 0)
    """
    frac = sampling_fraction(s)
    return frac.denominator if frac.numerator == 1 else 0


class CpuWindow:
    """One thread's timing window: nested samples logged by wall clock, recorded at close.

    Protocol (generated code). A sampled submit that finds
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
    (``codegen.pe_spec``: no send to another PE, no lock, no custom or fission operator);
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
