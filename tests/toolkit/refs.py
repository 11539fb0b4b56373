"""Small plain-Python reference implementations of the operators' documented semantics.

Rows are dicts. Each reference returns the output rows in emission order, written
from the specification, not from the generated code:

* count windows are per group; tumbling: every ``size`` tuples of a group form a
  window, emitted when it fills; at end of stream the partial windows are emitted in
  the order they were opened. Sliding: on every ``slide``-th tuple of a group, the last
  ``size`` tuples of that group (fewer while the group is young); nothing at the end.
* time windows are ``[k*slide, k*slide + size)`` over an ordered event-time
  attribute, computed in floating point (tumbling: ``[k*size, (k+1)*size)``, so they
  tile the line exactly); a window is emitted (per group that has tuples in it) once a tuple at or
  past its end arrives, or at end of stream; empty windows are never emitted.
* joins process both inputs merged by their order attribute (left first on ties):
  each tuple probes the other side's window, then enters its own side's window.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

Row = dict[str, Any]


def agg_count(rows: Sequence[Row], size: int, slide: int, key: Callable[[Row], Any],
              emit: Callable[[Any, list[Row]], Row]) -> list[Row]:
    out: list[Row] = []
    seen: dict[Any, list[Row]] = {}
    if size == slide:
        open_: dict[Any, list[Row]] = {}
        for r in rows:
            k = key(r)
            w = open_.setdefault(k, [])
            w.append(r)
            if len(w) == size:
                out.append(emit(k, w))
                del open_[k]
        for k, w in open_.items():  # dicts keep insertion (= opening) order
            out.append(emit(k, w))
        return out
    for r in rows:
        k = key(r)
        hist = seen.setdefault(k, [])
        hist.append(r)
        if len(hist) % slide == 0:
            out.append(emit(k, hist[-size:]))
    return out


def agg_time(rows: Sequence[Row], attr: str, size: float, slide: float, key: Callable[[Row], Any],
             emit: Callable[[Any, list[Row], float, float], Row]) -> list[Row]:
    """All non-empty (window, group) pairs, ordered by window end, then group in order of
    first appearance in that window (use ``agg_time_sorted`` to compare sliding output)."""
    def end(k):  # tumbling windows tile the line: window k ends where k + 1 starts
        return (k + 1) * size if size == slide else k * slide + size

    wins: dict[tuple[float, Any], list[Row]] = {}
    for r in rows:
        ts = r[attr]
        # window k is [k*slide, end(k)) exactly as computed in floating point
        k = math.floor(ts / slide) + 1
        while end(k) > ts:
            if k * slide <= ts:
                wins.setdefault((k, key(r)), []).append(r)
            k -= 1
    order = sorted(wins, key=lambda kk: kk[0])  # stable: groups keep first-appearance order
    return [emit(g, wins[(k, g)], k * slide, end(k)) for k, g in order]


def join(left: Sequence[Row], right: Sequence[Row], *, lkey: Callable[[Row], Any],
         rkey: Callable[[Row], Any], lord: str, rord: str, lwin: tuple[str, float],
         rwin: tuple[str, float], emit: Callable[[Row, Row], Row],
         where: Callable[[Row, Row], bool] | None = None) -> list[Row]:
    """``lwin``/``rwin``: ``("count", n)`` (last n tuples of the key) or ``("time", d)``
    (tuples at most ``d`` older than the probing tuple, inclusive)."""
    merged = sorted([(r[lord], 0, i, r) for i, r in enumerate(left)]
                    + [(r[rord], 1, i, r) for i, r in enumerate(right)], key=lambda x: x[:3])
    wins: tuple[dict, dict] = ({}, {})
    spec = (lwin, rwin)
    ords = (lord, rord)
    keys = (lkey, rkey)
    out = []
    for ts, side, _, t in merged:
        other = 1 - side
        kind, n = spec[other]
        cands = wins[other].get(keys[side](t), [])
        if kind == "count":
            cands = cands[-int(n):] if n else []
        else:
            cands = [c for c in cands if c[ords[other]] >= ts - n]
        for c in cands:
            lt, rt = (t, c) if side == 0 else (c, t)
            if where is None or where(lt, rt):
                out.append(emit(lt, rt))
        if not (spec[side][0] == "count" and spec[side][1] == 0):
            wins[side].setdefault(keys[side](t), []).append(t)
    return out


def merge(inputs: Iterable[Sequence[Row]], attr: str) -> list[Row]:
    tagged = [(r[attr], i, j, r) for i, rows in enumerate(inputs) for j, r in enumerate(rows)]
    return [r for *_, r in sorted(tagged, key=lambda x: x[:3])]
