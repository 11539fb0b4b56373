"""Orders and fills from two feeds, joined per account in a parallel region entered by
both streams (issue 27, item 4).

``desk`` = [order, fill, match, flag]: a filter on each feed (per-key pipelines), a
keyed join of each fill with the account's orders of the last ``window`` ms, and a
per-account count window over the matches after it; both feeds enter the region, each
through its own split (the same hash of ``acct``). Event times are in ms and many
orders and fills share one (they tie), so the join's left-first tie rule decides the
order of the matches at width 1, and the region keeps it at every width.
"""

from __future__ import annotations

import random

from spadeopt import App, app, count_window, time_window


def feed(n: int, accounts: int, seed: int, step: int = 3):
    """``(acct, ts, qty, px)``: event time in ms, ascending by 0..``step`` (many ties)."""
    r = random.Random(seed)
    ts = 0
    for _ in range(n):
        ts += r.randrange(0, step + 1)
        yield (r.randrange(accounts), ts, r.randrange(1, 500), round(r.uniform(10, 20), 2))


@app
def orders_fills(tuples: int = 10_000, accounts: int = 40, window: int = 30, width: int = 2) -> App:
    a = App("orders_fills")
    schema = "acct:int, ts:int, qty:int, px:float"
    orders = a.source("orders", schema, generator=feed, args={"n": tuples, "accounts": accounts, "seed": 1})
    fills = a.source("fills", schema, generator=feed, args={"n": tuples, "accounts": accounts, "seed": 2})
    o = a.functor("order", orders, filter="qty >= 20")
    f = a.functor("fill", fills, filter="px < 19.5",
                  output={"acct": "acct", "ts": "ts", "qty": "qty", "px": "px", "notional:float": "qty * px"})
    m = a.join("match", o, f, on="acct", order="ts", window=(time_window("ts", window), count_window(0)),
               output={"acct": "left.acct", "ts": "right.ts", "ordered": "left.qty", "filled": "right.qty",
                       "slip:float": "round(right.px - left.px, 2)", "notional": "notional"})
    g = a.aggregate("flag", m, window=count_window(3), by=["acct"],
                    output={"acct": "acct", "ts": "last(ts)", "n": "count()", "slip:float": "sum(slip)",
                            "notional:float": "sum(notional)"})
    a.sink("matches", g, mode="file")
    a.parallel("order", "fill", "match", "flag", width=width, name="desk")
    return a


app = orders_fills
