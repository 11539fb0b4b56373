"""Per-kind lowering: an operator's params -> the code fragments its template spells.

Expressions are compiled here (attribute names -> ``t[i]``), window specs become
literal constants, and user callables become module-level imports with unique
aliases. Nothing is interpreted per tuple in the generated PE.
"""

from __future__ import annotations

from typing import Any

from spadeopt.model.expr import compile_expr
from spadeopt.model.graph import AppGraph, Operator, SymbolRef
from spadeopt.model.schema import Schema

Imports = dict[tuple[str, str], str]


def _alias(ref: SymbolRef, imports: Imports) -> str:
    key = (ref.module, ref.qualname)
    if key not in imports:
        base = "_u_" + ref.qualname.replace(".", "_")
        alias, n = base, 1
        while alias in imports.values():
            n += 1
            alias = f"{base}{n}"
        imports[key] = alias
    return imports[key]


def _rename(functions: tuple, imports: Imports) -> dict[str, str]:
    return {name: _alias(ref, imports) for name, ref in functions}


def _row(exprs: list[str]) -> str:
    return "(" + ", ".join(exprs) + ("," if len(exprs) == 1 else "") + ")"


def _key(attrs: tuple[str, ...], schema: Schema, var: str = "t") -> str:
    if not attrs:
        return "0"
    if len(attrs) == 1:
        return f"{var}[{schema.index(attrs[0])}]"
    return _row([f"{var}[{schema.index(a)}]" for a in attrs])


def lower_source(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    p = op.params
    return {"gen": _alias(p.generator, imports), "args": ", ".join(f"{k}={v!r}" for k, v in p.args)}


def lower_functor(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    p, schema = op.params, op.in_port("in").schema
    ren = _rename(p.functions, imports)
    names = frozenset(ren)
    flt = compile_expr(p.filter, schema, functions=names, rename=ren).source if p.filter else None
    if p.output is None:
        row = None
    else:
        exprs = [compile_expr(e, schema, functions=names, rename=ren).source for _, e in p.output]
        identity = exprs == [f"t[{i}]" for i in range(len(schema))]
        row = None if identity else _row(exprs)
    return {"filter": flt, "row": row}


def lower_aggregate(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    p, schema = op.params, op.in_port("in").schema
    ren = _rename(p.functions, imports)
    names = frozenset(ren)
    w = p.window
    exprs = []
    for o in p.output:
        if o.func == "key":
            k = p.by.index(o.expr)
            exprs.append("key" if len(p.by) == 1 else f"key[{k}]")
        elif o.func == "count":
            exprs.append("len(items)")
        elif o.func in ("wstart", "wend"):
            exprs.append("ws" if o.func == "wstart" else "we")
        else:
            e = compile_expr(o.expr, schema, functions=names, rename=ren).source
            if o.func == "first":
                exprs.append(compile_expr(o.expr, schema, functions=names, rename=ren, var="t0").source)
            elif o.func == "last":
                exprs.append(compile_expr(o.expr, schema, functions=names, rename=ren, var="tn").source)
            elif o.func == "avg":
                exprs.append(f"sum([{e} for t in items]) / len(items)")
            else:
                exprs.append(f"{o.func}([{e} for t in items])")
    attr = schema.index(w.attr) if w.kind == "time" else None
    mode = f"{w.kind}_{'tumbling' if w.tumbling else 'sliding'}"
    return {"mode": mode, "size": _num(w.size), "slide": _num(w.slide), "attr": attr,
            "key": _key(p.by, schema), "row": _row(exprs)}


def _num(x: float) -> str:
    return repr(int(x)) if float(x).is_integer() else repr(float(x))


def lower_join(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    p = op.params
    ls, rs = op.in_port("left").schema, op.in_port("right").schema
    ren = _rename(p.functions, imports)
    names = frozenset(ren)
    q = {"left": ("l", ls), "right": ("r", rs)}
    row = _row([compile_expr(e, functions=names, rename=ren, qualified=q).source for _, e in p.output])
    where = compile_expr(p.where, functions=names, rename=ren, qualified=q).source if p.where else None

    def win(w, sch, var):
        if w.kind == "count":
            return {"kind": "count", "size": int(w.size), "store": w.size > 0}
        return {"kind": "time", "size": _num(w.size), "attr": sch.index(w.attr), "store": True}

    return {
        "lkey": _key(p.left_key, ls, "l"), "rkey": _key(p.right_key, rs, "r"),
        "lord": ls.index(p.left_order), "rord": rs.index(p.right_order),
        "lwin": win(p.left_window, ls, "l"), "rwin": win(p.right_window, rs, "r"),
        "row": row, "where": where,
    }


def lower_split(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    p, schema = op.params, op.in_port("in").schema
    if p.by is not None:
        i = schema.index(p.by)
        typ = schema.type_of(p.by)
        if typ == "str":
            h = f"_crc32(t[{i}].encode())"
        elif typ == "bytes":
            h = f"_crc32(t[{i}])"
        elif typ == "float":
            h = f"hash(t[{i}])"
        else:
            h = f"t[{i}]"
        return {"hash": h, "preds": None}
    ren = _rename(p.functions, imports)
    return {"hash": None,
            "preds": [compile_expr(e, schema, functions=frozenset(ren), rename=ren).source for e in p.predicates]}


def lower_merge(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    return {"order": op.in_port("in0").schema.index(op.params.order_by), "n": len(op.inputs)}


def lower_union(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    return {}


def lower_custom(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    p = op.params
    return {"cls": _alias(p.cls, imports), "args": ", ".join(f"{k}={v!r}" for k, v in p.args)}


def lower_sink(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    schema = op.in_port("in").schema
    return {"mode": op.params.mode, "names": list(schema.names), "types": [t for _, t in schema.attrs]}


LOWER = {
    "source": lower_source, "functor": lower_functor, "aggregate": lower_aggregate,
    "join": lower_join, "split": lower_split, "merge": lower_merge, "union": lower_union,
    "custom": lower_custom, "sink": lower_sink,
}


def lower_op(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    return LOWER[op.kind](graph, op, imports)
