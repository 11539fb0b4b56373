"""A keyed-window app for checkpoints (issue 29): two sources merged by time, a keyed
tumbling event-time window, a keyed count window, a stateful custom operator with
``snapshot``/``restore``, file sinks.

``spin_us`` burns that many microseconds of CPU every 64 records a source makes, so a
run lasts long enough to be killed mid-way; ``width`` > 1 makes the windows a parallel
region (keyed on ``k``). ``nosnap=1`` uses a custom operator without ``snapshot``:
the app cannot take checkpoints (refused at build time when they are asked for).
``keyed=1`` declares the custom operator partitioned on ``k`` and, with ``width`` > 1,
puts it in a region of its own (its state is an opaque snapshot per channel copy).
"""

from __future__ import annotations

from time import perf_counter

from spadeopt import App, app, count_window, time_window


def readings(n: int, keys: int, seed: int, spin_us: int = 0):
    x = seed
    for i in range(n):
        x = (x * 1103515245 + 12345) % (1 << 31)
        if spin_us and i % 64 == 0:
            end = perf_counter() + spin_us * 1e-6
            while perf_counter() < end:
                pass
        yield (f"k{x % keys}", i * 0.01, x % 1000)


class Running:
    """Running total per key; emits every ``every``-th tuple of a key."""

    def __init__(self, every: int = 50) -> None:
        self.every = every
        self.tot: dict[str, list[int]] = {}

    def process(self, port, t, submit) -> None:
        k, _ts, v = t
        s = self.tot.setdefault(k, [0, 0])
        s[0] += v
        s[1] += 1
        if s[1] % self.every == 0:
            submit("out", (k, s[0], s[1]))

    def snapshot(self):
        return {k: list(v) for k, v in self.tot.items()}

    def restore(self, state) -> None:
        self.tot = {k: list(v) for k, v in state.items()}


class NoSnap:
    def process(self, port, t, submit) -> None:
        submit("out", (t[0], t[2], 1))


@app
def ckpt(n: int = 60_000, keys: int = 7, spin_us: int = 0, width: int = 1, nosnap: int = 0, keyed: int = 0) -> App:
    a = App("ckpt")
    r = a.source("ra", "k:str, ts:float, v:int", generator=readings, args={"n": n, "keys": keys, "seed": 1,
                                                                            "spin_us": spin_us})
    s = a.source("rb", "k:str, ts:float, v:int", generator=readings, args={"n": n // 2, "keys": keys, "seed": 2,
                                                                            "spin_us": spin_us})
    m = a.merge("both", [r, s], order_by="ts")
    w = a.aggregate("win", m, window=time_window("ts", 5.0), by=["k"],
                    output={"k": "k", "n": "count()", "tot:int": "sum(v)", "end": "wend()"})
    f = a.functor("avg", w, output={"k": "k", "end": "end", "mean:float": "tot / n"})
    a.sink("means", f)
    c = a.aggregate("cnt", m, window=count_window(40), by=["k"], output={"k": "k", "hi": "max(v)", "lo": "min(v)"})
    a.sink("counts", c)
    run = a.custom("run", NoSnap if nosnap else Running, inputs={"in": m},
                   outputs={"out": "k:str, tot:int, n:int"},
                   **({"state": "partitioned", "key": ["k"]} if keyed else {}))["out"]
    a.sink("runs", run)
    if width > 1:
        a.parallel("win", "avg", width=width, name="wins")
        if keyed:  # the custom operator keyed on k, in a region of its own
            a.parallel("run", width=width, name="runs")
    a.fuse("ra", "rb", "both")
    a.fuse("win", "avg", "means")
    return a



