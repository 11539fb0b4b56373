"""``split``: route each tuple by a stable hash of one attribute to one of ``n`` outputs,
or by predicates (one output each; a tuple may go to several). Stateless; forwards every
attribute unchanged."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from spadeopt.kinds.kind import Decl, Derived, Imports, Kind, Problems, declare_functions
from spadeopt.kinds.lowering import rename, stable_hash
from spadeopt.kinds.output_checks import check_expr, function_names
from spadeopt.model.expr import compile_expr
from spadeopt.model.graph import AppGraph, Operator, SymbolRef
from spadeopt.model.schema import Schema


@dataclass(frozen=True)
class SplitParams:
    n: int
    by: str | None = None  # hash-partition on this attribute
    predicates: tuple[str, ...] | None = None  # or route by predicate (a tuple may go to several)
    functions: tuple[tuple[str, SymbolRef], ...] = ()


def declare(name: str, input: Any, *, n: int | None = None, by: str | None = None,
            predicates: Iterable[str] | None = None, functions: Iterable[Callable] = ()) -> Decl:
    preds = list(predicates) if predicates is not None else None
    count = len(preds) if preds is not None else (n or 0)
    decl = Decl(name, "split", {"in": [input]}, {"n": count, "by": by, "predicates": preds},
                out_ports=tuple(f"out{i}" for i in range(count)))
    if count < 1:
        decl.problems.append(f"split '{name}': needs n >= 1 outputs (got {count})")
    decl.raw["functions"] = declare_functions(functions, decl)
    return decl


def derive(where: str, raw: dict, ins: dict[str, Schema], problems: Problems) -> Derived:
    schema = ins["in"]
    n, by, preds = raw["n"], raw["by"], raw["predicates"]
    if (by is None) == (preds is None):
        problems.append(f"{where}: give exactly one of by= (hash routing) or predicates=")
        return None, None
    if by is not None and by not in schema:
        problems.append(f"{where}: split attribute '{by}' is not in the input schema ({schema})")
        return None, None
    if preds is not None:
        for p in preds:
            check_expr(where, p, problems, schema=schema, functions=function_names(raw["functions"]))
    return (SplitParams(n, by, tuple(preds) if preds else None, raw["functions"]),
            {f"out{i}": schema for i in range(n)})


def lower(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    p, schema = op.params, op.in_port("in").schema
    if p.by is not None:
        return {"hash": stable_hash(p.by, schema), "preds": None}
    ren = rename(p.functions, imports)
    return {"hash": None,
            "preds": [compile_expr(e, schema, functions=frozenset(ren), rename=ren).source for e in p.predicates]}


def _forwards(op: Operator, attr: str) -> bool:
    return True


KIND = Kind("split", declare, derive, lower, "ops/split.py.j2", forwards=_forwards, needs_lock=False)
