"""A new connector in one module (the worked example of docs/connectors.md, "Adding a
connector"): ``Ticker``, a live source whose reads sometimes find nothing now, and
``ticker_source``, the spec an app passes to ``App.source(..., connector=)``. Nothing
else in spadeopt names it: the type says it is live (``live = True``) and which of its
arguments give it an end (``ENDS_BY``, the base class's ``until`` and ``count``)."""

from __future__ import annotations

from spadeopt.connectors.contract import Source
from spadeopt.connectors.declared import ConnectorSpec


class Ticker(Source):
    """Ticks ``(i, i * step)`` for i = 0, 1, ...; every third read finds nothing now.
    ``until="done"`` ends it after ``n`` ticks; ``count`` after that many records."""

    live = True

    def __init__(self, *, name: str, schema: list, n: int, step: int = 1, until: str | None = None,
                 count: int | None = None) -> None:
        self.name, self.n, self.step = name, n, step
        self.until, self.limit = until, count
        self.i = self.reads = 0

    def read(self, n: int) -> list[tuple] | None:
        self.reads += 1
        stop = self.n if self.until == "done" else None
        if self.limit is not None:
            stop = self.limit if stop is None else min(stop, self.limit)
        if stop is not None and self.i >= stop:
            return None
        if self.reads % 3 == 0:
            return []  # nothing now: a live source's idle read
        take = n if stop is None else min(n, stop - self.i)
        out = [(j, j * self.step) for j in range(self.i, self.i + take)]
        self.i += take
        return out


def ticker_source(n: int, *, step: int = 1, until: str | None = None, count: int | None = None) -> ConnectorSpec:
    """The app's declaration: a ``Ticker`` (plain data, checked at build time)."""
    problems = [] if until in (None, "done") else [f"until must be None (unbounded) or 'done', got {until!r}"]
    args = {"n": n, "step": step, "until": until, "count": count}
    return ConnectorSpec("source", __name__, "Ticker", tuple(sorted(args.items())), f"ticker of {n}",
                         tuple(problems))
