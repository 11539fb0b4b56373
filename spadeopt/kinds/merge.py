"""``merge``: an order-preserving merge of streams each ordered by one attribute (ties:
input order). Stateful: it orders all its inputs together."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from spadeopt.kinds.kind import Decl, Derived, Imports, Kind, Problems, stateful_problem
from spadeopt.model.graph import STATEFUL, AppGraph, Operator
from spadeopt.model.schema import Schema


@dataclass(frozen=True)
class MergeParams:
    order_by: str


def declare(name: str, inputs: Iterable[Any], *, order_by: str) -> Decl:
    ins = list(inputs)
    decl = Decl(name, "merge", {f"in{i}": [s] for i, s in enumerate(ins)}, {"order_by": order_by},
                state=STATEFUL)
    if len(ins) < 1:
        decl.problems.append(f"merge '{name}': needs at least one input")
    return decl


def derive(where: str, raw: dict, ins: dict[str, Schema], problems: Problems) -> Derived:
    if not ins:  # no input: already reported by declare
        return None, None
    first = next(iter(ins.values()))
    for port, sch in ins.items():
        if sch != first:
            problems.append(f"{where}: input {port} has schema ({sch}) but in0 has ({first}); merged streams must match")
    if raw["order_by"] not in first:
        problems.append(f"{where}: order attribute '{raw['order_by']}' is not in the schema ({first})")
    return MergeParams(raw["order_by"]), {"out": first}


def lower(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    return {"order": op.in_port("in0").schema.index(op.params.order_by), "n": len(op.inputs)}


def region_problem(op: Operator) -> str | None:
    return stateful_problem(op, "a merge orders all its inputs together")


KIND = Kind("merge", declare, derive, lower, "ops/merge.py.j2", region_problem=region_problem)
