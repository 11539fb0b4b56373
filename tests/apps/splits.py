"""Parallel regions led by a splittable source (fission without a split operator).

``case``: ``dynamic`` (a filter makes the region dynamic: sequence numbers stamped by
each source copy), ``static`` (functors only), ``keyed`` (a partitioned aggregate in a
source-led region: refused), ``liar`` (a generator whose splits break the contract: a
short split in the middle of the stream) and ``plain`` (a source that is not splittable
leads the region: refused), ``count`` (the dynamic region ending in a counting sink,
replicated too) and ``count_split`` (the same after a split: no merge either).
"""

from __future__ import annotations

from time import perf_counter

from spadeopt import App, app, count_window
from spadeopt.toolkit.sources import splittable
from tests.toolkit.gens import replay

SCHEMA = "id:int, k:int, v:float"


@splittable("split")
def numbered(n: int, split: int = 7, spin_us: int = 0, *, part: int = 0, parts: int = 1):
    """Splits of ``(i, i % 5, i * 0.5)``: the record is a function of its index. ``spin_us``
    burns that many microseconds of CPU per split (a run long enough to stop mid-way)."""
    for s in range(part, -(-n // split), parts):
        if spin_us:
            end = perf_counter() + spin_us * 1e-6
            while perf_counter() < end:
                pass
        yield [(i, i % 5, i * 0.5) for i in range(s * split, min(n, (s + 1) * split))]


@splittable(4)
def liar(n: int, *, part: int = 0, parts: int = 1):
    """Claims splits of 4 records but makes split 1 of 3."""
    for s in range(part, -(-n // 4), parts):
        hi = s * 4 + (3 if s == 1 else 4)
        yield [(i, i % 5, i * 0.5) for i in range(s * 4, min(n, hi))]


@app
def splits(case: str = "dynamic", tuples: int = 500, split: int = 7, width: int = 1, spin_us: int = 0) -> App:
    a = App("splits")
    if case == "liar":
        s = a.source("src", SCHEMA, generator=liar, args={"n": tuples})
    elif case == "plain":
        s = a.source("src", SCHEMA, generator=replay, args={"rows": [(i, i % 5, i * 0.5) for i in range(tuples)]})
    else:
        s = a.source("src", SCHEMA, generator=numbered,
                     args={"n": tuples, "split": split, **({"spin_us": spin_us} if spin_us else {})})
    if case == "keyed":
        f = a.aggregate("f", s, window=count_window(2), by=["k"], output={"k": "k", "n": "count()"})
    elif case == "static" or case == "liar":
        f = a.functor("f", s, output={"id": "id", "k": "k", "v:float": "v * 2.0"})
    else:  # a filter that drops whole splits' worth of tuples on some channels
        f = a.functor("f", s, filter="k != 3 and (id // 50) % 3 != 1")
    g = a.functor("g", f, output={"id": "id", "w:float": "v + 1.0"} if case != "keyed" else None)
    counting = case in ("count", "count_split")
    a.sink("sink", g, mode="count" if counting else "file")
    if case == "count_split":  # a split-fed region that ends in a counting sink (no merge)
        a.parallel("f", "g", "sink", width=width, name="reg")
    else:
        a.parallel("src", "f", "g", *(["sink"] if counting else []), width=width, name="reg")
    return a


app = splits
