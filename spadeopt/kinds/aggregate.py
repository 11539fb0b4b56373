"""``aggregate``: count- or event-time windows, tumbling or sliding, optionally by key.
Partitioned on ``by`` (stateful without). A region may hold it with a count window, or
with an event-time window: that window closes every key's group on any key's tuple, so
its channel copy learns the width-1 input's event time from watermark frames
(``event_time``, ``plan.eventtime``; tuples numbered below zero, never added to a group).
A tumbling window numbers each row with its group's first tuple, which is exactly the
width-1 order of the rows one close emits; a sliding one by window and group opening
(``number_bits``; ``docs/operators.md``, "Parallel regions"). A time window with an
allowed lateness keeps several windows open and runs the sliding code. Every time
window counts the tuples it drops as late (a ``runtime.metrics`` counter, checkpointed
with its state); ``late=True`` adds port ``late``, which carries them (input schema)."""

from __future__ import annotations

import ast
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
from spadeopt.kinds.output_checks import check_expr, function_names, output_schema, split_name
from spadeopt.kinds.windows import Window, bound_type, check_window, late_context
from spadeopt.model.expr import compile_expr
from spadeopt.model.graph import PARTITIONED, STATEFUL, AppGraph, Operator, SymbolRef
from spadeopt.model.schema import Schema
from spadeopt.model.types import NUMERIC, ExprProblem, check, infer_type, scope_lookup, static_type
from spadeopt.protocol import FINAL_BASE, SEQ

AGG_FUNCS = ("count", "sum", "avg", "min", "max", "first", "last")


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
    late: bool = False  # port "late" carries the tuples dropped as late (event-time windows)
    logical: str = ""  # a channel copy's logical operator (its late count reports under it)


def declare(name: str, input: Any, *, window: Window, output: Mapping[str, str],
            by: Iterable[str] = (), functions: Iterable[Callable] = (), late: bool = False) -> Decl:
    by = tuple(by)
    decl = Decl(name, "aggregate", {"in": [input]}, {"window": window, "by": by, "output": dict(output)},
                state=PARTITIONED if by else STATEFUL, key=by)
    decl.raw["functions"] = declare_functions(functions, decl)
    decl.raw["late"] = late  # checked by derive (a count window's late port is refused there)
    if late is True:
        decl.out_ports = ("out", "late")
    return decl


def derive(where: str, raw: dict, ins: dict[str, Schema], problems: Problems) -> Derived:
    schema = ins["in"]
    w: Window = raw["window"]
    check_window(where, w, schema, problems)
    late_ok = raw["late"] is False or (raw["late"] is True and w.kind == "time")
    if not isinstance(raw["late"], bool):
        problems.append(f"{where}: late must be True or False, got {raw['late']!r}")
    elif not late_ok:
        problems.append(f"{where}: late=True needs an event-time window (time_window(...)); a count window "
                        f"drops no tuple, so it has no late port")
    by = tuple(raw["by"])
    for b in by:
        if b not in schema:
            problems.append(f"{where}: group-by attribute '{b}' is not in the input schema ({schema})")
    fns = raw["functions"]
    outs, attrs, n_before = [], [], len(problems)
    for key, text in raw["output"].items():
        name, typ = split_name(key)
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
            else:  # the bounds' type: float event time, or a fractional window, make floats
                default = bound_type(w, schema) if w.attr in schema else "float"
            outs.append(AggOutput(name, func, ""))
            attrs.append((name, typ or default))
            continue
        if func not in AGG_FUNCS or len(args) != 1:
            problems.append(f"{where}: output '{name}' = '{text}': unknown aggregate; use one of {', '.join(AGG_FUNCS)}")
            continue
        inner = ast.unparse(args[0])
        if not check_expr(f"{where} output '{name}'", inner, problems, schema=schema, functions=function_names(fns)):
            continue
        inferred = infer_type(inner, schema)
        if func in ("sum", "avg") and static_type(inner, schema) in ("str", "bytes"):
            problems.append(f"{where}: output '{name}' = '{text}': {func} of a {static_type(inner, schema)} "
                            f"expression is not defined; use count(), first() or last(), or convert it")
            continue
        if func == "avg":
            default = "float"
        elif func == "sum" and inferred == "bool":
            default = "int"
        else:
            default = inferred
        if typ is None and default is None:
            problems.append(f"{where}: output '{name}' = '{text}'; declare its type as '{name}:float'")
            continue
        outs.append(AggOutput(name, func, inner))
        attrs.append((name, typ or default))
    if len(problems) != n_before or not late_ok:
        return None, None
    out_schema = output_schema(where, attrs, problems)
    if out_schema is None:
        return None, None
    late = {"late": schema} if raw["late"] else {}
    return AggregateParams(w, by, tuple(outs), fns, bool(late)), {"out": out_schema, **late}


