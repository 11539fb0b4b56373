"""``functor``: compute or project attributes and/or filter tuples. Stateless; static-rate
(one tuple out per tuple in) without a filter; a chain of functors in one PE may compile
into one loop (``codegen.collapse``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from spadeopt.kinds.kind import Decl, Derived, Imports, Kind, Problems, declare_functions
from spadeopt.kinds.lowering import rename, row, typed
from spadeopt.kinds.output_checks import (
    check_expr,
    function_names,
    output_schema,
    split_name,
    typed_output,
)
from spadeopt.model.expr import compile_expr
from spadeopt.model.graph import DYNAMIC, STATIC, AppGraph, Operator, SymbolRef
from spadeopt.model.schema import Schema
from spadeopt.model.types import static_type
from spadeopt.protocol import SEQ


@dataclass(frozen=True)
class FunctorParams:
    output: tuple[tuple[str, str], ...] | None  # (name, expression); None = pass every attribute
    filter: str | None = None
    functions: tuple[tuple[str, SymbolRef], ...] = ()


def declare(name: str, input: Any, *, output: Mapping[str, str] | None = None,
            filter: str | None = None, functions: Iterable[Callable] = ()) -> Decl:
    decl = Decl(name, "functor", {"in": [input]},
                {"output": dict(output) if output is not None else None, "filter": filter})
    decl.raw["functions"] = declare_functions(functions, decl)
    return decl


def derive(where: str, raw: dict, ins: dict[str, Schema], problems: Problems) -> Derived:
    schema = ins["in"]
    fns = raw["functions"]
    if raw["filter"] is not None:
        check_expr(where + " filter", raw["filter"], problems, schema=schema, functions=function_names(fns))
    if raw["output"] is None:
        return FunctorParams(None, raw["filter"], fns), {"out": schema}
    outs, attrs = [], []
    for key, text in raw["output"].items():
        ok = check_expr(f"{where} output '{split_name(key)[0]}'", text, problems, schema=schema,
                        functions=function_names(fns))
        named = typed_output(where, key, text, schema, problems) if ok else None
        if named:
            outs.append((named[0], text))
            attrs.append(named)
    if len(outs) != len(raw["output"]):
        return None, None
    out_schema = output_schema(where, attrs, problems)
    if out_schema is None:
        return None, None
    return FunctorParams(tuple(outs), raw["filter"], fns), {"out": out_schema}


def lower(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    p, schema = op.params, op.in_port("in").schema
    ren = rename(p.functions, imports)
    names = frozenset(ren)
    flt = compile_expr(p.filter, schema, functions=names, rename=ren).source if p.filter else None
    if p.output is None:
        out_row = exprs = raw = None
    else:
        types = [t for _, t in op.out_port("out").schema.attrs]
        raw = [compile_expr(e, schema, functions=names, rename=ren).source for _, e in p.output]
        exprs = [typed(src, typ, static_type(e, schema))
                 for src, (_, e), typ in zip(raw, p.output, types, strict=True)]
        identity = exprs == [f"t[{i}]" for i in range(len(schema))]
        out_row = None if identity else row(exprs)
    # exprs: the row's expressions one by one (None: the identity), and raw: the same
    # before the declared-type conversion, for codegen.collapse
    return {"filter": flt, "row": out_row, "exprs": None if out_row is None else exprs,
            "raw": None if out_row is None else raw}


def selectivity(op: Operator) -> str:
    return STATIC if op.params.filter is None else DYNAMIC


def forwards(op: Operator, attr: str) -> bool:
    out = op.params.output
    return out is None or any(n == attr and e.strip() == attr for n, e in out)


def channel_params(op: Operator, channel: int, width: int, dynamic: bool) -> FunctorParams:
    if dynamic and op.params.output is not None:  # copy the sequence number through
        return dataclasses.replace(op.params, output=(*op.params.output, (SEQ, SEQ)))
    return op.params


KIND = Kind("functor", declare, derive, lower, "ops/functor.py.j2", selectivity=selectivity,
            forwards=forwards, channel_params=channel_params, needs_lock=False, collapsible=True)
