"""Parallel regions that must be refused, one per ``case`` (see tests/plan/test_regions.py)."""

from __future__ import annotations

from spadeopt import App, app, count_window, time_window
from tests.apps.loop import Tagger
from tests.toolkit.gens import replay

SCHEMA = "id:int, k:int, j:int, v:float, ts:int"
ROWS = [(i, i % 5, i % 3, i * 0.5, i) for i in range(50)]


@app
def bad_regions(case: str = "ok") -> App:
    a = App("bad_regions")
    s = a.source("src", SCHEMA, generator=replay, args={"rows": ROWS})
    if case == "loop":
        t = a.custom("tag", Tagger, inputs={"in": s, "back": "echo.out"},
                     outputs={"out": SCHEMA})
        e = a.functor("echo", t["out"], filter="id < 0")
        a.sink("sink", t["out"], mode="count")
        a.parallel("echo", width=2, name="reg")
        del e
        return a
    if case == "custom":  # a custom operator that declares no state kind is stateful
        c = a.custom("c", Tagger, inputs={"in": s}, outputs={"out": SCHEMA})
        a.sink("sink", c["out"])
        a.parallel("c", width=2, name="reg")
        return a
    f = a.functor("f", s, output={"id": "id", "k:int": "(k + 1) % 5", "j": "j", "v": "v", "ts": "ts"}
                  if case == "drops_key" else None, filter="v > 3" if case == "time_filter" else None)
    if case in ("ok", "drops_key"):
        g = a.aggregate("g", f, window=count_window(2), by=["k"], output={"k": "k", "n": "count()"})
    elif case == "stateful":
        g = a.aggregate("g", f, window=count_window(2), output={"n": "count()"})
    elif case == "disjoint":
        h = a.aggregate("h", f, window=count_window(1), by=["j"],
                        output={"k": "first(k)", "j": "j", "ts": "last(ts)"})
        g = a.aggregate("g", h, window=count_window(2), by=["k"], output={"k": "k", "n": "count()"})
    elif case == "time":  # a sliding event-time window (replicable since 2026-11-26)
        g = a.aggregate("g", f, window=time_window("ts", 10, 5), by=["k"], output={"k": "k", "n": "count()"})
    elif case == "time_filter":  # a filter before a tumbling event-time window (replicable since 2026-11-28)
        g = a.aggregate("g", f, window=time_window("ts", 10), by=["k"], output={"k": "k", "n": "count()"})
    elif case == "time_exit":  # left before an event-time window whose rows are counted inside
        g = a.aggregate("g", f, window=time_window("ts", 10), by=["k"], output={"k": "k", "n": "count()"})
        a.sink("counted", g, mode="count")
        a.sink("sink", f)
        a.parallel("f", "g", "counted", width=2, name="reg")
        return a
    else:
        raise ValueError(case)
    a.sink("sink", g)
    ops = ("f", "h", "g") if case == "disjoint" else ("f", "g")
    a.parallel(*ops, width=2, name="reg")
    return a


app = bad_regions
