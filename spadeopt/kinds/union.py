"""``union``: interleave streams in arrival order. Stateless, but never in a parallel
region: a merge cannot restore arrival order."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from spadeopt.kinds.kind import Decl, Derived, Imports, Kind, Problems
from spadeopt.model.graph import AppGraph, Operator
from spadeopt.model.schema import Schema


@dataclass(frozen=True)
class UnionParams:
    pass


def declare(name: str, inputs: Iterable[Any]) -> Decl:
    return Decl(name, "union", {"in": list(inputs)}, {})


def derive(where: str, raw: dict, ins: dict[str, Schema], problems: Problems) -> Derived:
    return UnionParams(), {"out": ins["in"]}


def lower(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    return {}


def region_problem(op: Operator) -> str | None:
    return (f"operator '{op.name}' is a union: it interleaves in arrival order, which a merge "
            f"cannot restore")


KIND = Kind("union", declare, derive, lower, "ops/union.py.j2", region_problem=region_problem,
            needs_lock=False)
