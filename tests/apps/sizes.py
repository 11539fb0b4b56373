"""Tuples whose sizes differ from one to the next, through functors with and without
filters: profiling tests can tell which tuple a point sampled by its size."""

from __future__ import annotations

from spadeopt import App, app


def words(n: int):
    """(i, text): text of 0..36 characters, varying with i."""
    for i in range(n):
        yield (i, "w" * (i * 7 % 37))


@app
def sizes(tuples: int = 2000) -> App:
    a = App("sizes")
    s = a.source("src", "i:int, text:str", generator=words, args={"n": tuples})
    d = a.functor("double", s, output={"i": "i", "text:str": "text + text[: i % 5]"})
    k = a.functor("keep", d, filter="i % 3 != 0")
    r = a.functor("rename", k, output={"i": "i", "t": "text"})
    a.sink("out", a.functor("grow", r, output={"t:str": "t + str(i)"}), mode="count")
    return a


app = sizes
