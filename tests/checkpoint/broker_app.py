"""A keyed app from a broker stream to broker streams, for exactly-once checkpoints
(issue 29 item 4, ``test_broker_exactly_once``).

Readings ``(k, ts, v)`` are read from one Redis stream key (``count`` records, from
``start``: ``"end"`` reads only what is added after the source opened, as a live feed
does), pass a stateful custom operator that burns ``spin_us`` of CPU every 16 records
(so a run lasts long enough to be killed), then a keyed tumbling event-time window
(means per key) and a keyed running total (every 20th reading of a key): two broker
sinks, ``<out>:means`` and ``<out>:runs``.
"""

from __future__ import annotations

import json
from time import perf_counter

from spadeopt import App, app, time_window
from spadeopt.connectors import redis_sink, redis_source
from tests.apps.ckpt import Running

SCHEMA = "k:str, ts:float, v:int"


def readings(n: int, keys: int = 5, seed: int = 11) -> list[dict]:
    x, out = seed, []
    for i in range(n):
        x = (x * 1103515245 + 12345) % (1 << 31)
        out.append({"k": f"k{x % keys}", "ts": round(i * 0.01, 2), "v": x % 1000})
    return out


def feed(client, key: str, records: list[dict]) -> None:
    pipe = client.pipeline(transaction=False)
    for r in records:
        pipe.xadd(key, {"value": json.dumps(r)})
    pipe.execute()


class Spin:
    """Passes every tuple on; burns ``spin_us`` of CPU every 16 (its state: the count)."""

    def __init__(self, spin_us: int = 0) -> None:
        self.spin_us, self.seen = spin_us, 0

    def process(self, port, t, submit) -> None:
        self.seen += 1
        if self.spin_us and self.seen % 16 == 0:
            end = perf_counter() + self.spin_us * 1e-6
            while perf_counter() < end:
                pass
        submit("out", t)

    def snapshot(self):
        return self.seen

    def restore(self, state) -> None:
        self.seen = state


@app
def brokerck(input: str = "ck:in", out: str = "ck:out", count: int = 2000, start: str = "beginning",
             spin_us: int = 0) -> App:
    a = App("brokerck")
    r = a.source("events", SCHEMA, connector=redis_source(input, count=count, start=start))
    s = a.custom("spin", Spin, inputs={"in": r}, outputs={"out": SCHEMA}, args={"spin_us": spin_us})["out"]
    w = a.aggregate("win", s, window=time_window("ts", 2.0), by=["k"],
                    output={"k": "k", "n": "count()", "tot:int": "sum(v)", "end": "wend()"})
    m = a.functor("avg", w, output={"k": "k", "end": "end", "mean:float": "tot / n"})
    a.sink("means", m, connector=redis_sink(f"{out}:means"))
    run = a.custom("run", Running, inputs={"in": s}, outputs={"out": "k:str, tot:int, n:int"},
                   args={"every": 20})["out"]
    a.sink("runs", run, connector=redis_sink(f"{out}:runs"))
    a.fuse("events", "spin")
    a.fuse("win", "avg", "means")
    a.fuse("run", "runs")
    return a


app = brokerck