@app
def ckregion(n: int = 3000, keys: int = 9, width: int = 2, spin_us: int = 0) -> App:
    """A parallel region whose channels emit all the time (a filter, then a keyed count
    window of 4), so its merge holds reordered tuples whenever one channel is ahead; a
    keyed tumbling event-time window after the merge (part full most of the time)."""
    a = App("ckregion")
    r = a.source("ra", "k:str, ts:float, v:int", generator=readings,
                  args={"n": n, "keys": keys, "seed": 3, **({"spin_us": spin_us} if spin_us else {})})
    f = a.functor("keep", r, filter="v % 3 != 0")
    c = a.aggregate("cnt4", f, window=count_window(4), by=["k"],
                    output={"k": "k", "ts": "max(ts)", "hi": "max(v)", "lo": "min(v)"})
    a.parallel("keep", "cnt4", width=width, name="chans")
    w = a.aggregate("win", c, window=time_window("ts", 3.0), by=["k"],
                    output={"k": "k", "n": "count()", "top": "max(hi)", "end": "wend()"})
    a.sink("means", w)
    a.sink("counts", c)
    return a


def jittered(n: int, keys: int, seed: int, spin_us: int = 0, back: float = 0.4):
    """``readings`` whose every 7th event time goes back by up to ``back`` s: late tuples."""
    x = seed
    for i in range(n):
        x = (x * 1103515245 + 12345) % (1 << 31)
        if spin_us and i % 64 == 0:
            end = perf_counter() + spin_us * 1e-6
            while perf_counter() < end:
                pass
        went = back * (x % 97) / 97 if i % 7 == 0 else 0.0
        yield (f"k{x % keys}", round(i * 0.01 - went, 4), x % 1000)


@app
def cklate(n: int = 3000, keys: int = 6, width: int = 2, spin_us: int = 0) -> App:
    """Late data (issue 40): a keyed tumbling window with an allowed lateness in region
    ``lwins`` (its channels count late tuples), and a keyed window whose late port feeds
    a file sink (width 1); both counters are window state a checkpoint restores."""
    a = App("cklate")
    r = a.source("ra", "k:str, ts:float, v:int", generator=jittered,
                 args={"n": n, "keys": keys, "seed": 5, "spin_us": spin_us})
    w = a.aggregate("win", r, window=time_window("ts", 1.0, allowed_lateness=0.1), by=["k"],
                    output={"k": "k", "n": "count()", "tot:int": "sum(v)", "end": "wend()"})
    a.sink("means", w)
    a.parallel("win", width=width, name="lwins")
    rows, late = a.aggregate("cnt", r, window=time_window("ts", 0.5), by=["k"], late=True,
                             output={"k": "k", "n": "count()", "end": "wend()"})
    a.sink("counts", rows)
    a.sink("late", late)
    return a


@app
def ckslide(n: int = 3000, keys: int = 6, width: int = 2, spin_us: int = 0, lateness: float = 0.0,
            slide: float = 0.5, cwidth: int = 1) -> App:
    """Keyed sliding windows over ``jittered`` readings (every 7th goes back by up to
    1.2 s: out of order, and late past the allowed lateness): ``win``, 1 s every ``slide``
    s (``lateness`` allowed; ``slide=1`` with a lateness: a tumbling window that keeps
    several open), and a functor in region ``swins``; ``cnt``, a keyed sliding count
    window (8 tuples every 3), in region ``scnts`` (``cwidth``)."""
    a = App("ckslide")
    r = a.source("ra", "k:str, ts:float, v:int", generator=jittered,
                 args={"n": n, "keys": keys, "seed": 7, "spin_us": spin_us, "back": 1.2})
    w = a.aggregate("win", r, window=time_window("ts", 1.0, slide, allowed_lateness=lateness), by=["k"],
                    output={"k": "k", "n": "count()", "tot:int": "sum(v)", "first:int": "first(v)",
                            "end": "wend()"})
    f = a.functor("avg", w, output={"k": "k", "end": "end", "n": "n", "first": "first", "mean:float": "tot / n"})
    a.sink("means", f)
    c = a.aggregate("cnt", r, window=count_window(8, 3), by=["k"],
                    output={"k": "k", "hi": "max(v)", "lo": "min(v)", "last:int": "last(v)"})
    a.sink("counts", c)
    a.parallel("win", "avg", width=width, name="swins")
    a.parallel("cnt", width=cwidth, name="scnts")
    return a


app = ckpt
