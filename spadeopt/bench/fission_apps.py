"""The apps of ``spadeopt bench fission`` (module-level, so PEs import their functions).

``region(kind, work, width, tuples, ops)``: a source of ``(seq, k, payload)`` tuples, a
region of ``ops`` operators and a counting sink. ``kind``:

- ``stateless``: functors that each burn ``work`` loop iterations per tuple
  (static-rate: weighted round robin split and merge);
- ``dynamic``: the same with a filter that keeps every tuple (so the region is
  dynamic: sequence numbers, block round robin);
- ``keyed``: the burning functors, then a count-window aggregate by ``k`` (every 4
  tuples of a key): partitioned-stateful (hash split, sequence-number merge);
- ``union``: the hand-built unordered baseline: a hash split on ``seq`` into ``width``
  copies of the stateless functors, joined by a ``union`` (arrival order).
"""

from __future__ import annotations

from collections.abc import Iterator

from spadeopt import App, app, count_window


def burn(payload: bytes, work: int) -> bytes:
    """``work`` loop iterations of CPU; the payload passes unchanged."""
    for _ in range(work):
        pass
    return payload


def keyed_tuples(n: int, keys: int = 64, size: int = 60) -> Iterator[tuple]:
    payload = bytes(range(size % 256)) if size < 256 else bytes(size)
    for i in range(n):
        yield (i, (i * 2654435761) % keys, payload)


@app
def region(kind: str = "stateless", work: int = 0, width: int = 1, tuples: int = 200_000, ops: int = 4) -> App:
    a = App(f"fission_{kind}")
    s = a.source("src", "seq:int, k:int, payload:bytes", generator=keyed_tuples, args={"n": tuples})

    def chain(s, suffix=""):
        names = []
        for i in range(ops):
            name = f"f{i}{suffix}"
            out = {"seq": "seq", "k": "k", "payload:bytes": f"burn(payload, {work})"}
            s = a.functor(name, s, output=out, functions=[burn],
                          filter="seq >= 0" if kind == "dynamic" and i == 0 else None)
            names.append(name)
        return s, names

    if kind == "union":
        branches = []
        for c, b in enumerate(a.split("deal", s, n=width, by="seq")):
            end, names = chain(b, f"_{c}")
            branches.append(end)
            if len(names) > 1:
                a.fuse(*names)
        a.fuse("src", "deal")
        u = a.union("gather", branches)
        a.sink("sink", u, mode="count")
        a.fuse("gather", "sink")
        return a
    end, names = chain(s)
    if kind == "keyed":
        end = a.aggregate("agg", end, window=count_window(4), by=["k"],
                          output={"k": "k", "n": "count()", "last:int": "last(seq)"})
        names.append("agg")
    a.sink("sink", end, mode="count")
    a.parallel(*names, width=width, name="work")
    a.fuse(*names)
    return a


app = region
