"""Module-level user code for the toolkit tests: PEs import it as ``tests.toolkit.gens``."""

from __future__ import annotations


def replay(rows):
    """Yield the given rows as tuples (the rows are the source's ``args``)."""
    for r in rows:
        yield tuple(r)


def span(n: int, start: int = 0, step: int = 1):
    """``(i,)`` for ``n`` values from ``start``."""
    for i in range(n):
        yield (start + i * step,)


# ---- functions used in expressions ----------------------------------------------------


def clamp(x, lo, hi):
    return max(lo, min(hi, x))


def label(k: int) -> str:
    return f"k{k}"


def halve(x):
    return x / 2


# ---- custom operators -------------------------------------------------------------------


class Tally:
    """Two inputs (``a``, ``b``), two outputs.

    ``big``: every tuple whose value is at least ``threshold``, tagged with its input
    port; ``totals``: at end of stream, per input port, the count and sum of values.
    """

    def __init__(self, threshold: int = 10) -> None:
        self.threshold = threshold
        self.n = {"a": 0, "b": 0}
        self.s = {"a": 0, "b": 0}

    def process(self, port, tup, submit):
        v = tup[1]
        self.n[port] += 1
        self.s[port] += v
        if v >= self.threshold:
            submit("big", (port, tup[0], v))

    def on_final(self, submit):
        for port in ("a", "b"):
            submit("totals", (port, self.n[port], self.s[port]))


class Dedup:
    """One input: forwards the first tuple of each key; no on_final."""

    def __init__(self) -> None:
        self.seen = set()

    def process(self, port, tup, submit):
        if tup[0] not in self.seen:
            self.seen.add(tup[0])
            submit("out", tup)


def with_nans(n: int):
    """``(i, x)`` where every other ``x`` is NaN (NaN cannot be written as a source arg)."""
    for i in range(n):
        yield (i, float("nan") if i % 2 else i * 0.75)


class Widen:
    """Submits each tuple with one attribute too many (a custom operator's bug)."""

    def process(self, port, tup, submit):
        submit("out", (*tup, 0))
