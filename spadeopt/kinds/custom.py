"""``custom``: a user class with ``process(port, tup, submit)`` and optionally
``on_final(submit)``. Output schemas are declared; stateful unless it declares
``state=``; never in a parallel region (fission's sequence number cannot travel through
user code); its code may block, so profiling timing windows never cover it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from spadeopt.errors import UsageError
from spadeopt.kinds.base import (
    Decl,
    Imports,
    Kind,
    derive_declared,
    parse_schema,
    stateful_problem,
    symbol_of,
)
from spadeopt.kinds.lowering import alias, call_args
from spadeopt.model.graph import PARTITIONED, STATEFUL, STATELESS, AppGraph, Operator, SymbolRef


@dataclass(frozen=True)
class CustomParams:
    cls: SymbolRef
    args: tuple[tuple[str, Any], ...] = ()


def declare(name: str, cls: type, *, inputs: Mapping[str, Any], outputs: Mapping[str, Any],
            args: Mapping[str, Any] | None = None, state: str = STATEFUL, key: Iterable[str] = (),
            tuple_generating: Mapping[str, bool] | None = None) -> Decl:
    decl = Decl(name, "custom", {p: (list(s) if isinstance(s, list) else [s]) for p, s in inputs.items()}, {},
                out_ports=tuple(outputs), state=state, key=tuple(key),
                tuple_generating=dict(tuple_generating or {}))
    schemas = {p: parse_schema(s, decl, f"output '{p}'") for p, s in outputs.items()}
    decl.out_schemas = schemas if all(schemas.values()) else None
    if state not in (STATELESS, PARTITIONED, STATEFUL):
        decl.problems.append(f"custom '{name}': state must be stateless, partitioned or stateful")
    try:
        decl.raw["params"] = CustomParams(symbol_of(cls, f"custom '{name}'"), tuple(sorted((args or {}).items())))
    except UsageError as exc:
        decl.problems.append(str(exc))
    for p in decl.tuple_generating:
        if p not in inputs:
            decl.problems.append(f"custom '{name}': tuple_generating names unknown input port '{p}'")
    decl.raw["outputs"] = decl.out_schemas
    return decl


def lower(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    p = op.params
    return {"cls": alias(p.cls, imports), "args": call_args(op, p.args)}


def region_problem(op: Operator) -> str | None:
    return stateful_problem(op, "a custom operator is stateful unless it declares state='stateless' or "
                                "'partitioned'") or (
        f"operator '{op.name}' is a custom operator: the merge's sequence number cannot travel "
        f"through user code, so it cannot be replicated yet")


KIND = Kind("custom", declare, derive_declared, lower, "ops/custom.py.j2", declares_outputs=True,
            region_problem=region_problem, never_blocks=False)
