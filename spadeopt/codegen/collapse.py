"""Static-rate runs of functors compile into one loop (paper 004 §4, issue 14).

Partitioning (004 §4.1): inside a PE, a functor without a filter is static 1:1; a
functor with a filter, and every other kind, is dynamic. A *run* (``run_successor``,
the one rule; the optimizer reads it through ``collapsible_links``) is a maximal chain
``f1 -> f2 -> ... -> fk`` (k >= 2) of functors of one PE where each ``fi`` (i < k) has
exactly one subscriber, ``f(i+1)``, which has no other publisher and no filter; only the
head ``f1`` may filter (its filter becomes the comprehension's ``if`` clause, so a
dynamic head still starts a run). Nothing in a run is locked (production builds never
lock functors).

Code (004 §4.2, Spark's CollapseProject): the head's input function makes ONE pass per
batch, one list comprehension, and hands the tail's output to the tail's subscribers.
Each operator's row is substituted into its successor's: ``t[i]`` of ``f(j+1)`` is
replaced by ``fj``'s i-th expression. Invariants that keep answers (and failures) the
same as the uncollapsed build:

* An expression that may raise or call out (a call -- user functions, ``math.*``,
  declared-type conversions -- division, power, anything not shown *pure* below) of an
  intermediate operator is evaluated exactly once, in the original order (operator by
  operator, left to right), even when nothing downstream reads it: it is bound by its
  own ``for _cN in [expr]`` clause (CPython compiles that to an assignment).
* A pure expression (one ``model.types.check`` shows cannot raise: attribute reads, constants, ``+ - *`` on numbers -- but not an int
  attribute with a float: a huge int raises OverflowError converting -- string ``+``,
  comparisons of numbers or ``==``/``!=``, ``not``/``and``/``or``/``if-else`` of pure
  parts) cannot raise and has no effect, so it is inlined where it is read once, dropped
  where it is never read, and bound once by a clause where it is read several
  times (no duplicated work).
* The tail's own expressions stay in the output row, evaluated after every clause, as
  before.
* A value nothing reads is not converted to its declared type (``lower.typed``): the
  conversion only shapes what downstream sees, so the one failure collapsing can remove
  is a conversion of a value nobody reads (the call that made it still runs).
* When the row is rebuilt and its attributes are read more often than there are
  attributes, the loop unpacks each tuple into names (``for _a0, _a1, ... in batch``:
  one ``UNPACK_SEQUENCE``, then every read is a local load; measured 10 % faster on
  the 16-functor workload, and slower when few attributes are read). Otherwise an
  input attribute read three times or more (below the head's filter) is read once, by
  a ``for _aI in [t[I]]`` clause, as a hand-written loop binds ``p = t[1]``. Unpacking
  fails on a tuple of another arity where ``t[i]`` would silently drop the excess: the
  runtime checks user-made batches (``runtime.pe.check_shape``) and the wire checks
  every tuple, so a wrong shape stops the job, named, under every strategy.

Every line of the comprehension ends with ``# op: <operator>``: the runtime
(``runtime.pe._locate``) names that operator when the line raises. A comment above the
loop lists the operators it came from. Output is deterministic (no sets, no ids).
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass
from typing import Any

from spadeopt.model.graph import AppGraph
from spadeopt.model.types import ExprProblem, ExprType, check
from spadeopt.plan.static_runs import run_successor


@dataclass
class Run:
    """One static run: its operators in data-flow order and the rendered loop."""

    ops: list[str]
    lines: list[str]  # the comprehension's lines, each with its ``# op:`` marker; [] = pass-through


def find_runs(graph: AppGraph, specs: list[Any]) -> list[list[str]]:
    """Maximal runs (>= 2 functors) of one PE's operators, in declaration order of heads."""
    by_name = {s.op.name: s for s in specs}

    def succ(name: str) -> str | None:
        nxt = run_successor(graph, name)
        s = by_name[name]
        if nxt is None or nxt not in by_name or s.locked or by_name[nxt].locked:
            return None
        if len(s.emit[s.op.outputs[0].name]) != 1:
            return None  # the port is exposed too: it also sends to another PE
        return nxt

    has_pred = {n for n in (succ(s.op.name) for s in specs) if n is not None}
    runs = []
    for s in specs:
        name = s.op.name
        if name in has_pred or succ(name) is None:
            continue
        run = [name]
        while (n := succ(run[-1])) is not None:
            run.append(n)
        runs.append(run)
    return runs


