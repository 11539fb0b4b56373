"""Per-kind lowering: an operator's params -> the code fragments its template spells.

Expressions are compiled here (attribute names -> ``t[i]``), window specs become
literal constants, and user callables become module-level imports with unique
aliases. Nothing is interpreted per tuple in the generated PE.
"""

from __future__ import annotations

import ast
import math
from typing import Any

from spadeopt.errors import CodegenError
from spadeopt.model.expr import compile_expr
from spadeopt.model.graph import AppGraph, Operator, SymbolRef
from spadeopt.model.schema import Schema
from spadeopt.runtime.fission import FINAL_BASE, SEQ

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


# ---- declared output types ---------------------------------------------------------------
# An output attribute's declared (or inferred) type is its schema type, so its values must
# have that type: ``"bucket:int": "ts // 60"`` on a float ``ts`` must yield ints (a hash
# split on it indexes by the value). Generated code converts a value only when the
# expression's type cannot be shown statically to be the declared one, so the common
# cases (bare attributes, arithmetic on typed attributes) cost nothing per tuple.

_NUMERIC = ("bool", "int", "float")
_MATH_INT = frozenset({"floor", "ceil", "trunc", "gcd", "lcm", "isqrt", "comb", "perm", "factorial"})
_MATH_BOOL = frozenset({"isnan", "isinf", "isfinite", "isclose"})
_MATH_FLOAT = frozenset({
    "sqrt", "cbrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan",
    "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "hypot",
    "fabs", "pow", "fsum", "fmod", "degrees", "radians", "copysign", "dist", "remainder", "erf",
    "erfc", "gamma", "lgamma", "ldexp", "nextafter", "ulp", "sumprod",
})
_CONST_TYPES = {bool: "bool", int: "int", float: "float", str: "str", bytes: "bytes"}


def static_type(text: str, schema: Schema | None = None,
                qualified: dict[str, tuple[str, Schema]] | None = None) -> str | None:
    """The type an expression's value always has, when that follows from the attribute
    types alone; ``None`` when it depends on values or user functions."""
    try:
        body = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return None
    return _type_of(body, schema, qualified or {})


def _num(a: str | None, b: str | None) -> str | None:
    if a in _NUMERIC and b in _NUMERIC:
        return "float" if "float" in (a, b) else "int"
    return None


