"""When a live feed outgrows the running plan (the sources' lag keeps growing, or a PE
stays above MaxFrac while a core idles), and when the plan outgrows the feed (its PEs idle
while the lag stays flat).

A live source's lag is how many entries its feed holds beyond what it read (a Redis
stream's length past the source's position, ``connectors.redis_streams``); each PE reads
it about once a second and the driver's live metrics carry it (``deploy.live_state``'s
``sources``). A plan that keeps up holds the lag near a batch or two whatever the rate;
a plan that does not sees it climb, second after second, while its sources are
backpressured or its busiest PE saturated. ``LagWatch`` says when: over the last
``window`` seconds of samples, the newest lag is the window's highest and at least
``min_growth`` entries above its oldest. One noisy second cannot trip it (the newest
must top the whole window); a backlog that drains cannot (the newest would not be the
highest); a feed that has stopped cannot (the lag stops climbing).

>>> w = LagWatch(window=3.0, min_growth=100)
>>> [w.add(t, lag) for t, lag in [(0, 5), (1, 8), (2, 4), (3, 6), (4, 60), (5, 130), (6, 260)]]
[False, False, False, False, False, True, True]
>>> w.growth()
(254.0, 260, 3.0)

``IdleWatch`` is the other way round, for scaling down: over the last ``window`` seconds
the busiest PE used less than ``cpu`` cores in every sample and the lag never climbed
``min_growth`` entries above the window's oldest. A plan that keeps up with a feed it
could keep up with on fewer cores looks like that; one draining a backlog does not (its
PEs are busy).

>>> i = IdleWatch(window=2.0, cpu=0.4, min_growth=100)
>>> [i.add(t, lag, cpu, 150.0) for t, lag, cpu in [(0, 9, 0.9), (1, 8, 0.1), (2, 7, 0.1), (3, 8, 0.1)]]
[False, False, True, True]
>>> i.said()
{'busiest_cpu': 0.1, 'rate': 150.0, 'lag': 8, 'over_s': 2.0}

``SaturatedWatch`` is FATM's MaxFrac constraint read off a running plan: over the last
``window`` seconds its busiest PE used at least ``max_frac`` of a core in every sample
(the fraction of a CPU FATM lets one PE plan for, ``optimize.problem.DEFAULT_MAX_FRAC``),
the PEs together left at least ``idle`` cores of the run's unused (a wider plan has room),
and the lag did not fall ``min_growth`` entries below the window's oldest (a plan draining
a backlog is busy by rights). It trips before the lag builds up: the plan keeps up, but
with no headroom, on a machine with cores to spare. It cannot trip on a plan that already
fills the run's cores, so a re-plan that keeps the plan is not asked again and again.

>>> s = SaturatedWatch(cores=2, window=2.0, max_frac=0.5, idle=0.75, min_growth=100)
>>> [s.add(t, lag, cpu, cpu) for t, lag, cpu in [(0, 9, 0.6), (1, 8, 0.7), (2, 7, 0.6), (3, 900, 0.7)]]
[False, False, True, True]
>>> s.add(4, 1, 1.3, 1.3)  # no core idle
False
>>> d = SaturatedWatch(cores=2, window=2.0, max_frac=0.5, idle=0.75, min_growth=100)
>>> [d.add(t, lag, 0.7, 0.7) for t, lag in [(0, 900), (1, 700), (2, 500)]]  # draining a backlog
[False, False, False]
"""

from __future__ import annotations

from collections import deque

WINDOW_S = 4.0  # s of lag samples the rule looks at (a PE reads its sources' lag once a second)
MIN_GROWTH = 500  # entries the lag must climb over the window (a few batches: more than a batch's jitter)


