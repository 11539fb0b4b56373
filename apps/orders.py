"""Live orders: a broker in, keyed count windows, a broker out (issue 28).

Orders ``(order_id, customer, amount)`` arrive on ``keys`` Redis stream keys
``<prefix>:0 .. <prefix>:<keys-1>``, partitioned by customer (``partition()``, a stable
CRC-32), so each customer's orders keep their order on one key; the source says so
(``partitioned_by=["customer"]``), so FATM may run it as a parallel region whose channels
each read their own keys (tried: width 2 chosen on a profile of 4 keys; each customer's
rows are the width-1 rows). The app drops refunds
(amount <= 0), totals every ``window`` orders per customer (count, sum, last order) and
appends one row per window to the ``<prefix>:totals`` stream. ``input=<path>`` replays
the same orders from a JSON-lines file instead, ``output=file`` writes the totals to the
``totals`` file sink: the answers are the same rows (per customer in the same order).

Bounded by default (``until=end``: the streams' ends seen when the run starts), so
``spadeopt run`` ends; ``-p until=`` makes it a live, unbounded source, and ``-p
start=end`` makes it read only the orders fed after it started (``spadeopt compare
apps/orders.py -p until= -p start=end --duration 20`` beside a running ``feed --rate``:
throughput and latency of each strategy on the live feed).

    make broker
    python -m apps.orders feed --orders 5000                 # writes orders to orders:0..3
    spadeopt run apps/orders.py --fusion all
    python -m apps.orders show                               # the last totals
"""

from __future__ import annotations

import json
import random
import sys
import zlib

from spadeopt import App, app, count_window
from spadeopt.connectors import redis_sink, redis_source

SCHEMA = "order_id:int, customer:str, amount:float"


@app
def orders(keys: int = 4, prefix: str = "orders", input: str = "broker", output: str = "broker",
           window: int = 5, until: str = "end", start: str = "beginning") -> App:
    a = App("orders")
    if input == "broker":
        o = a.source("orders", SCHEMA, connector=redis_source(
            [f"{prefix}:{k}" for k in range(keys)], until=until or None, start=start, partitioned_by=["customer"]))
    else:
        o = a.source("orders", SCHEMA, file=input, format="jsonl")
    paid = a.functor("paid", o, filter="amount > 0",
                     output={"customer": "customer", "order_id": "order_id", "cents:int": "round(amount * 100)"})
    w = a.aggregate("totals", paid, window=count_window(window), by=["customer"],
                    output={"customer": "customer", "orders:int": "count()", "cents:int": "sum(cents)",
                            "last_order": "last(order_id)"})
    r = a.functor("report", w, output={"customer": "customer", "orders": "orders", "last_order": "last_order",
                                       "total:float": "cents / 100"})
    if output == "broker":
        a.sink("out", r, connector=redis_sink(f"{prefix}:totals"))
    else:
        a.sink("out", r)
    a.fuse("orders", "paid")
    a.fuse("totals", "report", "out")
    return a


def partition(customer: str, keys: int) -> int:
    """The stream key of a customer: a stable CRC-32, the same in every process."""
    return zlib.crc32(customer.encode()) % keys


def make_orders(n: int, customers: int = 50, seed: int = 1) -> list[dict]:
    rng = random.Random(seed)
    return [{"order_id": i, "customer": f"c{rng.randrange(customers):03d}",
             "amount": round(rng.uniform(-20, 200), 2)} for i in range(n)]


def feed(client, records: list[dict], keys: int = 4, prefix: str = "orders") -> None:
    """XADD each record to its customer's stream key (JSON in field ``value``)."""
    pipe = client.pipeline(transaction=False)
    for r in records:
        pipe.xadd(f"{prefix}:{partition(r['customer'], keys)}", {"value": json.dumps(r)})
    pipe.execute()


def feed_paced(client, rate: float, seconds: float | None, keys: int = 4, prefix: str = "orders") -> int:
    """Feed orders at ``rate`` per second (order IDs counting up) for ``seconds`` (None: until
    interrupted); the number fed."""
    import time

    sent, t0 = 0, time.monotonic()
    try:
        while seconds is None or time.monotonic() - t0 < seconds:
            due = int(rate * (time.monotonic() - t0)) - sent
            if due > 0:
                batch = make_orders(due, seed=sent)
                feed(client, [dict(r, order_id=sent + i) for i, r in enumerate(batch)], keys, prefix)
                sent += due
            time.sleep(0.01)
    except KeyboardInterrupt:
        pass
    return sent


def _client():
    from spadeopt.connectors.redis_conn import connect, project_broker

    return connect(project_broker(), "apps.orders")


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(prog="python -m apps.orders")
    ap.add_argument("action", choices=("feed", "show", "clear"))
    ap.add_argument("--orders", type=int, default=5000)
    ap.add_argument("--keys", type=int, default=4)
    ap.add_argument("--prefix", default="orders")
    ap.add_argument("--rate", type=float, help="feed: orders per second, until --seconds are up or "
                    "Ctrl-C / SIGTERM (default: --orders at once)")
    ap.add_argument("--seconds", type=float, help="feed --rate: for this long (default: until stopped)")
    ns = ap.parse_args()
    c = _client()
    if ns.action == "feed" and ns.rate:
        import signal

        signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM ends the feed as Ctrl-C does
        n = feed_paced(c, ns.rate, ns.seconds, ns.keys, ns.prefix)
        print(f"fed {n} orders to {ns.prefix}:0..{ns.keys - 1} at {ns.rate:g}/s")
    elif ns.action == "feed":
        feed(c, make_orders(ns.orders), ns.keys, ns.prefix)
        print(f"wrote {ns.orders} orders to {ns.prefix}:0..{ns.keys - 1}")
    elif ns.action == "show":
        for entry_id, fields in c.xrevrange(f"{ns.prefix}:totals", count=10)[::-1]:
            print(entry_id.decode(), fields[b"value"].decode())
    else:
        c.delete(*[f"{ns.prefix}:{k}" for k in range(ns.keys)], f"{ns.prefix}:totals")
        print("cleared")
    sys.exit(0)
