"""Radio-astronomy outlier detection over a multi-antenna array (paper §6.4).

After the LOFAR/LOIS use case: many small antennas spread over a large area watch the
sky instead of one big dish, and a transient such as a gamma-ray burst shows up as a
short rise of in-band power on *all* antennas at once, while local interference and
noise flukes hit one antenna at a time. The app flags time windows in which at least
``k`` antennas see an outlier.

Data. ``antenna_signal()`` is a seeded synthetic replacement for the LOIS workload
file: ``antennas`` sources, one per antenna, each yielding ``samples`` tuples
``(antenna, ts, value)`` with ``ts`` the sample number. A sample is white Gaussian
noise, scaled and offset by the antenna's own (seeded) gain and DC offset, quantised
to 1/1000. ``bursts`` transients are injected at seeded times shared by all antennas
(``burst_schedule()``): a tone at ``BURST_FREQ`` cycles per sample, in the observing
band, lasting 128-320 samples, 1-2 noise sigmas strong, with a random phase per
antenna. Bursts are rare: one per equal slot of the run (keep ``samples / bursts``
well above ``baseline * window`` so that one burst does not raise the next one's
baseline).

Graph. Each antenna runs a replicated pipeline of 8 operators::

    aN_src     source     raw samples
    aN_calib   functor    x = (value - offset) / gain           (per-antenna calibration)
    aN_fir     custom     ``taps``-tap windowed-sinc band-pass FIR around BURST_FREQ
    aN_power   functor    p = y * y
    aN_stats   aggregate  ``window``-sample tumbling windows: mean and peak power
    aN_base    aggregate  baseline: geometric mean of the window power over the last
                          ``baseline`` windows (robust to the odd burst window)
    aN_match   join       each window probes the baseline of the windows before it
    aN_detect  functor    keep windows whose power exceeds ``threshold`` x baseline
                          (once the baseline spans ``baseline / 2`` windows)

The per-antenna detections are merged by window time into the ``detections`` sink and
into a coincidence aggregate counting, per window, how many antennas fired (and which:
``mask`` has bit ``a`` set for antenna ``a``); windows where at least ``k`` fired go to
the ``events`` sink. Default size: 6 antennas, 6 * 8 + 5 = 53 operators.

Manual fusion (FMAN), the natural hand layout: each antenna's pipeline, source
included, is one PE (the station's processing), placed on nodes round-robin over
``nodes`` (default 1; pass at least that many ``--nodes`` at run time); the merge,
coincidence logic and both sinks form one central PE on node 0: ``antennas + 1`` PEs.
"""

from __future__ import annotations

import math
import operator
import random
from collections import deque
from collections.abc import Iterator

from spadeopt import App, app, count_window, time_window

BURST_FREQ = 0.2  # cycles per sample: the centre of the observing band
BAND = 0.03  # half-width of the band-pass filter, cycles per sample


def _rng(seed: int, stream: int) -> random.Random:
    """An independent seeded generator per (seed, stream); no string hashing."""
    return random.Random(seed * 1_000_003 + stream)


def calibration(antenna: int, seed: int) -> tuple[float, float]:
    """The antenna's (DC offset, gain), as measured by a (pretend) calibration run."""
    rng = _rng(seed, 1000 + antenna)
    return round(rng.uniform(-5.0, 5.0), 3), round(rng.uniform(0.5, 2.0), 3)


def burst_schedule(samples: int, seed: int, bursts: int) -> list[tuple[int, int, float]]:
    """The injected transients as ``(first_sample, end_sample, amplitude)``, shared by
    every antenna: one per equal slot of the run, after a warm-up of 1/8 of it."""
    rng = _rng(seed, 0)
    warmup = samples // 8
    slot = (samples - warmup) // max(1, bursts)
    out = []
    for b in range(bursts):
        length = rng.randint(128, 320)
        if slot <= length:
            break
        start = warmup + b * slot + rng.randrange(slot - length)
        out.append((start, start + length, round(rng.uniform(1.0, 2.0), 3)))
    return out


def antenna_signal(antenna: int, samples: int, seed: int, bursts: int) -> Iterator[tuple]:
    """``samples`` raw samples ``(antenna, ts, value)`` of one antenna, in time order."""
    offset, gain = calibration(antenna, seed)
    rng = _rng(seed, 1 + antenna)
    gauss = rng.gauss
    schedule = burst_schedule(samples, seed, bursts)
    phases = [rng.uniform(0.0, 2 * math.pi) for _ in schedule]
    w = 2 * math.pi * BURST_FREQ
    pos = 0
    for (start, end, amp), phase in zip(schedule, phases, strict=True):
        for ts in range(pos, start):
            yield (antenna, ts, round(offset + gain * gauss(0.0, 1.0), 3))
        for ts in range(start, end):
            x = gauss(0.0, 1.0) + amp * math.sin(w * ts + phase)
            yield (antenna, ts, round(offset + gain * x, 3))
        pos = end
    for ts in range(pos, samples):
        yield (antenna, ts, round(offset + gain * gauss(0.0, 1.0), 3))


