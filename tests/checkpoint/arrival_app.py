"""A parallel region led by a partitioned Redis Streams source, for checkpoints of arrival
regions (issue 29, ``test_arrival_checkpoints``).

Orders ``(order_id, customer, region, amount)`` on ``keys`` stream keys, each customer's
orders on one key (``partition``), read to the ends seen at open (``until="end"``). The
region ``live`` (``width`` channels, each reading its own keys) holds the source, a
filter, ``seen`` (a custom operator partitioned by customer: it numbers each customer's
orders, its state a count per customer, and burns ``spin_us`` of CPU every 16 tuples
of its channel so a run lasts long enough to be killed), a count window of 3 orders per
customer and a functor. The arrival merge feeds a file sink ``out`` and, with ``bus``,
a Redis sink writing the same rows to stream ``bus``; ``tail=k`` adds a count window of
``k`` rows over every customer after the merge (state across customers: its rows depend
on the interleaving). ``width=1`` declares no region.
"""

from __future__ import annotations

import json
import zlib
from time import perf_counter

from spadeopt import App, app, count_window
from spadeopt.connectors import redis_sink, redis_source

SCHEMA = "order_id:int, customer:str, region:str, amount:float"


def orders(n: int, customers: int = 30, seed: int = 7) -> list[dict]:
    x, out = seed, []
    for i in range(n):
        x = (x * 1103515245 + 12345) % (1 << 31)
        out.append({"order_id": i, "customer": f"c{x % customers:02d}", "region": "NESW"[(x >> 8) % 4],
                    "amount": round((x >> 4) % 22000 / 100 - 20, 2)})
    return out


def partition(customer: str, keys: int) -> int:
    """The stream key of a customer's orders: a stable CRC-32 of the customer."""
    return zlib.crc32(customer.encode()) % keys


def feed(client, prefix: str, records: list[dict], keys: int = 4) -> None:
    pipe = client.pipeline(transaction=False)
    for r in records:
        pipe.xadd(f"{prefix}:{partition(r['customer'], keys)}", {"value": json.dumps(r)})
    pipe.execute()


class Seen:
    """Numbers each customer's orders (its state: a count per customer, partitioned by
    customer); burns ``spin_us`` of CPU every 16 tuples it processes (not state: pacing)."""

    def __init__(self, spin_us: int = 0) -> None:
        self.spin_us, self.calls, self.count = spin_us, 0, {}

    def process(self, port, t, submit) -> None:
        n = self.count[t[0]] = self.count.get(t[0], 0) + 1
        self.calls += 1
        if self.spin_us and self.calls % 16 == 0:
            end = perf_counter() + self.spin_us * 1e-6
            while perf_counter() < end:
                pass
        submit("out", (*t, n))

    def snapshot(self):
        return dict(self.count)

    def restore(self, state) -> None:
        self.count = dict(state)


@app
def arrivalck(prefix: str = "orders", keys: int = 4, width: int = 2, spin_us: int = 0, bus: str = "",
              tail: int = 0) -> App:
    a = App("arrivalck")
    o = a.source("orders", SCHEMA, connector=redis_source(
        [f"{prefix}:{k}" for k in range(keys)], until="end", partitioned_by=["customer"]))
    paid = a.functor("paid", o, filter="amount > 0",
                     output={"customer": "customer", "order_id": "order_id", "cents:int": "round(amount * 100)"})
    seen = a.custom("seen", Seen, inputs={"in": paid}, outputs={"out": "customer:str, order_id:int, cents:int, n:int"},
                    args={"spin_us": spin_us}, state="partitioned", key=["customer"])["out"]
    w = a.aggregate("totals", seen, window=count_window(3), by=["customer"],
                    output={"customer": "last(customer)", "cents:int": "sum(cents)", "first_n": "first(n)",
                            "last_order": "last(order_id)"})
    r = a.functor("report", w, output={"customer": "customer", "first_n": "first_n", "last_order": "last_order",
                                       "total:float": "cents / 100"})
    a.sink("out", r)
    if bus:
        a.sink("bus", r, connector=redis_sink(bus))
    if tail:
        a.sink("tails", a.aggregate("tail", r, window=count_window(tail), output={"rows:int": "count()",
                                                                                 "total:float": "sum(total)"}))
    if width > 1:
        a.parallel("orders", "paid", "seen", "totals", "report", width=width, name="live")
    return a


app = arrivalck
