"""Issue 14's static-run workload: trades (id, price, symbol, volume, ts) through ``n``
functors that each add ``notional = price * volume``, into a counting sink.

``opaque=1``: each functor calls the Python function ``notional_of`` instead (an opaque
call collapsing keeps as a call); ``opaque=0``: the expression, which collapses.
"""

from __future__ import annotations

from spadeopt import App, app

SCHEMA = "id:int, price:float, symbol:str, volume:float, ts:int"
SYMBOLS = tuple(f"S{i:03d}" for i in range(50))


def trades(n: int):
    """Deterministic trades; cheap to generate, so the operators dominate."""
    syms = SYMBOLS
    for i in range(n):
        yield (i, 10.0 + (i % 97) * 0.25, syms[i % 50], float(i % 13 + 1), 1_000_000 + i)


def notional_of(price: float, volume: float) -> float:
    return price * volume


@app
def notional(n: int = 16, tuples: int = 1_000_000, opaque: int = 0, sink: str = "count") -> App:
    a = App("notional")
    s = a.source("src", SCHEMA, generator=trades, args={"n": tuples})
    expr = "notional_of(price, volume)" if opaque else "price * volume"
    fns = [notional_of] if opaque else []
    for i in range(n):
        out = {"id": "id", "price": "price", "symbol": "symbol", "volume": "volume", "ts": "ts",
               "notional:float": expr}
        s = a.functor(f"f{i}", s, output=out, functions=fns)
    a.sink("sink", s, mode=sink)
    return a


app = notional