def bandpass(taps: int, centre: float = BURST_FREQ, half_width: float = BAND) -> tuple[float, ...]:
    """Hamming-windowed sinc band-pass FIR coefficients, unit gain at ``centre``."""
    lo, hi = centre - half_width, centre + half_width
    mid = (taps - 1) / 2

    def sinc_lp(f: float, m: float) -> float:  # ideal low-pass with cut-off f
        return 2 * f if m == 0 else math.sin(2 * math.pi * f * m) / (math.pi * m)

    h = [(sinc_lp(hi, n - mid) - sinc_lp(lo, n - mid)) * (0.54 - 0.46 * math.cos(2 * math.pi * n / (taps - 1)))
         for n in range(taps)]
    re = sum(c * math.cos(2 * math.pi * centre * n) for n, c in enumerate(h))
    im = sum(c * math.sin(2 * math.pi * centre * n) for n, c in enumerate(h))
    g = math.hypot(re, im)
    return tuple(round(c / g, 12) for c in h)


class Fir:
    """A direct-form FIR filter over attribute ``x``: ``(antenna, ts, x) -> (antenna, ts, y)``.

    The delay line starts zeroed, so the first ``len(taps) - 1`` outputs are a ramp-up.
    """

    def __init__(self, taps: tuple[float, ...]) -> None:
        self.taps = tuple(reversed(taps))  # oldest sample first, matching the delay line
        self.line = deque([0.0] * len(taps), maxlen=len(taps))

    def process(self, port: str, tup: tuple, submit) -> None:
        antenna, ts, x = tup
        line = self.line
        line.append(x)
        submit("out", (antenna, ts, sum(map(operator.mul, self.taps, line))))

    def snapshot(self) -> list[float]:
        """The delay line, for checkpoints (and so for ``run --adaptive``)."""
        return list(self.line)

    def restore(self, state: list[float]) -> None:
        self.line = deque(state, maxlen=len(self.taps))


@app
def outlier(antennas: int = 6, samples: int = 15_000, seed: int = 11, bursts: int = 5,
            taps: int = 31, window: int = 64, baseline: int = 32, threshold: float = 3.0,
            k: int = 3, nodes: int = 1) -> App:
    a = App("outlier")
    coeffs = bandpass(taps)
    detections, pipelines = [], []
    for i in range(antennas):
        n = f"a{i}"
        offset, gain = calibration(i, seed)
        s = a.source(f"{n}_src", "antenna:int, ts:int, value:float", generator=antenna_signal,
                     args={"antenna": i, "samples": samples, "seed": seed, "bursts": bursts})
        c = a.functor(f"{n}_calib", s, output={"antenna": "antenna", "ts": "ts",
                                                "x:float": f"(value - {offset!r}) / {gain!r}"})
        y = a.custom(f"{n}_fir", Fir, inputs={"in": c}, outputs={"out": "antenna:int, ts:int, y:float"},
                     args={"taps": coeffs})["out"]
        p = a.functor(f"{n}_power", y, output={"antenna": "antenna", "ts": "ts", "p:float": "y * y"})
        st = a.aggregate(f"{n}_stats", p, window=time_window("ts", window), by=["antenna"],
                         output={"antenna": "antenna", "wstart": "wstart()", "wend": "wend()",
                                 "pw": "avg(p)", "peak": "max(p)"})
        b = a.aggregate(f"{n}_base", st, window=count_window(baseline, 1), by=["antenna"],
                        output={"antenna": "antenna", "wend": "last(wend)",
                                "lmu:float": "avg(math.log(pw + 1e-12))", "n": "count()"})
        m = a.join(f"{n}_match", st, b, on="antenna", order="wend",
                   window=(count_window(0), count_window(1)),
                   output={"antenna": "left.antenna", "wstart": "wstart", "wend": "left.wend",
                           "pw": "pw", "peak": "peak", "mu:float": "math.exp(lmu)", "n": "n"})
        d = a.functor(f"{n}_detect", m, filter=f"n >= {max(1, baseline // 2)} and pw > {threshold!r} * mu",
                      output={"antenna": "antenna", "wstart": "wstart", "wend": "wend",
                              "score:float": "round(pw / mu, 3)", "peak:float": "round(peak, 3)"})
        detections.append(d)
        pipelines.append([f"{n}_{op}" for op in ("src", "calib", "fir", "power", "stats", "base",
                                                  "match", "detect")])
    merged = a.merge("merge_det", detections, order_by="wend")
    a.sink("detections", merged, mode="file")
    co = a.aggregate("coincide", merged, window=time_window("wstart", window),
                     output={"wstart": "wstart()", "wend": "wend()", "fired": "count()",
                             "mask:int": "sum(1 << antenna)", "score": "max(score)",
                             "mean": "avg(score)"})
    ev = a.functor("confirm", co, filter=f"fired >= {k}",
                   output={"wstart": "wstart", "wend": "wend", "fired": "fired", "mask": "mask",
                           "score": "score", "mean:float": "round(mean, 3)"})
    a.sink("events", ev, mode="file")

    # Manual fusion: one PE per antenna (round-robin over the nodes), one central PE.
    for i, ops in enumerate(pipelines):
        a.fuse(*ops)
        a.place(ops[0], i % nodes)
    a.fuse("merge_det", "detections", "coincide", "confirm", "events")
    a.place("merge_det", 0)
    return a


app = outlier
