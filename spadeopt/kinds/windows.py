"""Windows, shared by ``aggregate`` and ``join``: the spec, its checks, its bounds' type."""

from __future__ import annotations

from dataclasses import dataclass

from spadeopt.kinds.base import Problems
from spadeopt.model.schema import Schema


@dataclass(frozen=True)
class Window:
    """``count``: last ``size`` tuples, emitted every ``slide`` tuples (tumbling: slide == size).
    ``time``: event time in attribute ``attr``; windows ``[k*slide, k*slide + size)``."""

    kind: str  # "count" | "time"
    size: float
    slide: float
    attr: str = ""

    @property
    def tumbling(self) -> bool:
        return self.slide == self.size


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
