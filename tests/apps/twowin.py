"""Two sources, a keyed custom smoother on one, a keyed event-time window on each, and a
per-key join of the windows (issue 36, deliverable 2): the app whose author's regions
were refused before watermark frames (docs/decisions/035-watermark-frames-in-regions.md).

Source ``temps`` (per-sensor readings) passes a filter and ``smooth`` (a custom operator
partitioned on ``sensor``) into ``per10``, a tumbling 1 s event-time window per sensor;
source ``loads`` feeds ``per_slide``, a sliding 2 s event-time window per sensor every
1 s; ``pair`` joins the two windows' rows per sensor by window end. Both streams arrive
mostly in event-time order with some late readings (``late`` per mille), which the
windows drop exactly as width 1 does.

``regions``: ``"one"`` declares one region around everything keyed (two entering
streams, a filter and a keyed custom operator before a window, two windows, the join);
``"two"`` declares ``clean`` = [keep, smooth] and ``keyed`` = [per10, per_slide, pair];
``"none"`` declares none (FATM finds its own). ``sink="unordered"``: the order of the
pairs is not part of the answer (``mode="unordered"``), so the sink joins the region
``keyed`` (each channel writes its own pairs, the commit sorts them) and no merge is left.
"""

from __future__ import annotations

from spadeopt import App, app, time_window
from tests.apps.sensors import Smooth, readings


@app
def twowin(n: int = 3000, sensors: int = 7, late: int = 30, width: int = 2, regions: str = "one",
           sink: str = "file") -> App:
    a = App("twowin")
    temps = a.source("temps", "sensor:int, ts:int, v:float", generator=readings,
                     args={"n": n, "sensors": sensors, "late": late, "seed": 36})
    loads = a.source("loads", "sensor:int, ts:int, v:float", generator=readings,
                     args={"n": n, "sensors": sensors, "late": late, "seed": 63})
    keep = a.functor("keep", temps, filter="v > 12")
    smooth = a.custom("smooth", Smooth, inputs={"in": keep}, outputs={"out": "sensor:int, ts:int, v:float"},
                      state="partitioned", key=["sensor"])["out"]
    per10 = a.aggregate("per10", smooth, window=time_window("ts", 1000), by=["sensor"],
                        output={"sensor": "sensor", "wend": "wend()", "n": "count()", "mean:float": "avg(v)"})
    per_slide = a.aggregate("per_slide", loads, window=time_window("ts", 2000, 1000), by=["sensor"],
                            output={"sensor": "sensor", "wend": "wend()", "peak:float": "max(v)",
                                    "m": "count()"})
    pair = a.join("pair", per10, per_slide, on="sensor", order="wend",
                  window=(time_window("wend", 1000), time_window("wend", 1000)),
                  output={"sensor": "left.sensor", "wend": "left.wend", "rwend": "right.wend",
                          "n": "left.n", "mean": "left.mean", "peak": "right.peak", "m": "right.m"})
    a.sink("pairs", pair, mode=sink)
    tail = ("pairs",) if sink == "unordered" else ()
    if regions == "one":
        a.parallel("keep", "smooth", "per10", "per_slide", "pair", *tail, width=width, name="keyed")
    elif regions == "two":
        a.parallel("keep", "smooth", width=width, name="clean")
        a.parallel("per10", "per_slide", "pair", *tail, width=width, name="keyed")
    return a


app = twowin
