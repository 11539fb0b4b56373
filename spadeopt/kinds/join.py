"""``join``: a windowed equi-join processed in merged event-time order. Partitioned on
its key (stateful without one); a region may hold it when both sides' keys have the
same names (one hash of the entering stream, or of each of two entering streams, then
partitions both) and both order attributes are ints or both floats: its channel copy
numbers a match by its width-1 processing position, ``(order value, side, number of the
tuple that triggered it)`` packed into one int (``kinds.numbering``), so the merge puts
matches of every channel back in the width-1 order, ties between the sides included.
The order value is the side's *high-water mark* (its largest so far: the merge of the
sides by their heads is their merge by these marks); it differs from the trigger's own
only on a side that goes back (a tumbling count window's flush), which gets a side
exchange whose frames (numbered below zero, merged, never processed) give each channel
the width-1 mark (``plan.eventtime.flushed_sides``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from spadeopt.kinds.kind import (
    Decl,
    Derived,
    Imports,
    Kind,
    Problems,
    declare_functions,
    stateful_problem,
)
from spadeopt.kinds.lowering import key_source, number, rename, row, typed
from spadeopt.kinds.output_checks import (
    check_expr,
    function_names,
    output_schema,
    split_name,
    typed_output,
)
from spadeopt.kinds.windows import Window, check_window
from spadeopt.model.expr import compile_expr
from spadeopt.model.graph import PARTITIONED, STATEFUL, AppGraph, Operator, PortRef, SymbolRef
from spadeopt.model.schema import SCALARS, Schema
from spadeopt.model.types import static_type
from spadeopt.protocol import SEQ


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


def declare(name: str, left: Any, right: Any, *, on: str | tuple, order: str | tuple,
            window: tuple[Window, Window], output: Mapping[str, str], where: str | None = None,
            functions: Iterable[Callable] = ()) -> Decl:
    lk, rk = (on, on) if isinstance(on, str) else on
    lo, ro = (order, order) if isinstance(order, str) else order
    lk = (lk,) if isinstance(lk, str) else tuple(lk)
    rk = (rk,) if isinstance(rk, str) else tuple(rk)
    decl = Decl(name, "join", {"left": [left], "right": [right]},
                {"left_key": lk, "right_key": rk, "left_order": lo, "right_order": ro,
                 "left_window": window[0], "right_window": window[1], "output": dict(output),
                 "where": where}, state=PARTITIONED if lk else STATEFUL, key=lk)
    decl.raw["functions"] = declare_functions(functions, decl)
    return decl


def _check_sides(where: str, raw: dict, ls: Schema, rs: Schema, problems: Problems) -> None:
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
    for side, sch in (("left", ls), ("right", rs)):
        w = raw[f"{side}_window"]
        check_window(f"{where} {side} window", w, sch if w.kind == "time" else None, problems, allow_zero=True)
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
        if w.kind == "time" and w.lateness != 0:
            problems.append(f"{where}: the {side} window has an allowed_lateness; a join drops no late tuple "
                            f"(it keeps what the probing tuple's time reaches), so leave allowed_lateness out "
                            f"(it applies to aggregate windows)")


def derive(where: str, raw: dict, ins: dict[str, Schema], problems: Problems) -> Derived:
    ls, rs = ins["left"], ins["right"]
    n_before = len(problems)
    _check_sides(where, raw, ls, rs, problems)
    qualified = {"left": ("l", ls), "right": ("r", rs)}
    fns = raw["functions"]
    if raw["where"] is not None:
        check_expr(where + " where", raw["where"], problems, qualified=qualified, functions=function_names(fns))
    outs, attrs = [], []
    for key, text in raw["output"].items():
        if check_expr(f"{where} output '{split_name(key)[0]}'", text, problems, qualified=qualified,
                      functions=function_names(fns)):
            named = typed_output(where, key, text, None, problems, qualified=qualified)
            if named:
                outs.append((named[0], text))
                attrs.append(named)
    if len(problems) != n_before:
        return None, None
    out_schema = output_schema(where, attrs, problems)
    if out_schema is None:
        return None, None
    lk, rk = tuple(raw["left_key"]), tuple(raw["right_key"])
    return (JoinParams(lk, rk, raw["left_order"], raw["right_order"], raw["left_window"],
                       raw["right_window"], tuple(outs), raw["where"], fns),
            {"out": out_schema})


def _window(w: Window, schema: Schema) -> dict[str, Any]:
    if w.kind == "count":
        return {"kind": "count", "size": int(w.size), "store": w.size > 0}
    return {"kind": "time", "size": number(w.size), "attr": schema.index(w.attr), "store": True}


def lower(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    p = op.params
    ls, rs = op.in_port("left").schema, op.in_port("right").schema
    ren = rename(p.functions, imports)
    names = frozenset(ren)
    q = {"left": ("l", ls), "right": ("r", rs)}
    types = [t for _, t in op.out_port("out").schema.attrs]
    out_row = row([typed(compile_expr(e, functions=names, rename=ren, qualified=q).source, typ,
                         static_type(e, qualified=q)) if name != SEQ else "_num"
                   for (name, e), typ in zip(p.output, types, strict=True)])
    where = compile_expr(p.where, functions=names, rename=ren, qualified=q).source if p.where else None
    renumber = None
    if SEQ in op.out_port("out").schema:  # a channel copy in a dynamic region (kinds.numbering)
        # codegen adds ctx["final_base"]: every number reaching the join is below it
        renumber = {"float": ORDER_TYPES[ls.type_of(p.left_order)] == "float",
                    "lseq": ls.index(SEQ), "rseq": rs.index(SEQ),
                    "lframes": _framed(graph, op, "left"), "rframes": _framed(graph, op, "right")}
    return {
        "renumber": renumber,
        "lkey": key_source(p.left_key, ls, "l"), "rkey": key_source(p.right_key, rs, "r"),
        "lord": ls.index(p.left_order), "rord": rs.index(p.right_order),
        "lwin": _window(p.left_window, ls), "rwin": _window(p.right_window, rs),
        "row": out_row, "where": where,
    }


def _framed(graph: AppGraph, op: Operator, side: str) -> bool:
    """Whether a side exchange feeds ``side`` (``plan.eventtime.flushed_sides``): its
    high-water frames, numbered below zero, are merged but never processed."""
    return any(graph.op(src.op).kind == "exchange_merge" and graph.op(src.op).params.clocked
               for src in graph.publishers(PortRef(op.name, side)))


ORDER_TYPES = {name: s.order for name, s in SCALARS.items() if s.order}  # order type -> how a channel numbers


def _order_type(op: Operator, side: str) -> str | None:
    schema = op.in_port(side).schema
    attr = getattr(op.params, f"{side}_order")
    return None if schema is None or attr not in schema else schema.type_of(attr)


def region_problem(op: Operator) -> str | None:
    if op.state == STATEFUL:
        return stateful_problem(op)
    if tuple(op.params.left_key) != tuple(op.params.right_key):
        return (f"operator '{op.name}' joins on differently named keys {op.params.left_key} and "
                f"{op.params.right_key}; one hash of the entering stream cannot partition both")
    lt, rt = _order_type(op, "left"), _order_type(op, "right")
    if ORDER_TYPES.get(lt) is None or ORDER_TYPES.get(lt) != ORDER_TYPES.get(rt):
        return (f"operator '{op.name}' orders its sides by '{op.params.left_order}' ({lt}) and "
                f"'{op.params.right_order}' ({rt}); in a parallel region a join numbers its matches by "
                f"order value, so both must be ints or both floats")
    return None


def forwards(op: Operator, attr: str) -> bool:
    return any(n == attr and e.strip() in (attr, f"left.{attr}", f"right.{attr}") for n, e in op.params.output)


def channel_params(op: Operator, channel: int, width: int, dynamic: bool) -> JoinParams:
    if dynamic:  # a match carries its width-1 processing position (lower: the trigger's packed number)
        return dataclasses.replace(op.params, output=(*op.params.output, (SEQ, SEQ)))
    return op.params


def number_bits(op: Operator) -> int:
    """A match's number packs (order value in 64 bits, side, trigger's number)."""
    return 65


def order_of(op: Operator, port: str) -> str | None:
    """The attribute input ``port`` (``left`` or ``right``) is merged by."""
    return getattr(op.params, f"{port}_order", None)


def rescale(op: Operator) -> str:
    """A join's sides are kept per key, but with each side's high-water mark and the
    numbers of its matches (decision 067): not moved to another width yet."""
    return ("a join's windows are kept per key, but with each side's high-water mark and its matches' "
            "numbers, which are not moved to another width yet")


KIND = Kind("join", declare, derive, lower, "ops/join.py.j2", region_problem=region_problem,
            forwards=forwards, channel_params=channel_params, number_bits=number_bits, order_of=order_of,
            rescale=rescale)