# ---- purity and substitution ---------------------------------------------------------------


def _is_read(node: ast.AST, var: str = "t") -> int | None:
    if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == var
            and isinstance(node.slice, ast.Constant) and type(node.slice.value) is int):
        return node.slice.value
    return None


def _trivial(node: ast.AST) -> bool:
    """Costs nothing to repeat: a constant, a bound name, or an attribute read."""
    if isinstance(node, ast.Constant | ast.Name):
        return True
    return isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
        and isinstance(node.slice, ast.Constant)


def _pure(node: ast.AST, env_types: dict[str, str | None]) -> bool:
    """An expression over bound names cannot raise and has no effect (``model.types``);
    ``env_types`` maps the source of each leaf (``t[3]``, ``_c2``) to its type."""
    def lookup(leaf: ast.AST) -> ExprType | None:
        src = ast.unparse(leaf)
        return ExprType(env_types[src]) if src in env_types else None

    try:
        return not check(node, lookup).may_raise
    except ExprProblem:  # cannot happen on a validated app; were it to, it may raise
        return False


class _Subst(ast.NodeTransformer):
    def __init__(self, env: list[ast.AST | None]):
        self.env = env

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        i = _is_read(node)
        if i is not None:
            return copy.deepcopy(self.env[i])
        return self.generic_visit(node)


def _uses(rows: list[list[ast.AST] | None], width: list[int]) -> list[list[int]]:
    """uses[j][i]: how often attribute i of operator j's output is evaluated downstream
    after substitution (a plain copy forwards its successor's count)."""
    k = len(rows)
    uses: list[list[int]] = [[0] * w for w in width]
    uses[k - 1] = [1] * width[k - 1]
    for j in range(k - 2, -1, -1):
        nxt = rows[j + 1]
        if nxt is None:
            uses[j] = list(uses[j + 1])
            continue
        for m, e in enumerate(nxt):
            whole = _is_read(e)
            if whole is not None:
                uses[j][whole] += uses[j + 1][m]
                continue
            for node in ast.walk(e):
                i = _is_read(node)
                if i is not None:
                    uses[j][i] += 1
    return uses


def collapse_run(specs: dict[str, Any], run: list[str]) -> Run:
    """The comprehension of one run (see the module docstring for the invariants)."""
    head = specs[run[0]]
    in_schema = head.op.in_port("in").schema
    env: list[ast.AST | None] = [_read(i) for i in range(len(in_schema))]
    types: dict[str, str | None] = {f"t[{i}]": typ for i, (_, typ) in enumerate(in_schema.attrs)}
    rows = [None if specs[n].ctx["exprs"] is None
            else [ast.parse(e, mode="eval").body for e in specs[n].ctx["exprs"]] for n in run]
    widths = [len(specs[n].op.out_port("out").schema) for n in run]
    uses = _uses(rows, widths)
    clauses: list[tuple[str, ast.AST, str]] = []  # (variable, expression, operator)
    for j, name in enumerate(run[:-1]):
        row = rows[j]
        if row is None:
            continue
        out_types = [t for _, t in specs[name].op.out_port("out").schema.attrs]
        raw = specs[name].ctx["raw"]
        new: list[ast.AST | None] = []
        for i, e in enumerate(row):
            if uses[j][i] == 0:  # nothing reads the value: its declared-type conversion is moot
                e = ast.parse(raw[i], mode="eval").body
            sub = _Subst(env).visit(copy.deepcopy(e))
            pure = _pure(sub, types)
            if _trivial(sub) or (pure and uses[j][i] == 1):
                new.append(sub)
                continue
            if pure and uses[j][i] == 0:
                new.append(None)  # never read, cannot raise: dropped
                continue
            var = f"_c{len(clauses)}"
            clauses.append((var, sub, name))
            types[var] = out_types[i]
            new.append(ast.Name(var, ast.Load()))
        env = new
    tail = specs[run[-1]]
    if rows[-1] is None:
        out = [e for e in env]
    else:
        out = [_Subst(env).visit(copy.deepcopy(e)) for e in rows[-1]]
    out = [e for e in out if e is not None]
    if [ast.unparse(e) for e in out] == [f"t[{i}]" for i in range(len(in_schema))]:
        out_src = "t"  # the input tuple itself: never rebuild it
    else:
        out_src = None
    if out_src == "t" and not clauses and not head.ctx.get("filter"):
        return Run(list(run), [])  # a run of pass-throughs: ``out = batch``
    head_lines, clauses, out = _bind_inputs(head, clauses, out, rebuild=out_src is None)
    if out_src is None:
        items = [ast.unparse(e) for e in out]
        out_src = "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    lines = [f"{out_src}  # op: {tail.op.name}", *head_lines]
    lines.extend(f"for {v} in [{ast.unparse(e)}]  # op: {op}" for v, e, op in clauses)
    return Run(list(run), lines)


