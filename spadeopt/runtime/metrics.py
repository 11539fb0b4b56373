"""Per-operator counters and run warnings: how they flow from the PEs to the driver.

A PE's generated code asks for a counter (``rt.metrics.counter(op, name, report_as)``: a
one-item list it adds to, e.g. an event-time window's ``late`` tuples) and may warn once
(``rt.metrics.warn_once(key, text)``: printed on the PE's stderr, its log, at once). The
PE's end-of-run stats carry ``report()``; the driver sums every PE's counters under the
logical operator (a parallel region's channel copies add up) and keeps each warning key
once (``merge``): the run's ``RunResult.operators`` and ``warnings``, which the result
table, ``--json`` and anything exporting metrics read. While it runs, each PE also writes
``report()`` into its progress file every second (``metrics``), for live runs. A counter is a list so a
checkpointing build registers it with its operator's state (``rt.state``) and a restore
sets it back in place: a restarted run counts every tuple once.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any


class Metrics:
    """One PE's operator counters and warnings."""

    def __init__(self) -> None:
        self._counters: list[tuple[str, str, list[int]]] = []  # (logical operator, counter, [value])
        self.warnings: dict[str, str] = {}  # key -> text, the first warning of each key
        self._tallies: list[tuple[str, str, list[int]]] = []  # (operator, out port, [tuples])

    def counter(self, op: str, name: str, report_as: str | None = None) -> list[int]:
        """A new counter ``name`` of operator ``op`` (reported under ``report_as``, its
        logical operator, when ``op`` is a channel copy): ``[0]``, added to in place."""
        box = [0]
        self._counters.append((report_as or op, name, box))
        return box

    def tally(self, op: str, port: str) -> list[int]:
        """The live-metrics count of tuples operator ``op`` (a channel copy by its own
        name) sends on output ``port``: ``[0]``, added to once per batch by generated
        code (``codegen.pe_spec.OpSpec.tallied``). Not checkpoint state: it counts work done."""
        box = [0]
        self._tallies.append((op, port, box))
        return box

    def tallies(self) -> dict[str, dict[str, int]]:
        """``{operator: {out port: tuples}}``."""
        out: dict[str, dict[str, int]] = {}
        for op, port, box in self._tallies:
            out.setdefault(op, {})[port] = box[0]
        return out

    def warn_once(self, key: str, text: str) -> None:
        """Print ``text`` on stderr and keep it for the driver, unless ``key`` warned before."""
        if key in self.warnings:
            return
        self.warnings[key] = text
        print(f"spadeopt: WARNING: {text}", file=sys.stderr, flush=True)

    def report(self) -> dict[str, Any]:
        """``{"counters": {operator: {counter: value}}, "warnings": {key: text}}``."""
        counters: dict[str, dict[str, int]] = {}
        for op, name, box in self._counters:
            mine = counters.setdefault(op, {})
            mine[name] = mine.get(name, 0) + box[0]
        return {"counters": counters, "warnings": dict(self.warnings)}


def merge(reports: Iterable[dict[str, Any] | None]) -> tuple[dict[str, dict[str, int]], list[str]]:
    """The run's counters (summed per logical operator and counter, operators sorted) and
    warnings (each key once, in key order) from the PEs' ``report()``s."""
    counters: dict[str, dict[str, int]] = {}
    warnings: dict[str, str] = {}
    for rep in reports:
        for op, values in (rep or {}).get("counters", {}).items():
            mine = counters.setdefault(op, {})
            for name, n in values.items():
                mine[name] = mine.get(name, 0) + n
        for key, text in (rep or {}).get("warnings", {}).items():
            warnings.setdefault(key, text)
    return dict(sorted(counters.items())), [warnings[k] for k in sorted(warnings)]
