"""The paper's micro-benchmark: a source, N forwarding operators, a sink.

Parameters: ``n`` operators, ``size`` bytes per tuple, ``work`` busy-loop iterations
per tuple in every operator (0: pure forwarding), ``tuples`` to send, ``width``
channels of the parallel region ``ops`` (all forwarders) under FMAN.
"""

from __future__ import annotations

from spadeopt import App, app
from spadeopt.toolkit.sources import counter


def spin(payload: bytes, work: int) -> bytes:
    """Burn ``work`` loop iterations of CPU, then pass the payload on unchanged."""
    for _ in range(work):
        pass
    return payload


@app
def chain(n: int = 8, size: int = 100, work: int = 0, tuples: int = 200_000, per_pe: int = 0,
          sink: str = "count", width: int = 1) -> App:
    a = App("chain")
    s = a.source("src", "seq:int, payload:bytes", generator=counter,
                 args={"n": tuples, "size": size, "seed": 1})
    for i in range(n):
        if work:
            s = a.functor(f"op{i}", s, output={"seq": "seq", "payload:bytes": f"spin(payload, {work})"},
                          functions=[spin])
        else:
            s = a.functor(f"op{i}", s)
    a.sink("sink", s, mode=sink)
    # The forwarders form one parallel region 'ops' (static-rate, stateless): `width`
    # channels under FMAN (default 1: not replicated); --width ops=K for any strategy.
    if n:
        a.parallel(*(f"op{i}" for i in range(n)), width=width, name="ops")
    # Manual fusion: groups of `per_pe` consecutive operators (default: pairs).
    k = per_pe or 2
    for start in range(0, n, k):
        group = [f"op{j}" for j in range(start, min(n, start + k))]
        if len(group) > 1:
            a.fuse(*group)
    return a


app = chain