def _accumulates(o: AggOutput, schema: Schema) -> bool:
    """Whether output ``o`` of a tumbling window can be kept as a running value that
    gives the same answer, bit for bit, as the function over the group's rows: count,
    first, last, bounds and keys always; min and max of an expression that cannot raise
    and always has one comparable type (the builtins keep the first of equal values and
    replace only on a strict comparison, as the running update does); sum and avg of an
    int or bool expression that cannot raise (int sums are exact in any order; a float
    sum is not accumulated: ``sum()`` over a list rounds differently from one running
    addition at a time on Python 3.12 and later)."""
    if o.func in ("key", "count", "wstart", "wend", "first", "last"):
        return True
    try:
        et = check(ast.parse(o.expr.strip(), mode="eval").body, scope_lookup({"": ("t", schema)}))
    except (SyntaxError, ExprProblem):
        return False
    if et.may_raise or not et.exact:
        return False
    if o.func in ("sum", "avg"):
        return et.type in ("int", "bool")
    return et.type in ("int", "float", "str", "bytes", "bool")


def _accumulators(p: AggregateParams, schema: Schema, compiled: Callable[[str], str], first_needed: bool
                  ) -> dict[str, Any] | None:
    """A tumbling window's group as running values instead of rows, when every output
    accumulates (``_accumulates``): ``[n, t0?, tn?, a1, ...]`` (its count, its first and
    last tuple when an output or the region's numbering reads them, one slot per sum, avg,
    min or max). ``opens``: the group a first tuple ``t`` opens; ``adds``: the lines that
    add ``t`` to group ``g``; ``slot``: output index -> its slot; ``t0``/``tn``: their
    slots (None: not kept). None when some output needs the rows."""
    if p.window.several_open or not p.window.tumbling or not all(_accumulates(o, schema) for o in p.output):
        return None
    t0 = 1 if first_needed or any(o.func == "first" for o in p.output) else None
    tn = (2 if t0 else 1) if any(o.func == "last" for o in p.output) else None
    new, update, slot = ["1"], ["g[0] += 1"], {}
    if t0 is not None:
        new.append("t")
    if tn is not None:
        new.append("t")
        update.append(f"g[{tn}] = t")
    for i, o in enumerate(p.output):
        if o.func not in ("sum", "avg", "min", "max"):
            continue
        j = slot[i] = len(new)
        e = compiled(o.expr)
        if o.func in ("sum", "avg"):
            new.append(f"0 + {e}")  # sum() adds each value to its start, 0
            update.append(f"g[{j}] += {e}")
        else:
            new.append(e)
            update += [f"_v = {e}", f"if _v {'>' if o.func == 'max' else '<'} g[{j}]:", f"    g[{j}] = _v"]
    return {"opens": "[" + ", ".join(new) + "]", "adds": update, "slot": slot, "t0": t0, "tn": tn}