class LagWatch:
    """The lag-growth rule of the module doc, fed one ``(time, lag)`` sample at a time."""

    def __init__(self, window: float = WINDOW_S, min_growth: int = MIN_GROWTH) -> None:
        self.window, self.min_growth = window, min_growth
        self.samples: deque[tuple[float, int]] = deque()

    def add(self, t: float, lag: int) -> bool:
        """Take a sample; True when the lag grew over the last window (the rule above)."""
        self.samples.append((t, lag))
        while len(self.samples) > 2 and self.samples[1][0] <= t - self.window:
            self.samples.popleft()  # keep one sample at or before the window's start
        return self.growing()

    def growing(self) -> bool:
        if len(self.samples) < 2:
            return False
        (t0, first), (t1, last) = self.samples[0], self.samples[-1]
        return t1 - t0 >= self.window and last >= max(lag for _, lag in self.samples) \
            and last - first >= self.min_growth

    def growth(self) -> tuple[float, int, float]:
        """``(newest lag - oldest lag, newest lag, seconds between them)`` of the window."""
        (t0, first), (t1, last) = self.samples[0], self.samples[-1]
        return float(last - first), last, float(t1 - t0)


IDLE_WINDOW_S = 6.0  # s of samples the idle rule looks at (longer than the lag's: scaling down can wait)
IDLE_CPU = 0.4  # cores: the busiest PE used less than this in every sample of the window


class _Window:
    """Readings ``(time, lag, busiest PE's CPU, x)`` over the last ``window`` seconds, one
    before it kept (the window's start); ``add`` takes one and says whether ``holds``."""

    window: float
    min_growth: int

    def __init__(self) -> None:
        self.samples: deque[tuple[float, int, float, float]] = deque()

    def add(self, t: float, lag: int, busiest: float, x: float) -> bool:
        self.samples.append((t, lag, busiest, x))
        while len(self.samples) > 2 and self.samples[1][0] <= t - self.window:
            self.samples.popleft()
        if len(self.samples) < 2 or self.samples[-1][0] - self.samples[0][0] < self.window:
            return False
        first = self.samples[0][1]
        return all(self.holds(lag - first, busy, x) for _, lag, busy, x in list(self.samples)[1:])

    def holds(self, grew: int, busiest: float, x: float) -> bool:
        raise NotImplementedError


class IdleWatch(_Window):
    """The idle rule of the module doc, fed ``(time, lag, busiest PE's CPU, sources' rate)``."""

    def __init__(self, window: float = IDLE_WINDOW_S, cpu: float = IDLE_CPU, min_growth: int = MIN_GROWTH) -> None:
        super().__init__()
        self.window, self.cpu, self.min_growth = window, cpu, min_growth

    def holds(self, grew: int, busiest: float, x: float) -> bool:
        return busiest < self.cpu and grew < self.min_growth

    def said(self) -> dict:
        """The window's busiest CPU, mean sources' rate, newest lag and span (the switch's trigger)."""
        s = list(self.samples)[1:]
        return {"busiest_cpu": round(max(c for _, _, c, _ in s), 3), "rate": round(sum(r for *_, r in s) / len(s), 1),
                "lag": s[-1][1], "over_s": round(float(s[-1][0] - self.samples[0][0]), 3)}


MAX_FRAC_WINDOW_S = 4.0  # s a PE must stay above MaxFrac (as the lag rule's window)
IDLE_CORES = 0.75  # cores the PEs must leave unused for the MaxFrac rule (most of a core: room to widen)


class SaturatedWatch(_Window):
    """The MaxFrac rule of the module doc, fed ``(time, lag, busiest PE's CPU, the PEs' CPU)``."""

    def __init__(self, cores: int, window: float = MAX_FRAC_WINDOW_S, max_frac: float | None = None,
                 idle: float = IDLE_CORES, min_growth: int = MIN_GROWTH) -> None:
        super().__init__()
        if max_frac is None:
            from spadeopt.optimize.problem import DEFAULT_MAX_FRAC as max_frac
        self.cores, self.window, self.max_frac, self.idle, self.min_growth = cores, window, max_frac, idle, min_growth

    def holds(self, grew: int, busiest: float, x: float) -> bool:
        return busiest >= self.max_frac and self.cores - x >= self.idle and -grew < self.min_growth

    def said(self) -> dict:
        """The window's least busiest-PE CPU, most CPU of all PEs, newest lag and span."""
        s = list(self.samples)[1:]
        return {"max_frac": self.max_frac, "busiest_cpu": round(min(b for _, _, b, _ in s), 3),
                "cpu_total": round(max(c for *_, c in s), 3), "lag": s[-1][1],
                "over_s": round(float(s[-1][0] - self.samples[0][0]), 3)}
