"""Static runs for codegen.collapse: a filtering head, renames, a pure expression read
twice, a division (may raise: bound, never dropped), an opaque function, an identity in
the middle, a fan-out ending a run, and a filter in the middle starting a new run.
``crash`` makes ``calc`` divide by zero at ``id == crash`` (the failure must name it);
``bad`` makes the source yield a 6-tuple at ``id == bad`` (a wrong shape must fail).
``w1 -> w2`` reads one attribute of five three times: it is read once, into a name."""

from __future__ import annotations

from spadeopt import App, app


def trades(n: int, bad: int = -1):
    """(id, price, symbol, volume, ts): deterministic, some zero volumes."""
    for i in range(n):
        t = (i, 10.0 + (i * 7919 % 113) / 4, f"S{i % 7}", float(i * 31 % 17), 1000 + i)
        yield t + (0,) if i == bad else t


def weight(v: float) -> float:
    return v * 0.5 + 1


@app
def collapse(tuples: int = 500, crash: int = -1, bad: int = -1) -> App:
    a = App("collapse")
    s = a.source("src", "id:int, price:float, symbol:str, volume:float, ts:int", generator=trades,
                 args={"n": tuples, "bad": bad})
    c = a.functor("clean", s, filter="volume > 0",
                  output={"id": "id", "p": "price", "sym": "symbol", "v": "volume", "ts": "ts"})
    k = a.functor("calc", c, output={"id": "id", "p": "p", "sym": "sym", "v": "v", "ts": "ts",
                                     "notional:float": "p * v", "half:float": f"p / (id - {crash})",
                                     "sq:float": "p * p", "unused:float": "v * 3 - p",
                                     "mixed:float": "id * p"})
    i = a.functor("ident", k)
    u = a.functor("use", i, output={"id": "id", "sym:str": "sym + '!'", "n2:float": "notional + sq + sq",
                                    "h": "half", "w:float": "weight(v)", "ts": "ts"},
                  functions=[weight])
    t = a.functor("tap", u, output={"id": "id", "sym": "sym", "n2": "n2", "h": "h", "w": "w", "big:bool": "n2 > 500"})
    a.sink("all", t, mode="file")
    a.sink("some", a.functor("b2", t, output={"id": "id", "w2:float": "w * w"}), mode="file")
    f1 = a.functor("f1", s, output={"id": "id", "v": "volume"})
    f2 = a.functor("f2", f1, filter="v > 3", output={"id": "id", "vv:float": "v + v"})
    f3 = a.functor("f3", f2, output={"vv": "vv", "id": "id", "odd:bool": "id % 2 == 1"})
    a.sink("mid", f3, mode="file")
    w1 = a.functor("w1", s, output={"id": "id", "cube:float": "volume * volume * volume"})
    a.sink("cubes", a.functor("w2", w1, output={"cube": "cube", "id": "id"}), mode="file")
    return a


app = collapse
