"""Bargain detection written once, as one logical pipeline partitioned by symbol.

The same computation as ``apps/bargain.py`` (same TAQ feed, same operators, same
parameters) without the 22 hand-built symbol groups: the per-symbol part of the graph
is declared as one parallel region ``symbols`` and spadeopt replicates it (fission)::

    taq -> [type -> trade -> vwin -> vwap ─┐
                 └> quote ───────────────> match -> bargain]  region 'symbols', key sym
        -> bargains (file)
        -> rank -> hot -> hot (file)

The region's operators are stateless or partitioned on ``sym`` (the count-window VWAP
and the join are per symbol) and forward ``sym`` unchanged, so a hash of ``sym`` at the
split puts each symbol's state in one channel; the merge restores the exact order of
the unreplicated stream. ``rank`` closes event-time windows on any symbol's tuple, so it
stays outside the region (it is cheap: it only sees bargains).

Answers: the ``bargains`` sink is line for line the one of ``apps/bargain.py``; the
``hot`` sink holds the same rows (``grp`` is the symbol's group in ``bargain``, computed
the same way), ordered by window end and first bargain instead of by group. Every width
gives byte-identical output.

FMAN: the feed (source and split) in one PE, each channel one PE, the merge, ranking
and both sinks in one PE: ``width + 2`` PEs (default width 2).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from zlib import crc32

from spadeopt import App, app, count_window, time_window
from spadeopt.runtime.loader import load_module

# apps/bargain.py by path (as spadeopt loads apps), whatever else is called 'apps'
_bargain = load_module(str(Path(__file__).with_name("bargain.py")))
TAQ_SCHEMA: str = _bargain.TAQ_SCHEMA


def taq(**args) -> Iterator[tuple]:
    """The TAQ feed of ``apps/bargain.py`` (same records for the same arguments)."""
    return _bargain.taq(**args)


def group_of(sym: str, groups: int) -> int:
    """The symbol group ``apps/bargain.py``'s ``route`` split sends ``sym`` to."""
    return crc32(sym.encode()) % groups


@app
def bargain_logical(groups: int = 22, tuples: int = 15_000, symbols: int = 200, seed: int = 7,
                    rate: float = 100.0, vwap_trades: int = 50, min_trades: int = 5,
                    window: float = 30.0, hot: int = 2, width: int = 2) -> App:
    a = App("bargain_logical")
    src = a.source("taq", TAQ_SCHEMA, generator=taq,
                   args={"n": tuples, "symbols": symbols, "seed": seed, "rate": rate})
    trades, quotes = a.split("type", src, predicates=['kind == "T"', 'kind == "Q"'])
    t = a.functor("trade", trades, filter="price > 0 and size > 0",
                  output={"sym": "sym", "ts": "ts", "price": "price", "volume": "size",
                          "pv:float": "price * size"})
    w = a.aggregate("vwin", t, window=count_window(vwap_trades, 1), by=["sym"],
                    output={"sym": "sym", "ts": "last(ts)", "spv:float": "sum(pv)",
                            "sppv:float": "sum(pv * price)", "sv:int": "sum(volume)", "n": "count()"})
    v = a.functor("vwap", w, filter=f"n >= {min_trades}",
                  output={"sym": "sym", "ts": "ts", "vwap:float": "spv / sv",
                          "sd:float": "math.sqrt(max(0.0, sppv / sv - (spv / sv) ** 2))"})
    q = a.functor("quote", quotes, filter="price > 0 and size > 0",
                  output={"sym": "sym", "ts": "ts", "ask": "price", "asksize": "size"})
    m = a.join("match", q, v, on="sym", order="ts", window=(count_window(0), count_window(1)),
               output={"sym": "left.sym", "ts": "left.ts", "ask": "ask", "asksize": "asksize",
                       "vwap": "vwap", "sd": "sd"})
    b = a.functor("bargain", m, filter="ask < vwap",
                  output={"sym": "sym", "ts": "ts", "ask": "ask", "vwap:float": "round(vwap, 4)",
                          "z:float": "round((vwap - ask) / sd, 3) if sd > 0 else 0.0",
                          "index:float": "round((vwap - ask) * asksize, 2)"})
    a.sink("bargains", b, mode="file")
    r = a.aggregate("rank", b, window=time_window("ts", window), by=["sym"],
                    output={"wend": "wend()", "sym": "sym", "bargains": "count()",
                            "value": "sum(index)", "best": "max(index)"})
    h = a.functor("hot", r, filter=f"bargains >= {hot}", functions=[group_of],
                  output={"wend": "wend", "grp:int": f"group_of(sym, {groups})", "sym": "sym",
                          "bargains": "bargains", "value:float": "round(value, 2)", "best": "best"})
    a.sink("hot_sink", h, mode="file")
    a.parallel("type", "trade", "vwin", "vwap", "quote", "match", "bargain", width=width, name="symbols")
    a.fuse("type", "trade", "vwin", "vwap", "quote", "match", "bargain")  # a channel: one PE
    a.fuse("bargains", "rank", "hot", "hot_sink")
    return a


app = bargain_logical
