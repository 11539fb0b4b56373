"""Financial bargain detection over a trade-and-quote (TAQ) stream (paper §6.5).

After Andrade, Gedik, Wu and Yu, "Scale-up strategies for processing high-rate data
streams in System S" (ICDE 2009): a volume-weighted average price (VWAP) is computed
per symbol from recent trades, and every incoming quote is compared with it. A quote
asking less than the symbol's VWAP is a *bargain*; its bargain index
``(vwap - ask) * asksize`` says how much money the discount is worth.

Data. ``taq()`` is a seeded synthetic replacement for a day of NYSE TAQ data: one
time-ordered stream of ``tuples`` records ``(sym, ts, kind, price, size)`` over
``symbols`` tickers, ``kind`` ``"T"`` for a trade (``price``, ``volume``) or ``"Q"``
for a quote (ask price, ask size). Event time ``ts`` is seconds since midnight,
starting at the 9:30 open and strictly increasing (``rate`` records per second on
average). Symbol activity is skewed (Zipf-like), each symbol's mid price is a
geometric random walk, trades print around the mid, quotes ask a few basis points
above it, and a small fraction of quotes are aggressive (a real discount). A few bad
ticks (zero price or size) are mixed in for the cleansing filters to drop.

Graph. Like the paper's 200-operator graph, the app scales by *symbol groups*: the
``route`` split hash-partitions the TAQ stream by symbol into ``groups`` replicated
sub-graphs of 9 operators each::

    gNN_type    split      trades / quotes
    gNN_trade   functor    drop bad ticks; pv = price * volume
    gNN_vwin    aggregate  per symbol, sliding over the last ``vwap_trades`` trades:
                           sum(pv), sum(pv * price), sum(volume), count
    gNN_vwap    functor    vwap = sum(pv) / sum(volume) and the volume-weighted price
                           deviation sd, once the window holds >= ``min_trades`` trades
    gNN_quote   functor    drop bad quotes; project ask, asksize
    gNN_match   join       each quote probes its symbol's latest VWAP
    gNN_bargain functor    keep ask < vwap; bargain index, z = (vwap - ask) / sd
    gNN_rank    aggregate  per symbol and ``window``-second tumbling window:
                           bargain count, total and best index
    gNN_hot     functor    keep symbols with >= ``hot`` bargains in the window

Two order-preserving merges collect the groups: every bargain merged by ``ts`` into
the ``bargains`` sink, and every hot symbol merged by window end into the ``hot``
sink. With the defaults (22 groups) that is 22 * 9 + 6 = 204 operators.

Manual fusion (FMAN), what a sensible developer would write: one PE per symbol group
(its 9 operators), placed on nodes round-robin over ``nodes`` (default 1; pass at
least that many ``--nodes`` at run time), plus one I/O PE on node 0 holding the feed
handler (source and router) and the output side (both merges and sinks), next to the
data files: ``groups + 1`` PEs. Sharing one PE also means the feed's PE outlives every
group PE, so it never exits with batches still queued for a group.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
import string
from collections.abc import Iterator

from spadeopt import App, app, count_window, time_window

TAQ_SCHEMA = "sym:str, ts:float, kind:str, price:float, size:int"

OPEN_S = 9.5 * 3600  # 9:30 in seconds since midnight


def _tickers(rng: random.Random, n: int) -> list[str]:
    """``n`` distinct seeded ticker symbols of 2-4 capital letters."""
    seen: set[str] = set()
    out = []
    while len(out) < n:
        sym = "".join(rng.choice(string.ascii_uppercase) for _ in range(rng.randint(2, 4)))
        if sym not in seen:
            seen.add(sym)
            out.append(sym)
    return out


def taq(n: int, symbols: int, seed: int, rate: float = 100.0, trade_share: float = 0.55,
        deal_share: float = 0.02, bad_share: float = 0.005) -> Iterator[tuple]:
    """``n`` seeded TAQ records ``(sym, ts, kind, price, size)`` in event-time order.

    ``trade_share`` of the records are trades, the rest quotes; ``deal_share`` of the
    quotes ask 0.3-1 % below the mid; ``bad_share`` of the records are bad ticks.
    """
    rng = random.Random(seed)
    syms = _tickers(rng, symbols)
    mid = [rng.uniform(10.0, 200.0) for _ in syms]
    vol = [rng.uniform(0.0001, 0.0004) for _ in syms]  # per-record log-price volatility
    half_spread = [rng.uniform(0.0005, 0.0015) for _ in syms]
    weights = [1.0 / (k + 1) ** 0.8 for k in range(symbols)]  # Zipf-like activity
    rng.shuffle(weights)
    cum = list(itertools.accumulate(weights))
    total = cum[-1]
    rand, gauss, expo, exp = rng.random, rng.gauss, rng.expovariate, math.exp
    ts = OPEN_S
    for _ in range(n):
        ts = round(ts + 0.001 + expo(rate), 3)
        s = min(bisect.bisect(cum, rand() * total), symbols - 1)
        mid[s] *= exp(gauss(0.0, vol[s]))
        bad = rand() < bad_share
        if rand() < trade_share:
            price = round(mid[s] * (1.0 + gauss(0.0, half_spread[s] / 2)), 2)
            size = 100 * (1 + int(rand() * 50))
            yield (syms[s], ts, "T", 0.0 if bad else price, size)
        else:
            u = rand()
            markup = half_spread[s] if u >= deal_share else -0.003 - 0.007 * u / deal_share
            ask = round(mid[s] * (1.0 + markup), 2)
            size = 100 * (1 + int(rand() * 20))
            yield (syms[s], ts, "Q", ask, 0 if bad else size)


@app
def bargain(groups: int = 22, tuples: int = 15_000, symbols: int = 200, seed: int = 7,
            rate: float = 100.0, vwap_trades: int = 50, min_trades: int = 5,
            window: float = 30.0, hot: int = 2, nodes: int = 1) -> App:
    a = App("bargain")
    src = a.source("taq", TAQ_SCHEMA, generator=taq,
                   args={"n": tuples, "symbols": symbols, "seed": seed, "rate": rate})
    routed = a.split("route", src, n=groups, by="sym")
    bargains, hots, pipelines = [], [], []
    for i, stream in enumerate(routed):
        g = f"g{i:02d}"
        trades, quotes = a.split(f"{g}_type", stream, predicates=['kind == "T"', 'kind == "Q"'])
        t = a.functor(f"{g}_trade", trades, filter="price > 0 and size > 0",
                      output={"sym": "sym", "ts": "ts", "price": "price", "volume": "size",
                              "pv:float": "price * size"})
        w = a.aggregate(f"{g}_vwin", t, window=count_window(vwap_trades, 1), by=["sym"],
                        output={"sym": "sym", "ts": "last(ts)", "spv:float": "sum(pv)",
                                "sppv:float": "sum(pv * price)", "sv:int": "sum(volume)",
                                "n": "count()"})
        v = a.functor(f"{g}_vwap", w, filter=f"n >= {min_trades}",
                      output={"sym": "sym", "ts": "ts", "vwap:float": "spv / sv",
                              "sd:float": "math.sqrt(max(0.0, sppv / sv - (spv / sv) ** 2))"})
        q = a.functor(f"{g}_quote", quotes, filter="price > 0 and size > 0",
                      output={"sym": "sym", "ts": "ts", "ask": "price", "asksize": "size"})
        m = a.join(f"{g}_match", q, v, on="sym", order="ts",
                   window=(count_window(0), count_window(1)),
                   output={"sym": "left.sym", "ts": "left.ts", "ask": "ask", "asksize": "asksize",
                           "vwap": "vwap", "sd": "sd"})
        b = a.functor(f"{g}_bargain", m, filter="ask < vwap",
                      output={"sym": "sym", "ts": "ts", "ask": "ask",
                              "vwap:float": "round(vwap, 4)",
                              "z:float": "round((vwap - ask) / sd, 3) if sd > 0 else 0.0",
                              "index:float": "round((vwap - ask) * asksize, 2)"})
        r = a.aggregate(f"{g}_rank", b, window=time_window("ts", window), by=["sym"],
                        output={"wend": "wend()", "sym": "sym", "bargains": "count()",
                                "value": "sum(index)", "best": "max(index)"})
        h = a.functor(f"{g}_hot", r, filter=f"bargains >= {hot}",
                      output={"wend": "wend", "grp:int": str(i), "sym": "sym",
                              "bargains": "bargains", "value:float": "round(value, 2)",
                              "best": "best"})
        bargains.append(b)
        hots.append(h)
        pipelines.append([f"{g}_{op}" for op in ("type", "trade", "vwin", "vwap", "quote",
                                                  "match", "bargain", "rank", "hot")])
    a.sink("bargains", a.merge("merge_bargains", bargains, order_by="ts"), mode="file")
    a.sink("hot", a.merge("merge_hot", hots, order_by="wend"), mode="file")

    # Manual fusion: one I/O PE (feed in, results out) on node 0; one PE per symbol group,
    # round-robin over the nodes.
    a.fuse("taq", "route", "merge_bargains", "bargains", "merge_hot", "hot")
    a.place("taq", 0)
    for i, ops in enumerate(pipelines):
        a.fuse(*ops)
        a.place(ops[0], i % nodes)
    return a


app = bargain
