"""A live feed whose rate steps, for ``run --adaptive`` (issue 39): ``bench adaptive-live`` and
``tests/cli/test_adaptive_live.py``.

Records ``(id:int, k:str, v:int)`` on ``keys`` Redis stream keys (``prefix:0`` ...), each
key's records in order, partitioned by ``k``. Region ``live`` holds the source and
``work``, a functor calling an opaque Python function that burns ``spin_us`` of CPU per
record (the per-record cost a single PE can sustain about 1 / spin_us of), into a file
sink behind the arrival merge. With ``bounded=1`` the source reads the streams to the
ends it sees when it opens (``until="end"``): a static run over the entries a live run
read. ``feed`` writes the records at a given rate.
"""

from __future__ import annotations

import json
import time
from time import perf_counter

from spadeopt import App, app
from spadeopt.connectors import redis_source

SCHEMA = "id:int, k:str, v:int"


def burn(v: int, spin_us: int) -> int:
    """Opaque work: ``spin_us`` of CPU, then a function of ``v``."""
    end = perf_counter() + spin_us * 1e-6
    while perf_counter() < end:
        pass
    return (v * 7919) % 10007


def record(i: int) -> dict:
    return {"id": i, "k": f"u{(i * 2654435761) % 97:02d}", "v": i * 3 % 1000}


def key_of(r: dict, keys: int) -> int:
    return int(r["k"][1:]) % keys


def feed(client, prefix: str, start: int, count: int, rate: float, keys: int = 4, batch: int = 50) -> int:
    """XADD records ``start .. start + count - 1`` at about ``rate`` per second (pipelined
    batches of ``batch``); the next record's number."""
    t0 = time.perf_counter()
    for b in range(start, start + count, batch):
        pipe = client.pipeline(transaction=False)
        for i in range(b, min(b + batch, start + count)):
            r = record(i)
            pipe.xadd(f"{prefix}:{key_of(r, keys)}", {"value": json.dumps(r)})
        pipe.execute()
        ahead = t0 + (b + batch - start) / rate - time.perf_counter()
        if ahead > 0:
            time.sleep(ahead)
    return start + count


@app
def stepfeed(prefix: str = "stepfeed", keys: int = 4, spin_us: int = 400, bounded: int = 0) -> App:
    a = App("stepfeed")
    s = a.source("src", SCHEMA, connector=redis_source([f"{prefix}:{k}" for k in range(keys)], partitioned_by=["k"],
                                                       **({"until": "end"} if bounded else {})))
    w = a.functor("work", s, output={"id": "id", "k": "k", "r:int": f"burn(v, {spin_us})"}, functions=[burn])
    a.sink("out", w)
    a.parallel("src", "work", width=2, name="live")
    return a


app = stepfeed
