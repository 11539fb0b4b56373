"""Windows, shared by ``aggregate`` and ``join``: the spec, its checks, its bounds' type, and
what a time window's late tuples report (``late_context``)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from spadeopt.kinds.kind import Problems
from spadeopt.model.graph import AppGraph, Operator, PortRef
from spadeopt.model.schema import Schema


@dataclass(frozen=True)
class Window:
    """``count``: last ``size`` tuples, emitted every ``slide`` tuples (tumbling: slide == size).
    ``time``: event time in attribute ``attr``; windows ``[k*slide, k*slide + size)``.
    ``lateness`` (time windows): window ``[s, e)`` closes when a tuple at or past
    ``e + lateness`` arrives, so a tuple is late (dropped, counted, or sent to the late
    port) only when every window holding it closed: the window's clock is its input's
    latest event time minus ``lateness`` (``plan.eventtime``)."""

    kind: str  # "count" | "time"
    size: float
    slide: float
    attr: str = ""
    lateness: float = 0

    @property
    def tumbling(self) -> bool:
        return self.slide == self.size

    @property
    def several_open(self) -> bool:
        """A time window that may hold several windows open at once (sliding, or allowed
        lateness): it keeps its groups' tuples and closes window by window (the sliding
        code of ``templates/ops/aggregate.py.j2``; numbered by window, ``number_bits``)."""
        return self.kind == "time" and (not self.tumbling or self.lateness != 0)


def check_window(where: str, w: Window, schema: Schema | None, problems: Problems,
                 allow_zero: bool = False) -> None:
    """Append what is wrong with ``w`` over input ``schema`` (None: do not check ``attr``)."""
    if w.kind not in ("count", "time"):
        problems.append(f"{where}: window kind must be 'count' or 'time', got '{w.kind}'")
        return
    low = 0 if allow_zero else 1e-12
    if not (w.size >= low) or not (w.slide > 0 or (allow_zero and w.size == 0)):
        problems.append(f"{where}: window size and slide must be positive (size={w.size}, slide={w.slide})")
    if w.kind == "count" and (int(w.size) != w.size or int(w.slide) != w.slide):
        problems.append(f"{where}: count window size and slide must be whole numbers")
    if w.slide > w.size and w.size > 0:
        problems.append(f"{where}: window slide {w.slide} is larger than its size {w.size}")
    if w.kind == "count" and w.lateness != 0:
        problems.append(f"{where}: a count window has no allowed lateness (it drops nothing); use "
                        f"time_window(attr, size, allowed_lateness=...)")
    lateness_ok = isinstance(w.lateness, (int, float)) and not isinstance(w.lateness, bool) \
        and math.isfinite(w.lateness) and w.lateness >= 0
    if w.kind == "time" and not lateness_ok:
        problems.append(f"{where}: allowed_lateness must be a finite number >= 0 (how far event time may go "
                        f"back before a tuple counts as late), got {w.lateness!r}")
    if w.kind == "time" and schema is not None:
        if w.attr not in schema:
            problems.append(f"{where}: time window attribute '{w.attr}' is not in the input schema ({schema})")
        elif schema.type_of(w.attr) not in ("int", "float"):
            problems.append(f"{where}: time window attribute '{w.attr}' must be int or float")


def bound_type(w: Window, schema: Schema) -> str:
    """The type of a time window's bounds: the attribute's, unless the window's size or
    slide is fractional."""
    whole = float(w.size).is_integer() and float(w.slide).is_integer()
    return schema.type_of(w.attr) if schema.type_of(w.attr) == "float" or whole else "float"


def late_context(graph: AppGraph, op: Operator, w: Window, logical: str) -> dict[str, Any]:
    """A time window's late-tuple bookkeeping as its template spells it: the counter's
    logical operator (channel copies report under it), and the warning its first late
    tuple gives (``{jump}``, ``{ts}`` filled in at run time), once per source set."""
    sources = _sources_of(graph, op.name)
    names = ", ".join(f"'{s}'" for s in sources) or "?"
    what = f"source {names}" if len(sources) < 2 else f"sources {names}"
    text = (f"{what}: event time '{w.attr}' went back by at least {{jump:g}} (to {{ts!r}}), more than the "
            f"allowed lateness ({w.lateness:g}) of event-time window '{logical}', which dropped the tuple as late "
            f"(every late tuple is counted: 'late tuples' in the run's result). Sort the source by "
            f"'{w.attr}', raise allowed_lateness (time_window(..., allowed_lateness=...)), or send late "
            f"tuples to a sink with late=True on the aggregate")
    return {"op": logical, "key": f"late:{','.join(sources)}", "text": text}


def _sources_of(graph: AppGraph, op: str) -> list[str]:
    """The (logical) sources upstream of operator ``op``, by name."""
    seen, stack, found = {op}, [op], set()
    while stack:
        o = graph.op(stack.pop())
        if o.is_source:
            found.add(o.name)
        for port in o.inputs:
            for src in graph.publishers(PortRef(o.name, port.name)):
                if src.op not in seen:
                    seen.add(src.op)
                    stack.append(src.op)
    # a splittable source's channel copy is named '<source>__<channel>' (plan.regions.Region.channel_op)
    logical = {re.sub(r"__\d+$", "", s) if re.sub(r"__\d+$", "", s) not in graph.by_name else s for s in found}
    return sorted(logical)