def _bind_inputs(head: Any, clauses: list[tuple[str, ast.AST, str]], out: list[ast.AST],
                 rebuild: bool) -> tuple[list[str], list[tuple[str, ast.AST, str]], list[ast.AST]]:
    """How the loop reads the head's input: its ``for`` and filter lines, and the clauses
    and output row with reads rebound.

    More reads than attributes and the row rebuilt: each tuple is unpacked into names
    (one ``UNPACK_SEQUENCE``; a read is then a local load). Otherwise ``t[i]`` reads stay,
    and an attribute read three times or more below the filter is read once, into a name.
    """
    in_schema = head.op.in_port("in").schema
    width = len(in_schema)
    filt = ast.parse(head.ctx["filter"], mode="eval").body if head.ctx.get("filter") else None
    below = [e for _, e, _ in clauses] + (out if rebuild else [])  # evaluated below the filter
    read = below + ([filt] if filt is not None else [])
    n_reads = sum(_reads(read, width))
    whole = sum(isinstance(n, ast.Name) and n.id == "t" for e in read for n in ast.walk(e)) - n_reads
    unpack = rebuild and n_reads > width and not whole  # no use of the tuple ``t`` itself
    hoist = {} if unpack else _hoisted(below, width)
    if unpack or hoist:
        env = [ast.Name(f"_a{i}", ast.Load()) if unpack or i in hoist else _read(i) for i in range(width)]
        clauses = [(v, _Subst(env).visit(e), op) for v, e, op in clauses]
        out = [_Subst(env).visit(e) for e in out]
        if unpack and filt is not None:
            filt = _Subst(env).visit(filt)
    if unpack:  # a tuple of another arity fails here, naming the head
        names = ", ".join(f"_a{i}" for i in range(width))
        lines = [f"for {names} in batch  # {', '.join(a for a, _ in in_schema.attrs)}  # op: {head.op.name}"]
    else:
        lines = ["for t in batch"]
    if filt is not None:
        lines.append(f"if {ast.unparse(filt)}  # op: {head.op.name}")
    lines.extend(f"for _a{i} in [t[{i}]]  # {in_schema.attrs[i][0]}, read {n} times  # op: {head.op.name}"
                 for i, n in sorted(hoist.items()))
    return lines, clauses, out


def _read(i: int) -> ast.AST:
    """The expression reading input attribute ``i``: ``t[i]``."""
    return ast.Subscript(ast.Name("t", ast.Load()), ast.Constant(i), ast.Load())


def _reads(exprs: list[ast.AST], width: int) -> list[int]:
    """How often each input attribute is read in ``exprs``."""
    reads = [0] * width
    for e in exprs:
        for node in ast.walk(e):
            i = _is_read(node)
            if i is not None:
                reads[i] += 1
    return reads


def _hoisted(exprs: list[ast.AST], width: int) -> dict[int, int]:
    """Input attributes read three times or more in ``exprs``, with their number of reads
    (a name costs a store and loads: for two reads it measured slower than two subscripts)."""
    return {i: n for i, n in enumerate(_reads(exprs, width)) if n > 2}


def apply(graph: AppGraph, specs: list[Any]) -> None:
    """Mark every run in ``specs`` (one PE's OpSpecs): the head gets ``run`` (the loop and
    the tail's emit line), the others ``in_run`` (the head's name; their input function is
    not generated, their final function is)."""
    by_name = {s.op.name: s for s in specs}
    for names in find_runs(graph, specs):
        run = collapse_run(by_name, names)
        tail = by_name[names[-1]]
        head = by_name[names[0]]
        for n in names[1:]:
            by_name[n].in_run = names[0]
        tail.run_tail = True
        head.run = {"ops": names, "lines": run.lines, "emit": tail.emit_line["out"]}
