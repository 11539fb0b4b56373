"""A live app: newline-delimited JSON from a TCP port, one functor, a file sink (the
graceful stop on a cluster, ``tests/e2e/test_cluster.py``)."""

from __future__ import annotations

from spadeopt import App, app
from spadeopt.connectors import tcp_source


@app
def tcp_relay(port: int = 7700) -> App:
    a = App("tcp_relay")
    s = a.source("lines", "seq:int, word:str", connector=tcp_source(port))
    f = a.functor("double", s, output={"seq": "seq", "word": "word", "twice:int": "seq * 2"})
    a.sink("out", f)
    return a
