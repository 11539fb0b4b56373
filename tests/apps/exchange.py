"""Two parallel regions with different keys, joined by a key exchange (issue 27 item 4,
second part): each channel of the first region sends its tuples straight to the second
region's channels by a hash of the second key, and each of those merges them by number.

``case``:

- ``source``: region ``prep`` is led by the splittable source (each channel reads its own
  splits, numbered by their position), filters and prices trades, stateless; region
  ``desk`` counts per symbol (``sym``) and formats;
- ``keyed``: the source outside, region ``prep`` split by account (``acct``): a filter and
  a per-account count window; region ``desk`` the same per-symbol work;
- ``static``: as ``source`` but ``prep`` is functors only (static-rate), numbered for the
  exchange;
- ``timed``: as ``source``, and ``prep`` stamps an event time ``ts`` out of order by up to
  180 (some trades late for 500-wide windows); region ``desk`` filters, counts per symbol
  in tumbling event-time windows (a window exchange behind the key exchange,
  ``plan.eventtime``) and formats.

``prep`` at ``wprep`` and ``desk`` at ``wdesk`` (FMAN's widths; ``--width`` overrides);
``spin_us`` slows the source (checkpoint kill tests).
"""

from __future__ import annotations

from time import perf_counter

from spadeopt import App, app, count_window, time_window
from spadeopt.toolkit.sources import splittable

SCHEMA = "id:int, acct:int, sym:int, qty:int, px:float"


def trade(i: int, accounts: int, symbols: int) -> tuple:
    """Trade ``i``: a function of its index only, so any split reads it alike."""
    x = (i * 2654435761 + 12345) % 2**32
    return (i, x % accounts, (x >> 7) % symbols, 1 + (x >> 13) % 400, round(10 + (x >> 17) % 1000 / 100, 2))


@splittable("split")
def trades(n: int, accounts: int = 23, symbols: int = 17, split: int = 50, spin_us: int = 0, *, part: int = 0,
           parts: int = 1):
    """Splits of ``split`` trades; this copy's are ``part, part + parts, ...``; ``spin_us``
    burns that much CPU per split (a run long enough to be killed mid-way)."""
    for s in range(part, -(-n // split), parts):
        if spin_us:
            end = perf_counter() + spin_us * 1e-6
            while perf_counter() < end:
                pass
        yield [trade(i, accounts, symbols) for i in range(s * split, min(n, (s + 1) * split))]


@splittable("split")
def rows_in_splits(rows: list, split: int = 5, *, part: int = 0, parts: int = 1):
    """The given rows in splits of ``split`` (for tests with random records)."""
    for s in range(part, -(-len(rows) // split), parts):
        yield [tuple(r) for r in rows[s * split:(s + 1) * split]]


def _timed(a: App, src, wprep: int, wdesk: int, src_name: str) -> None:
    f = a.functor("clean", src, filter="qty > 20 and acct % 7 != 3",
                  output={"id": "id", "sym": "sym", "qty": "qty", "px": "px", "ts:int": "id * 10 - (qty % 7) * 30"})
    hot = a.functor("hot", f, filter="qty % 3 != 0")
    g = a.aggregate("per_sym", hot, window=time_window("ts", 500), by=["sym"],
                    output={"sym": "sym", "id": "last(id)", "wend": "wend()", "n": "count()", "qty:int": "sum(qty)",
                            "notional:float": "sum(px)"})
    a.sink("sink", a.functor("fmt", g, output={"sym": "sym", "id": "id", "wend": "wend", "n": "n",
                                               "notional": "notional", "big:bool": "qty > 800"}), mode="file")
    a.parallel(src_name, "clean", width=wprep, name="prep")
    a.parallel("hot", "per_sym", "fmt", width=wdesk, name="desk")


def build(a: App, src, case: str, wprep: int, wdesk: int, src_name: str) -> None:
    """``prep`` and ``desk`` after ``src`` (module docstring); the sink is ``sink``."""
    if case == "timed":
        _timed(a, src, wprep, wdesk, src_name)
        return
    if case == "keyed":
        f = a.functor("clean", src, filter="qty > 20")
        p = a.aggregate("per_acct", f, window=count_window(3), by=["acct"],
                        output={"id": "last(id)", "acct": "acct", "sym": "last(sym)", "qty:int": "sum(qty)",
                                "px": "last(px)"})
        prep = ("clean", "per_acct")
    elif case == "static":
        p = a.functor("price", src, output={"id": "id", "acct": "acct", "sym": "sym", "qty": "qty",
                                            "px:float": "round(px * 1.01, 2)"})
        prep = ("price",)
    else:
        f = a.functor("clean", src, filter="qty > 20 and acct % 7 != 3")
        p = a.functor("price", f, output={"id": "id", "acct": "acct", "sym": "sym", "qty": "qty",
                                          "px:float": "round(px * 1.01, 2)"})
        prep = ("clean", "price")
    g = a.aggregate("per_sym", p, window=count_window(4), by=["sym"],
                    output={"sym": "sym", "id": "last(id)", "n": "count()", "qty:int": "sum(qty)",
                            "notional:float": "sum(px)"})
    out = a.functor("fmt", g, filter="qty % 5 != 0",
                    output={"sym": "sym", "id": "id", "n": "n", "notional": "notional", "big:bool": "qty > 800"})
    a.sink("sink", out, mode="file")
    lead = (src_name,) if case != "keyed" else ()
    a.parallel(*lead, *prep, width=wprep, name="prep")
    a.parallel("per_sym", "fmt", width=wdesk, name="desk")


@app
def exchange(case: str = "source", tuples: int = 20_000, split: int = 50, wprep: int = 2, wdesk: int = 2,
             spin_us: int = 0) -> App:
    a = App("exchange")
    src = a.source("trades", SCHEMA, generator=trades, args={"n": tuples, "split": split, "spin_us": spin_us})
    build(a, src, case, wprep, wdesk, "trades")
    return a


app = exchange
