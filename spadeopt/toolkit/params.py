"""Per-kind operator parameters: frozen, JSON-able, decided at build time.

These are what code generation specialises: expressions become straight Python,
window specs become literal constants, callables become imports.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spadeopt.model.graph import SymbolRef

AGG_FUNCS = ("count", "sum", "avg", "min", "max", "first", "last")


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


@dataclass(frozen=True)
class SourceParams:
    generator: SymbolRef
    args: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class FunctorParams:
    output: tuple[tuple[str, str], ...] | None  # (name, expression); None = pass every attribute
    filter: str | None = None
    functions: tuple[tuple[str, SymbolRef], ...] = ()


@dataclass(frozen=True)
class AggOutput:
    name: str
    func: str  # one of AGG_FUNCS, or "key" for a group-by attribute, or "wstart"/"wend"
    expr: str = ""


@dataclass(frozen=True)
class AggregateParams:
    window: Window
    by: tuple[str, ...]
    output: tuple[AggOutput, ...]
    functions: tuple[tuple[str, SymbolRef], ...] = ()


@dataclass(frozen=True)
class JoinParams:
    left_key: tuple[str, ...]
    right_key: tuple[str, ...]
    left_order: str
    right_order: str
    left_window: Window  # how long a left tuple stays to be matched by later right tuples
    right_window: Window
    output: tuple[tuple[str, str], ...]
    where: str | None = None
    functions: tuple[tuple[str, SymbolRef], ...] = ()


@dataclass(frozen=True)
class SplitParams:
    n: int
    by: str | None = None  # hash-partition on this attribute
    predicates: tuple[str, ...] | None = None  # or route by predicate (a tuple may go to several)
    functions: tuple[tuple[str, SymbolRef], ...] = ()


@dataclass(frozen=True)
class MergeParams:
    order_by: str


@dataclass(frozen=True)
class UnionParams:
    pass


@dataclass(frozen=True)
class CustomParams:
    cls: SymbolRef
    args: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class SinkParams:
    mode: str  # "file" | "count"