def _type_of(node: ast.AST, schema: Schema | None, qual: dict) -> str | None:
    def ty(n: ast.AST) -> str | None:
        return _type_of(n, schema, qual)

    if isinstance(node, ast.Constant):
        return _CONST_TYPES.get(type(node.value))
    if isinstance(node, ast.Name):
        if schema is not None and node.id in schema:
            return schema.type_of(node.id)
        hits = [s.type_of(node.id) for _, s in qual.values() if node.id in s]
        if len(hits) == 1:
            return hits[0]
        return None
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        if node.value.id == "math":
            return "float" if node.attr in ("pi", "e", "tau", "inf", "nan") else None
        sch = qual.get(node.value.id, (None, None))[1]
        return sch.type_of(node.attr) if sch is not None and node.attr in sch else None
    if isinstance(node, ast.Compare):
        return "bool"
    if isinstance(node, ast.UnaryOp):
        if isinstance(node.op, ast.Not):
            return "bool"
        t = ty(node.operand)
        if isinstance(node.op, ast.Invert):
            return "int" if t in ("int", "bool") else None
        return {"bool": "int", "int": "int", "float": "float"}.get(t or "")
    if isinstance(node, ast.BoolOp):
        types = {ty(v) for v in node.values}
        return types.pop() if len(types) == 1 else None
    if isinstance(node, ast.IfExp):
        a, b = ty(node.body), ty(node.orelse)
        return a if a == b else None
    if isinstance(node, ast.BinOp):
        a, b = ty(node.left), ty(node.right)
        if isinstance(node.op, ast.Div):
            return "float" if _num(a, b) else None
        if isinstance(node.op, ast.Add) and a == b and a in ("str", "bytes"):
            return a
        if isinstance(node.op, ast.Mult) and {a, b} in ({"str", "int"}, {"bytes", "int"}):
            return "str" if "str" in (a, b) else "bytes"
        if isinstance(node.op, ast.Pow):
            return "float" if _num(a, b) == "float" else None  # int ** negative int is a float
        if isinstance(node.op, ast.Add | ast.Sub | ast.Mult | ast.FloorDiv | ast.Mod):
            return _num(a, b)
        if a in ("int", "bool") and b in ("int", "bool"):  # bit operations
            logical = isinstance(node.op, ast.BitAnd | ast.BitOr | ast.BitXor)
            return "bool" if logical and a == b == "bool" else "int"
        return None
    if isinstance(node, ast.Subscript):
        t = ty(node.value)
        if t == "str":
            return "str"
        if t == "bytes":
            return "bytes" if isinstance(node.slice, ast.Slice) else "int"
        return None
    if isinstance(node, ast.Call) and not node.keywords:
        f, args = node.func, node.args
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "math":
            if f.attr in _MATH_INT:
                return "int"
            if f.attr in _MATH_BOOL:
                return "bool"
            return "float" if f.attr in _MATH_FLOAT else None
        if not isinstance(f, ast.Name):
            return None
        if f.id in ("int", "float", "str", "bool") and len(args) == 1:
            return f.id
        if f.id == "len":
            return "int"
        if f.id == "abs" and len(args) == 1:
            return {"bool": "int", "int": "int", "float": "float"}.get(ty(args[0]) or "")
        if f.id == "round":
            if len(args) == 1:
                return "int" if ty(args[0]) in _NUMERIC else None
            return {"int": "int", "bool": "int", "float": "float"}.get(ty(args[0]) or "")
        if f.id in ("min", "max") and len(args) > 1:
            types = {ty(a) for a in args}
            return types.pop() if len(types) == 1 else None
    return None


def typed(source: str, declared: str, actual: str | None) -> str:
    """``source`` converted to ``declared`` unless it statically has that type already.
    ``bytes`` is only converted from ``str`` (UTF-8); other values are left as they are."""
    if actual == declared:
        return source
    if declared == "bytes":
        return f"({source}).encode()" if actual == "str" else source
    return f"{declared}({source})"


def _literal(v: Any, where: str) -> str:
    """Python source for an argument value. ``repr`` is not enough: a float NaN or
    infinity reprs as the undefined names ``nan``/``inf``."""
    if isinstance(v, float) and not math.isfinite(v):
        return "float('nan')" if math.isnan(v) else ("float('inf')" if v > 0 else "-float('inf')")
    if v is None:
        return "None"
    for base in (bool, int, float, str, bytes):  # subclasses (IntEnum, numpy.float64) as the base
        if isinstance(v, base):
            return repr(base(v))
    if type(v) is list:
        return "[" + ", ".join(_literal(x, where) for x in v) + "]"
    if type(v) is tuple:
        return "(" + ", ".join(_literal(x, where) for x in v) + ("," if len(v) == 1 else "") + ")"
    if type(v) is dict:
        return "{" + ", ".join(f"{_literal(k, where)}: {_literal(x, where)}" for k, x in v.items()) + "}"
    msg = (f"{where}: argument value {v!r} of type {type(v).__name__} cannot be written into "
           f"generated code; pass None, bool, int, float, str, bytes, or lists, tuples and dicts of them")
    raise CodegenError(msg)


def _args(op: Operator, pairs: tuple) -> str:
    return ", ".join(f"{k}={_literal(v, f'operator {op.name!r} argument {k!r}')}" for k, v in pairs)


