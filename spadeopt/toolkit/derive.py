"""Per-kind checks and schema derivation, run by ``App.build`` for every operator.

Each ``derive_<kind>`` gets the operator's declaration and its input schemas and returns
its normalised params and output schemas, appending every problem it finds to
``problems`` (so validation reports all of them at once).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from spadeopt.model.expr import ExprProblem, compile_expr, infer_type, static_type
from spadeopt.model.schema import TYPES, Schema
from spadeopt.toolkit.params import (
    AGG_FUNCS,
    AggOutput,
    AggregateParams,
    FunctorParams,
    JoinParams,
    SplitParams,
    Window,
)

Problems = list[str]


def _split_name(key: str) -> tuple[str, str | None]:
    name, sep, typ = key.partition(":")
    return name.strip(), (typ.strip() if sep else None)


def _fnames(functions: tuple) -> frozenset[str]:
    return frozenset(n for n, _ in functions)


def _expr(where: str, text: str, problems: Problems, **kw: Any) -> bool:
    try:
        compile_expr(text, **kw)
        return True
    except ExprProblem as exc:
        problems.append(f"{where}: {exc}")
        return False


def _typed_output(where: str, key: str, text: str, schema: Schema | None, problems: Problems,
                  qualified: dict | None = None) -> tuple[str, str] | None:
    name, typ = _split_name(key)
    if typ is None:
        if schema is not None:
            typ = infer_type(text, schema)
        if typ is None and qualified:
            body = ast.parse(text, mode="eval").body if _parses(text) else None
            if isinstance(body, ast.Attribute) and isinstance(body.value, ast.Name):
                sch = qualified.get(body.value.id, (None, None))[1]
                if sch is not None and body.attr in sch:
                    typ = sch.type_of(body.attr)
            elif isinstance(body, ast.Name):
                hits = [s for _, s in qualified.values() if body.id in s]
                if len(hits) == 1:
                    typ = hits[0].type_of(body.id)
        if typ is None:
            problems.append(
                f"{where}: output '{name}' computes '{text}'; declare its type as '{name}:float' "
                f"(or int, str, bool, bytes)"
            )
            return None
    if typ not in TYPES:
        problems.append(f"{where}: output '{name}' has unknown type '{typ}'; use one of {sorted(TYPES)}")
        return None
    return name, typ


def _parses(text: str) -> bool:
    try:
        ast.parse(text, mode="eval")
        return True
    except SyntaxError:
        return False


def derive_functor(where: str, raw: dict, ins: dict[str, Schema], problems: Problems):
    schema = ins["in"]
    fns = raw["functions"]
    if raw["filter"] is not None:
        _expr(where + " filter", raw["filter"], problems, schema=schema, functions=_fnames(fns))
    if raw["output"] is None:
        return FunctorParams(None, raw["filter"], fns), {"out": schema}
    outs, attrs = [], []
    for key, text in raw["output"].items():
        ok = _expr(f"{where} output '{_split_name(key)[0]}'", text, problems, schema=schema, functions=_fnames(fns))
        typed = _typed_output(where, key, text, schema, problems) if ok else None
        if typed:
            outs.append((typed[0], text))
            attrs.append(typed)
    if len(outs) != len(raw["output"]):
        return None, None
    try:
        out_schema = Schema.parse(attrs)
    except Exception as exc:  # duplicate names etc.
        problems.append(f"{where}: {exc}")
        return None, None
    return FunctorParams(tuple(outs), raw["filter"], fns), {"out": out_schema}


def _check_window(where: str, w: Window, schema: Schema | None, problems: Problems, allow_zero=False) -> None:
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


def _whole(x: float) -> bool:
    return float(x).is_integer()


def derive_aggregate(where: str, raw: dict, ins: dict[str, Schema], problems: Problems):
    schema = ins["in"]
    w: Window = raw["window"]
    _check_window(where, w, schema, problems)
    by = tuple(raw["by"])
    for b in by:
        if b not in schema:
            problems.append(f"{where}: group-by attribute '{b}' is not in the input schema ({schema})")
    fns = raw["functions"]
    outs, attrs, n_before = [], [], len(problems)
    for key, text in raw["output"].items():
        name, typ = _split_name(key)
        try:
            body = ast.parse(text.strip(), mode="eval").body
        except SyntaxError:
            problems.append(f"{where}: output '{name}' = '{text}' is not valid Python")
            continue
        if isinstance(body, ast.Name) and body.id in by:
            outs.append(AggOutput(name, "key", body.id))
            attrs.append((name, typ or schema.type_of(body.id)))
            continue
        if not (isinstance(body, ast.Call) and isinstance(body.func, ast.Name)):
            problems.append(
                f"{where}: output '{name}' = '{text}' must be a group-by attribute or one of "
                f"{', '.join(f + '()' for f in AGG_FUNCS)}, wstart(), wend()"
            )
            continue
        func, args = body.func.id, body.args
        if func in ("count", "wstart", "wend"):
            if args:
                problems.append(f"{where}: output '{name}': {func}() takes no argument")
                continue
            if func == "count" or w.kind == "count":
                default = "int"
            elif w.attr in schema and schema.type_of(w.attr) == "int" and _whole(w.size) and _whole(w.slide):
                default = "int"
            else:  # float event time, or a fractional window over int event time
                default = "float"
            outs.append(AggOutput(name, func, ""))
            attrs.append((name, typ or default))
            continue
        if func not in AGG_FUNCS or len(args) != 1:
            problems.append(f"{where}: output '{name}' = '{text}': unknown aggregate; use one of {', '.join(AGG_FUNCS)}")
            continue
        inner = ast.unparse(args[0])
        if not _expr(f"{where} output '{name}'", inner, problems, schema=schema, functions=_fnames(fns)):
            continue
        inferred = infer_type(inner, schema)
        if func in ("sum", "avg") and static_type(inner, schema) in ("str", "bytes"):
            problems.append(f"{where}: output '{name}' = '{text}': {func} of a {static_type(inner, schema)} "
                            f"expression is not defined; use count(), first() or last(), or convert it")
            continue
        if func == "avg":
            default = "float"
        elif func in ("sum",) and inferred == "bool":
            default = "int"
        else:
            default = inferred
        if typ is None and default is None:
            problems.append(f"{where}: output '{name}' = '{text}'; declare its type as '{name}:float'")
            continue
        outs.append(AggOutput(name, func, inner))
        attrs.append((name, typ or default))
    if len(problems) != n_before:
        return None, None
    try:
        out_schema = Schema.parse(attrs)
    except Exception as exc:
        problems.append(f"{where}: {exc}")
        return None, None
    return AggregateParams(w, by, tuple(outs), fns), {"out": out_schema}


def derive_join(where: str, raw: dict, ins: dict[str, Schema], problems: Problems):
    ls, rs = ins["left"], ins["right"]
    n_before = len(problems)
    lk, rk = tuple(raw["left_key"]), tuple(raw["right_key"])
    if len(lk) != len(rk):
        problems.append(f"{where}: join keys differ in length ({lk} vs {rk})")
    for side, keys, sch in (("left", lk, ls), ("right", rk, rs)):
        for k in keys:
            if k not in sch:
                problems.append(f"{where}: {side} key '{k}' is not in the {side} schema ({sch})")
    for side, attr, sch in (("left", raw["left_order"], ls), ("right", raw["right_order"], rs)):
        if attr not in sch:
            problems.append(f"{where}: {side} order attribute '{attr}' is not in the {side} schema ({sch})")
    _check_window(where + " left window", raw["left_window"], ls if raw["left_window"].kind == "time" else None, problems, allow_zero=True)
    _check_window(where + " right window", raw["right_window"], rs if raw["right_window"].kind == "time" else None, problems, allow_zero=True)
    for side in ("left", "right"):
        w, order = raw[f"{side}_window"], raw[f"{side}_order"]
        # a side's window is trimmed against the other side's order attribute as it probes
        if w.kind == "time" and w.attr != order:
            problems.append(f"{where}: the {side} time window is over '{w.attr}' but the {side} input "
                            f"is ordered by '{order}'; a join's time windows must be over the order "
                            f"attributes (time_window('{order}', {w.size:g}))")
        if w.slide != w.size:
            problems.append(f"{where}: the {side} window has a slide ({w.slide:g}); join windows only "
                            f"keep the last tuples, so give the size alone")
    qualified = {"left": ("l", ls), "right": ("r", rs)}
    fns = raw["functions"]
    if raw["where"] is not None:
        _expr(where + " where", raw["where"], problems, qualified=qualified, functions=_fnames(fns))
    outs, attrs = [], []
    for key, text in raw["output"].items():
        if _expr(f"{where} output '{_split_name(key)[0]}'", text, problems, qualified=qualified,
                 functions=_fnames(fns)):
            typed = _typed_output(where, key, text, None, problems, qualified=qualified)
            if typed:
                outs.append((typed[0], text))
                attrs.append(typed)
    if len(problems) != n_before:
        return None, None
    try:
        out_schema = Schema.parse(attrs)
    except Exception as exc:
        problems.append(f"{where}: {exc}")
        return None, None
    return (
        JoinParams(lk, rk, raw["left_order"], raw["right_order"], raw["left_window"],
                   raw["right_window"], tuple(outs), raw["where"], fns),
        {"out": out_schema},
    )


def derive_split(where: str, raw: dict, ins: dict[str, Schema], problems: Problems):
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
            _expr(where, p, problems, schema=schema, functions=_fnames(raw["functions"]))
    return SplitParams(n, by, tuple(preds) if preds else None, raw["functions"]), {f"out{i}": schema for i in range(n)}


def derive_merge(where: str, raw: dict, ins: dict[str, Schema], problems: Problems):
    schemas = list(ins.values())
    first = schemas[0]
    for port, sch in ins.items():
        if sch != first:
            problems.append(f"{where}: input {port} has schema ({sch}) but in0 has ({first}); merged streams must match")
    if raw["order_by"] not in first:
        problems.append(f"{where}: order attribute '{raw['order_by']}' is not in the schema ({first})")
    return raw["params"], {"out": first}


DERIVE: dict[str, Callable] = {
    "functor": derive_functor,
    "aggregate": derive_aggregate,
    "join": derive_join,
    "split": derive_split,
    "merge": derive_merge,
}
