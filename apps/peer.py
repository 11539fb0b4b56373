"""The common peer workload: records through a chain of functors, counting sink.

``tuples`` records ``(id:int, price:float, symbol:str, volume:float, ts:int)`` (seeded
per split of ``split`` records, so the source is splittable) pass through ``n``
functors that each (re)compute ``notional = price * volume``, into a counting sink (or
a file sink with ``sink="file"``). The source and the whole chain are declared as one
parallel region ``chain`` of ``width`` channels, as the data-parallel peers (Bytewax,
one input partition per worker) run it: each channel reads its own splits and runs the
chain, and the merge takes whole splits back in turn (stateless and static-rate: no
split operator, no sequence number), so the answer is the width-1 answer. With the
default counting sink the sink is in the region too: each channel counts and the run
reports the sum, with no merge at all. FMAN: each channel one PE (source, functors and
a counting sink), a file sink with the merge in one PE; at width 1 the source and the
functors are one PE each.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from spadeopt import App, app
from spadeopt.toolkit.sources import splittable

SCHEMA = "id:int, price:float, symbol:str, volume:float, ts:int"
TS0 = 1_700_000_000_000


@splittable("split")
def records(n: int, symbols: int = 100, seed: int = 1, split: int = 4096, *, part: int = 0,
            parts: int = 1) -> Iterator[list]:
    """Splits ``part, part + parts, ...`` of ``n`` seeded records ``(id, price, symbol, volume, ts)``,
    ``split`` records each; every split is seeded on its own, so any channel can make it."""
    syms = [f"S{i:03d}" for i in range(symbols)]
    for s in range(part, -(-n // split), parts):
        rand = random.Random(seed * 1_000_003 + s).random
        yield [(i, round(10.0 + 90.0 * rand(), 2), syms[int(rand() * symbols)], round(1.0 + 999.0 * rand(), 1),
                TS0 + i + 1) for i in range(s * split, min(n, (s + 1) * split))]


@app
def peer(tuples: int = 1_000_000, n: int = 16, width: int = 1, symbols: int = 100, sink: str = "count",
         split: int = 4096) -> App:
    a = App("peer")
    s = a.source("src", SCHEMA, generator=records, args={"n": tuples, "symbols": symbols, "seed": 1, "split": split})
    ops = []
    for i in range(n):
        s = a.functor(f"f{i}", s, output={"id": "id", "price": "price", "symbol": "symbol", "volume": "volume",
                                          "ts": "ts", "notional:float": "price * volume"})
        ops.append(f"f{i}")
    a.sink("sink", s, mode=sink)
    # a counting sink is commutative, so it runs in the region too (each channel counts;
    # the run reports the sum) and the region needs no merge; a file sink keeps the order
    a.parallel("src", *ops, *(["sink"] if sink == "count" else []), width=width, name="chain")
    if len(ops) > 1:
        a.fuse(*ops)
    return a


app = peer