def lower(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    p, schema = op.params, op.in_port("in").schema
    ren = rename(p.functions, imports)
    names = frozenset(ren)
    w = p.window
    types = [t for _, t in op.out_port("out").schema.attrs]
    # a parallel region's channel copy (spadeopt.plan.fission) carries the sequence number
    # last; rows flushed at end of stream sort after every tuple, in group-creation order
    final_seq = schema.index(SEQ) if p.output and p.output[-1].name == SEQ else None
    # an event-time window's channel copy: watermark copies (numbered below zero) advance
    # the window and are dropped; pulses passed on promise no less than its oldest open group
    wm_seq = final_seq if w.kind == "time" else None
    acc = _accumulators(p, schema, lambda text: compile_expr(text, schema, functions=names, rename=ren).source,
                        final_seq is not None)
    exprs = []
    for i, (o, typ) in enumerate(zip(p.output, types, strict=True)):
        if o.func == "key":
            k = p.by.index(o.expr)
            exprs.append(typed("key" if len(p.by) == 1 else f"key[{k}]", typ, schema.type_of(o.expr)))
        elif o.func == "count":
            exprs.append(typed("g[0]" if acc else "len(items)", typ, "int"))
        elif o.func in ("wstart", "wend"):
            var = "ws" if o.func == "wstart" else "we"
            # count windows have no bounds: the value is None whatever the declared type
            exprs.append(var if w.kind == "count" else typed(var, typ, bound_type(w, schema)))
        else:
            e = compile_expr(o.expr, schema, functions=names, rename=ren).source
            inner = static_type(o.expr, schema)
            if o.func == "first":
                src = compile_expr(o.expr, schema, functions=names, rename=ren, var="t0").source
            elif o.func == "last":
                src = compile_expr(o.expr, schema, functions=names, rename=ren, var="tn").source
            elif o.func == "avg":
                src = f"g[{acc['slot'][i]}] / g[0]" if acc else f"sum([{e} for t in items]) / len(items)"
                inner = "float" if inner in NUMERIC else None
            else:
                src = f"g[{acc['slot'][i]}]" if acc else f"{o.func}([{e} for t in items])"
                if o.func == "sum":
                    inner = ("float" if inner == "float" else "int") if inner in NUMERIC else None
            exprs.append(typed(src, typ, inner))
    attr = schema.index(w.attr) if w.kind == "time" else None
    mode = f"{w.kind}_{'sliding' if w.several_open or not w.tumbling else 'tumbling'}"
    # float bounds need float constants: window bounds are computed as k * slide
    lit = number if w.kind == "count" or bound_type(w, schema) == "int" else (lambda x: repr(float(x)))
    exact = w.kind == "time" and bound_type(w, schema) == "int"  # int arithmetic: no rounding
    return {"mode": mode, "size": lit(w.size), "slide": lit(w.slide), "attr": attr, "exact": exact,
            "key": key_source(p.by, schema), "row": row(exprs), "final_seq": final_seq,
            "final_base": FINAL_BASE, "wm_seq": wm_seq, "acc": acc,
            "first": f"g[{acc['t0']}]" if acc else "g[0]",  # a group's first tuple
            "lateness": number(w.lateness) if w.kind == "time" and w.lateness else None,
            "late": late_context(graph, op, w, p.logical or op.name) if w.kind == "time" else None,
            "late_port": p.late}


def region_problem(op: Operator) -> str | None:
    if op.state == STATEFUL:
        return stateful_problem(op, "an aggregate without by= keeps one state for all tuples")
    return None


def event_time(op: Operator) -> tuple[str, Window] | None:
    """A keyed event-time window (tumbling or sliding) advances on every tuple's event time."""
    w = op.params.window
    return (w.attr, w) if w.kind == "time" and op.state != STATEFUL else None


def forwards(op: Operator, attr: str) -> bool:
    return any(o.name == attr and o.func == "key" and o.expr == attr for o in op.params.output)


def channel_params(op: Operator, channel: int, width: int, dynamic: bool) -> AggregateParams:
    if not dynamic:
        return dataclasses.replace(op.params, logical=op.name)
    # a count window's row carries the number of the tuple that triggered it; a tumbling
    # event-time window's the number of its group's first tuple: one close emits its groups
    # in the order they were opened, all after the previous close, so these numbers are
    # that order; a sliding one's (its template) packs the window and its group's opening
    func = "first" if op.params.window.kind == "time" else "last"
    return dataclasses.replace(op.params, output=(*op.params.output, AggOutput(SEQ, func, SEQ)), logical=op.name)


def final_rows(op: Operator) -> bool:
    """A tumbling count window flushes its open groups numbered from its final base, and
    so does a sliding event-time window (the windows it closes at end of stream); a
    tumbling event-time window numbers them by their first tuples, below every final base."""
    w = op.params.window
    return (w.kind == "count" and w.tumbling) or _sliding_time(w)


def number_bits(op: Operator) -> int:
    """A sliding event-time window's channel copy numbers a row ``(k + 2**63) * 2**b + f``:
    ``k`` the window, ``f`` the number of the tuple that opened its group (width 1 emits a
    close's windows in order, each window's groups in the order they were opened), ``b``
    the bits of its inputs' numbers; so 64 bits more (``kinds.numbering``)."""
    return 64 if _sliding_time(op.params.window) else 0


def _sliding_time(w: Window) -> bool:
    return w.several_open  # sliding, or tumbling with an allowed lateness: the sliding code


def flushes_out_of_order(op: Operator) -> bool:
    """A tumbling count window: its end-of-stream flush emits its open groups in the order
    they were opened, whatever their rows' order values (decision 067)."""
    w = getattr(op.params, "window", None)
    return w is not None and w.kind == "count" and final_rows(op)


def rescale(op: Operator) -> dict[str, Any] | str:
    """How a channel copy's state moves to another width (``Kind.rescale``, carried out
    by ``deploy.rescale_windows``): a keyed tumbling window's groups by key (each group
    holds its first tuple, whose number orders the merged groups: the opening order a
    close, or a count window's end of stream, emits them in), its clock (an event-time window's: alike in every channel,
    watermark frames move them together; unused by a count window) and an event-time
    window's late-tuple counter, registered in that order (``templates/ops/aggregate.py.j2``).
    A group of running values is ``[n, t0, tn?, ...]`` in a copy and ``[n, t0?, tn?, ...]``
    at width 1 (``_accumulators``): ``single_first`` / ``single_last`` / ``copy_last`` say
    which tuples each keeps; ``arity``: a copy's input tuple's, the number last.

    ``sliding``: ``"time"`` for a window that keeps several open (sliding, or an allowed
    lateness; the template's sliding code): a group is a deque of its rows (sorted by event
    time), the clock ``[k, ks, ne]`` (the oldest open window), and a copy also registers
    ``opened`` (key -> the number of the tuple that opened its group, which numbers its
    rows and orders the merged groups; width 1 has none: its dict order is the opening
    order) before the late counter. ``"count"``: a sliding count window's group is
    ``[deque of its last size rows, tuples seen]``, its clock unused; no row it emits
    reads a kept tuple's number (a row carries the number of the tuple that triggered it)."""
    p, schema = op.params, op.in_port("in").schema
    w = p.window
    if SEQ not in schema or not p.by:
        return "only a keyed window's copy in a dynamic region keeps its state per key"
    if w.several_open:
        return {"slots": ["groups", "clock", "opened", "sum"], "key": list(p.by), "first": None, "sliding": "time"}
    if not w.tumbling:
        return {"slots": ["groups", "clock"], "key": list(p.by), "first": None, "sliding": "count"}
    first = 1 if all(_accumulates(o, schema) for o in p.output) else None  # else: a group is its rows
    user = [o for o in p.output if o.name != SEQ]  # the width-1 window's outputs
    return {"slots": ["groups", "clock", "sum"] if w.kind == "time" else ["groups", "clock"],
            "key": list(p.by), "first": first, "arity": len(schema.names),
            "single_first": any(o.func == "first" for o in user), "single_last": any(o.func == "last" for o in user),
            "copy_last": any(o.func == "last" for o in p.output)}


KIND = Kind("aggregate", declare, derive, lower, "ops/aggregate.py.j2", region_problem=region_problem,
            forwards=forwards, channel_params=channel_params, event_time=event_time, final_rows=final_rows,
            number_bits=number_bits, flushes_out_of_order=flushes_out_of_order, rescale=rescale)
