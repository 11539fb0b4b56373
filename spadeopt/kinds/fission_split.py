"""``fission_split``: a parallel region's split, made by ``plan.fission`` (never by apps).
Deals the entering stream to the channels: by a stable hash of the region's key, or in
blocks round robin; a dynamic region's split stamps each tuple with the sequence number
(``protocol.SEQ``) and ends each batch to a channel with a pulse. A region holding an
event-time window that reads its time off the entering tuple (``plan.eventtime``'s entry
clock) also gets the window's clock: whenever a tuple
moves the stream into a later window (sliding: whenever the oldest window holding the
tuple's time is a later one than before, where the window closes), every other channel
gets a *watermark frame* (a copy of it), numbered ``-1 - n`` (``protocol.WATERMARK``), at
the same stream position."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spadeopt.kinds.kind import Imports, Kind
from spadeopt.kinds.lowering import key_hash, number
from spadeopt.kinds.windows import Window
from spadeopt.model.graph import AppGraph, Operator


@dataclass(frozen=True)
class FissionSplitParams:
    width: int
    key: tuple[str, ...]  # hash these attributes; empty: deal blocks round robin
    ordering: str  # "static": blocks, no sequence number; "dynamic": stamp a sequence number
    block: int  # tuples per round-robin block
    clock: tuple[str, Window, bool] | None = None  # (time attribute, event-time window, int bounds): watermarks


def lower(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    p, schema = op.params, op.in_port("in").schema
    h = key_hash(p.key, schema) if p.key else None
    mode = "static" if p.ordering == "static" else ("hash" if p.key else "round_robin")
    return {"mode": mode, "hash": h, "width": p.width, "block": p.block, "clock": clock_context(p.clock, schema)}


def clock_context(clock: tuple[str, Window, bool] | None, schema: Any) -> dict[str, Any] | None:
    """A clock's template context (``ops/_macros.py.j2``'s ``clock_window``): the same
    window arithmetic as the aggregate's (``templates/ops/aggregate.py.j2``)."""
    if clock is None:
        return None
    attr, w, exact = clock
    if w is None:  # a join side's clock (plan.eventtime.flushed_sides): its order value's running maximum
        return {"attr": schema.index(attr), "order": True}
    lit = number if exact else (lambda x: repr(float(x)))
    # an allowed lateness shifts the clock: windows close lateness later (kinds.windows.Window)
    return {"attr": schema.index(attr), "exact": exact, "size": lit(w.size), "slide": lit(w.slide),
            "sliding": w.several_open, "lateness": number(w.lateness) if w.lateness else None}


def rescale(op: Operator) -> dict[str, Any] | str:
    """Its state (the next number, the clock's window) is the entering stream's, the same
    at any width: kept when the region is rescaled (made when it widens from 1: ``clock``
    says whether it has the window)."""
    return {"keep": True, "clock": op.params.clock is not None}


KIND = Kind("fission_split", None, None, lower, "ops/fission_split.py.j2", never_blocks=False,
            fission_made=True, rescale=rescale)
