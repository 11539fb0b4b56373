"""The guide's app (docs/guide.md): a clickstream, built one step at a time.

``clicks(n, users, seed)`` yields ``(user, ts, page, agent, dwell)`` in event-time order
(``jitter``: each click's time goes back by up to that many seconds, so some come late).
``humans`` drops bots through the opaque function :func:`is_bot`; ``enrich`` adds the
page's site section through :func:`section_of`; ``per_user`` counts clicks and dwell time
per user in tumbling event-time windows of ``window`` seconds (closing ``lateness``
seconds after their end; the clicks that come later still go to ``late_clicks``); ``sessions`` (the custom
operator :class:`Sessionizer`) cuts each user's clicks into sessions separated by more
than ``gap`` seconds. Both results go to file sinks, or to Redis streams with
``-p live=true`` (the source then reads the Redis stream ``clicks``, see
``python -m apps.clicks --help`` for a producer written with plain redis-py).
"""

from __future__ import annotations

import random

from spadeopt import App, app, time_window
from spadeopt.connectors import redis_sink, redis_source

PAGES = ("/home", "/shop/shoes", "/shop/hats", "/blog/spark", "/blog/python", "/help")
AGENTS = ("Mozilla/5.0 (X11; Linux)", "Mozilla/5.0 (Macintosh)", "Googlebot/2.1", "curl/8.0 crawler")


def clicks(n: int, users: int, seed: int, jitter: float = 0.0):
    """The source: ``n`` clicks of ``users`` users, one every 0.1 s of event time."""
    rng = random.Random(seed)
    for i in range(n):
        back = rng.uniform(0, jitter) if jitter else 0.0   # -p jitter=90: clicks arrive out of order
        yield (f"u{rng.randrange(users)}", i * 0.1 - back, rng.choice(PAGES), rng.choice(AGENTS),
               round(rng.expovariate(0.2), 2))


def is_bot(agent: str) -> bool:
    """Opaque Python: anything an expression cannot say (methods, loops, libraries)."""
    a = agent.lower()
    return "bot" in a or "crawler" in a


def section_of(page: str) -> str:
    """``"/shop/shoes"`` -> ``"shop"``."""
    return page.strip("/").split("/", 1)[0] or "home"


class Sessionizer:
    """Per user: a session ends when the next click comes more than ``gap`` s later.

    ``process(port, tup, submit)`` gets one tuple of input port ``port``;
    ``submit(output_port, tuple)`` emits a tuple of that port's declared schema.
    ``on_final(submit)`` runs at the end of the stream; ``snapshot``/``restore`` let
    the operator's state be checkpointed."""

    def __init__(self, gap: float) -> None:
        self.gap = gap
        self.open: dict[str, list] = {}  # user -> [start, end, clicks]

    def process(self, port: str, tup: tuple, submit) -> None:
        user, ts = tup[0], tup[1]
        s = self.open.get(user)
        if s is not None and ts - s[1] > self.gap:
            submit("sessions", (user, s[0], s[1], s[2]))
            s = None
        if s is None:
            self.open[user] = [ts, ts, 1]
        else:
            s[1], s[2] = ts, s[2] + 1

    def on_final(self, submit) -> None:
        for user, (start, end, n) in self.open.items():
            submit("sessions", (user, start, end, n))

    def snapshot(self):
        return self.open

    def restore(self, state) -> None:
        self.open = {u: list(s) for u, s in state.items()}


SCHEMA = "user:str, ts:float, page:str, agent:str, dwell:float"


