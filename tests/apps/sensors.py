"""Sensor readings, smoothed per sensor, in tumbling event-time windows per sensor, with
an alert per sensor when a window's mean jumps: parallel regions holding keyed custom
operators and a keyed event-time window (issue 27, items 2 and 3).

``clean`` = [smooth] (a custom operator partitioned on ``sensor``);
``watch`` = [win, alert] (a keyed tumbling event-time window, then a custom operator
partitioned on ``sensor``, with ``on_final``). Readings arrive in event-time order with some late
(``late`` per mille): the window drops those at every width exactly as at width 1, and
counts them; ``lateness`` is its allowed lateness (ms), ``late_port=1`` sends the late
readings to sink ``late`` (unordered, in region ``watch``; issue 40).
"""

from __future__ import annotations

import random

from spadeopt import App, app, time_window


def readings(n: int, sensors: int, late: int, seed: int = 27):
    """``(sensor, ts, value)``: event time in ms, ascending by 0-40 ms steps; ``late``
    per mille of the readings are up to 3 s older than the stream."""
    r = random.Random(seed)
    ts = 0
    level = [r.uniform(10, 30) for _ in range(sensors)]
    for _ in range(n):
        ts += r.randrange(0, 41)
        s = r.randrange(sensors)
        level[s] += r.gauss(0, 0.5)
        at = ts - r.randrange(1, 3000) if r.randrange(1000) < late else ts
        yield (s, at, round(level[s] + r.gauss(0, 2), 3))


class Smooth:
    """Per sensor: an exponential moving average of the value; readings more than 5 from
    it are dropped as spikes (after 3 readings)."""

    def __init__(self, alpha: float = 0.3) -> None:
        self.alpha = alpha
        self.state: dict[int, list] = {}

    def process(self, port, tup, submit):
        s, ts, v = tup
        st = self.state.get(s)
        if st is None:
            st = self.state[s] = [v, 0, ts]
        avg, n, _ = st
        if n >= 3 and abs(v - avg) > 5:
            return
        avg = avg + self.alpha * (v - avg)
        st[0], st[1], st[2] = avg, n + 1, max(st[2], ts)
        submit("out", (s, ts, round(avg, 6)))


class Alert:
    """Per sensor: every window row, with how far its mean moved from the sensor's
    previous window and whether that is more than ``jump`` (an alert); at end of stream,
    per sensor, the number of alerts (``start`` -1)."""

    def __init__(self, jump: float = 1.5) -> None:
        self.jump = jump
        self.prev: dict[int, float] = {}
        self.alerts: dict[int, int] = {}

    def process(self, port, tup, submit):
        s, start, mean, n = tup
        before = self.prev.get(s)
        self.prev[s] = mean
        self.alerts.setdefault(s, 0)
        moved = 0.0 if before is None else round(mean - before, 6)
        alert = abs(moved) > self.jump
        self.alerts[s] += alert
        submit("out", (s, start, mean, n, moved, alert))

    def on_final(self, submit):
        for s, k in self.alerts.items():
            submit("out", (s, -1, 0.0, k, 0.0, False))


@app
def sensors(tuples: int = 20_000, sensors: int = 24, late: int = 20, window: int = 1000,
            width: int = 2, slide: int = 0, lateness: int = 0, late_port: int = 0) -> App:
    a = App("sensors")
    src = a.source("readings", "sensor:int, ts:int, value:float", generator=readings,
                   args={"n": tuples, "sensors": sensors, "late": late})
    sm = a.custom("smooth", Smooth, inputs={"in": src}, outputs={"out": "sensor:int, ts:int, value:float"},
                  state="partitioned", key=["sensor"])
    win = a.aggregate("win", sm["out"], window=time_window("ts", window, slide=slide or None,
                                                           allowed_lateness=lateness), by=["sensor"],
                      output={"sensor": "sensor", "start": "wstart()", "mean:float": "avg(value)",
                              "n": "count()"}, late=bool(late_port))
    if late_port:
        win, late = win
        a.sink("late", late, mode="unordered")
    al = a.custom("alert", Alert, inputs={"in": win},
                  outputs={"out": "sensor:int, start:int, mean:float, n:int, moved:float, alert:bool"},
                  state="partitioned", key=["sensor"])
    a.sink("windows", al["out"])
    a.parallel("smooth", width=width, name="clean")
    a.parallel("win", "alert", *(["late"] if late_port else []), width=width, name="watch")
    return a


app = sensors