def lower_source(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    p = op.params
    args = _args(op, p.args)
    if p.split:  # a splittable generator: this copy's share of the splits (all of them outside a region)
        args = ", ".join(a for a in (args, f"part={p.part}, parts={p.parts}") if a)
    out = op.out_port("out").schema
    return {"gen": _alias(p.generator, imports), "args": args, "split": p.split, "part": p.part,
            "parts": p.parts, "seq": out is not None and SEQ in out}


def lower_functor(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    p, schema = op.params, op.in_port("in").schema
    ren = _rename(p.functions, imports)
    names = frozenset(ren)
    flt = compile_expr(p.filter, schema, functions=names, rename=ren).source if p.filter else None
    if p.output is None:
        row = None
    else:
        types = [t for _, t in op.out_port("out").schema.attrs]
        raw = [compile_expr(e, schema, functions=names, rename=ren).source for _, e in p.output]
        exprs = [typed(src, typ, static_type(e, schema))
                 for src, (_, e), typ in zip(raw, p.output, types, strict=True)]
        identity = exprs == [f"t[{i}]" for i in range(len(schema))]
        row = None if identity else _row(exprs)
    # exprs: the row's expressions one by one (None: the identity), and raw: the same
    # before the declared-type conversion, for codegen.collapse
    return {"filter": flt, "row": row, "exprs": None if row is None else exprs,
            "raw": None if row is None else raw}


def lower_aggregate(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    p, schema = op.params, op.in_port("in").schema
    ren = _rename(p.functions, imports)
    names = frozenset(ren)
    w = p.window
    types = [t for _, t in op.out_port("out").schema.attrs]
    exprs = []
    for o, typ in zip(p.output, types, strict=True):
        if o.func == "key":
            k = p.by.index(o.expr)
            exprs.append(typed("key" if len(p.by) == 1 else f"key[{k}]", typ, schema.type_of(o.expr)))
        elif o.func == "count":
            exprs.append(typed("len(items)", typ, "int"))
        elif o.func in ("wstart", "wend"):
            var = "ws" if o.func == "wstart" else "we"
            # count windows have no bounds: the value is None whatever the declared type
            exprs.append(var if w.kind == "count" else typed(var, typ, _bound_type(w, schema)))
        else:
            e = compile_expr(o.expr, schema, functions=names, rename=ren).source
            inner = static_type(o.expr, schema)
            if o.func == "first":
                src = compile_expr(o.expr, schema, functions=names, rename=ren, var="t0").source
            elif o.func == "last":
                src = compile_expr(o.expr, schema, functions=names, rename=ren, var="tn").source
            elif o.func == "avg":
                src, inner = f"sum([{e} for t in items]) / len(items)", "float" if inner in _NUMERIC else None
            else:
                src = f"{o.func}([{e} for t in items])"
                if o.func == "sum":
                    inner = _num(inner, "int") if inner else None
            exprs.append(typed(src, typ, inner))
    attr = schema.index(w.attr) if w.kind == "time" else None
    mode = f"{w.kind}_{'tumbling' if w.tumbling else 'sliding'}"
    # float bounds need float constants: window bounds are computed as k * slide
    lit = _lit if w.kind == "count" or _bound_type(w, schema) == "int" else (lambda x: repr(float(x)))
    exact = w.kind == "time" and _bound_type(w, schema) == "int"  # int arithmetic: no rounding
    # a parallel region's channel copy (spadeopt.plan.fission) carries the sequence number
    # last; rows flushed at end of stream sort after every tuple, in group-creation order
    final_seq = schema.index(SEQ) if p.output and p.output[-1].name == SEQ else None
    return {"mode": mode, "size": lit(w.size), "slide": lit(w.slide), "attr": attr, "exact": exact,
            "key": _key(p.by, schema), "row": _row(exprs), "final_seq": final_seq, "final_base": FINAL_BASE}


def _bound_type(w, schema: Schema) -> str:
    """The type of a time window's bounds: the attribute's, unless the window's size or
    slide is fractional."""
    whole = float(w.size).is_integer() and float(w.slide).is_integer()
    return schema.type_of(w.attr) if schema.type_of(w.attr) == "float" or whole else "float"


def _lit(x: float) -> str:
    return repr(int(x)) if float(x).is_integer() else repr(float(x))


def lower_join(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    p = op.params
    ls, rs = op.in_port("left").schema, op.in_port("right").schema
    ren = _rename(p.functions, imports)
    names = frozenset(ren)
    q = {"left": ("l", ls), "right": ("r", rs)}
    types = [t for _, t in op.out_port("out").schema.attrs]
    row = _row([typed(compile_expr(e, functions=names, rename=ren, qualified=q).source, typ,
                      static_type(e, qualified=q))
                for (_, e), typ in zip(p.output, types, strict=True)])
    where = compile_expr(p.where, functions=names, rename=ren, qualified=q).source if p.where else None

    def win(w, sch, var):
        if w.kind == "count":
            return {"kind": "count", "size": int(w.size), "store": w.size > 0}
        return {"kind": "time", "size": _lit(w.size), "attr": sch.index(w.attr), "store": True}

    return {
        "lkey": _key(p.left_key, ls, "l"), "rkey": _key(p.right_key, rs, "r"),
        "lord": ls.index(p.left_order), "rord": rs.index(p.right_order),
        "lwin": win(p.left_window, ls, "l"), "rwin": win(p.right_window, rs, "r"),
        "row": row, "where": where,
    }


def stable_hash(attr: str, schema: Schema) -> str:
    """A hash of attribute ``attr`` of ``t`` that is the same in every process."""
    i = schema.index(attr)
    typ = schema.type_of(attr)
    if typ == "str":
        return f"_crc32(t[{i}].encode())"
    if typ == "bytes":
        return f"_crc32(t[{i}])"
    if typ == "float":
        # hash() of a float is its value's, except NaN's (per object since Python 3.10)
        return f"(hash(t[{i}]) if t[{i}] == t[{i}] else 0)"
    return f"t[{i}]"


def lower_split(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    p, schema = op.params, op.in_port("in").schema
    if p.by is not None:
        return {"hash": stable_hash(p.by, schema), "preds": None}
    ren = _rename(p.functions, imports)
    return {"hash": None,
            "preds": [compile_expr(e, schema, functions=frozenset(ren), rename=ren).source for e in p.predicates]}


def lower_fission_split(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    p, schema = op.params, op.in_port("in").schema
    h = None
    if p.key:
        parts = [stable_hash(a, schema) for a in p.key]
        # hash() of a tuple of ints (and of floats) does not depend on PYTHONHASHSEED
        h = parts[0] if len(parts) == 1 else f"hash(({', '.join(parts)}))"
    mode = "static" if p.ordering == "static" else ("hash" if p.key else "round_robin")
    return {"mode": mode, "hash": h, "width": p.width, "block": p.block}


def lower_fission_merge(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    p = op.params
    return {"mode": p.ordering, "width": p.width, "block": p.block}


def lower_merge(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    return {"order": op.in_port("in0").schema.index(op.params.order_by), "n": len(op.inputs)}


def lower_union(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    return {}


def lower_custom(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    p = op.params
    return {"cls": _alias(p.cls, imports), "args": _args(op, p.args)}


def lower_sink(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    schema = op.in_port("in").schema
    return {"mode": op.params.mode, "names": list(schema.names), "types": [t for _, t in schema.attrs],
            "report_as": op.params.report_as or op.name}


LOWER = {
    "source": lower_source, "functor": lower_functor, "aggregate": lower_aggregate,
    "join": lower_join, "split": lower_split, "merge": lower_merge, "union": lower_union,
    "custom": lower_custom, "sink": lower_sink,
    "fission_split": lower_fission_split, "fission_merge": lower_fission_merge,
}


def lower_op(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    return LOWER[op.kind](graph, op, imports)