@app
def clicks_app(n: int = 20_000, users: int = 50, window: float = 60.0, gap: float = 30.0,
               live: bool = False, stream: str = "clicks", jitter: float = 0.0, lateness: float = 0.0) -> App:
    a = App("clicks")
    if live:  # the Redis stream "clicks", JSON objects in field "value", until Ctrl-C / --duration
        c = a.source("clicks", SCHEMA, connector=redis_source(stream))
    else:
        c = a.source("clicks", SCHEMA, generator=clicks, args={"n": n, "users": users, "seed": 1,
                                                               "jitter": jitter})
    humans = a.functor("humans", c, filter="not is_bot(agent)", functions=[is_bot])
    enrich = a.functor("enrich", humans, functions=[section_of],
                       output={"user": "user", "ts": "ts", "section:str": "section_of(page)",
                               "dwell": "dwell"})
    per_user, late = a.aggregate("per_user", enrich, window=time_window("ts", window, allowed_lateness=lateness),
                                 by=["user"], late=True,
                                 output={"user": "user", "start": "wstart()", "clicks": "count()",
                                         "dwell:float": "sum(dwell)", "longest": "max(dwell)"})
    ses = a.custom("sessionize", Sessionizer, inputs={"in": enrich},
                   outputs={"sessions": "user:str, start:float, end:float, clicks:int"},
                   args={"gap": gap}, state="partitioned", key=["user"])
    if live:
        a.sink("per_user_out", per_user, connector=redis_sink(f"{stream}:per_user"))
        a.sink("sessions_out", ses["sessions"], connector=redis_sink(f"{stream}:sessions"))
        a.sink("late_clicks", late, connector=redis_sink(f"{stream}:late"))
    else:
        a.sink("per_user_out", per_user)
        a.sink("sessions_out", ses["sessions"])
        a.sink("late_clicks", late)
    a.fuse("humans", "enrich")  # the developer's own fusion: used by --fusion manual (FMAN)
    return a


app = clicks_app


def _redis():
    """A redis-py client of the project's broker, as any program would make one: its port
    (16379, or $SPADEOPT_BROKER_PORT) and the password in its folder's ``password``
    (.spadeopt-broker in the checkout, or $SPADEOPT_BROKER_DIR)."""
    import os
    from pathlib import Path

    import redis

    folder = os.environ.get("SPADEOPT_BROKER_DIR") or Path(__file__).resolve().parents[1] / ".spadeopt-broker"
    password = (Path(folder) / "password").read_text().strip()
    return redis.Redis(host="127.0.0.1", port=int(os.environ.get("SPADEOPT_BROKER_PORT", "16379")),
                       password=password)


def produce(count: int, rate: float, stream: str = "clicks") -> int:
    """A producer written with plain redis-py: stream ``stream``, one JSON object per
    entry in field ``value``, its keys the source's attribute names."""
    import json
    import time

    r = _redis()
    fields = [f.split(":")[0].strip() for f in SCHEMA.split(",")]
    t0 = time.monotonic()
    for i, tup in enumerate(clicks(count, 50, 1)):
        r.xadd(stream, {"value": json.dumps(dict(zip(fields, tup, strict=True)))})
        if rate:
            time.sleep(max(0.0, t0 + (i + 1) / rate - time.monotonic()))
    return count


def show(stream: str = "clicks", last: int = 5) -> list[tuple[str, str, str]]:
    """The last entries of the two output streams: (stream, entry ID, JSON row)."""
    r = _redis()
    return [(key, entry_id.decode(), f[b"value"].decode())
            for key in (f"{stream}:per_user", f"{stream}:sessions")
            for entry_id, f in r.xrevrange(key, count=last)[::-1]]


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(prog="python -m apps.clicks", description="write clicks to a Redis stream "
                                 "of the project broker (make broker), or show the app's output streams")
    ap.add_argument("action", choices=("produce", "show"))
    ap.add_argument("--count", type=int, default=5000)
    ap.add_argument("--rate", type=float, default=0, help="clicks per second (default: as fast as possible)")
    ap.add_argument("--stream", default="clicks", help="the input stream (the app's -p stream=...)")
    ns = ap.parse_args()
    if ns.action == "produce":
        print(f"wrote {produce(ns.count, ns.rate, ns.stream)} clicks to stream '{ns.stream}'")
    else:
        for key, entry_id, row in show(ns.stream):
            print(key, entry_id, row)
