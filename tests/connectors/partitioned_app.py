"""An orders-like app whose parallel region starts at a Redis Streams source of several
keys (``partitioned_by``): orders ``(order_id, customer, amount)`` on ``keys`` stream keys
partitioned by customer (``apps/orders.py``'s ``partition``), refunds dropped, a count
window of ``window`` orders per customer, one row per window. ``input=<path>`` replays
the same orders from a JSON-lines file (no region: the reference). ``width=0`` declares
no region; ``by``/``key`` change the declared partitioning or the window's key (for the
refusals)."""

from __future__ import annotations

from spadeopt import App, app, count_window
from spadeopt.connectors import redis_source

SCHEMA = "order_id:int, customer:str, region:str, amount:float"


@app
def porders(prefix: str = "orders", keys: int = 4, input: str = "broker", width: int = 2, by: str = "customer",
            key: str = "customer", window: int = 3) -> App:
    a = App("porders")
    if input == "broker":
        o = a.source("orders", SCHEMA, connector=redis_source(
            [f"{prefix}:{k}" for k in range(keys)], until="end", partitioned_by=by.split(",") if by else None))
    else:
        o = a.source("orders", SCHEMA, file=input, format="jsonl")
    paid = a.functor("paid", o, filter="amount > 0",
                     output={"customer": "customer", "region": "region", "order_id": "order_id",
                             "cents:int": "round(amount * 100)"})
    w = a.aggregate("totals", paid, window=count_window(window), by=key.split(","),
                    output={"customer": "last(customer)", "orders:int": "count()", "cents:int": "sum(cents)",
                            "last_order": "last(order_id)"})
    r = a.functor("report", w, output={"customer": "customer", "orders": "orders", "last_order": "last_order",
                                       "total:float": "cents / 100"})
    a.sink("out", r)
    if input == "broker" and width:
        a.parallel("orders", "paid", "totals", "report", width=width, name="live")
    return a
