"""Attribute expressions: parsed once at build time, specialised into straight Python.

An expression is a small Python expression over a tuple's attribute names, e.g.
``"price * volume"`` or ``"ask < vwap and size > 100"``. ``compile_expr`` checks
every name against the schema(s) and the declared functions, and rewrites attribute
names into positional reads (``t[2] * t[3]``), so the generated PE never interprets a
parameter per tuple. Only a safe subset of Python is accepted: no lambdas,
comprehensions, assignments or attribute access other than ``math.*`` and, in joins,
``left.x`` / ``right.x``.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass

from spadeopt.model.schema import Schema

SAFE_BUILTINS = frozenset(
    {"abs", "min", "max", "round", "len", "int", "float", "str", "bool", "bytes", "divmod", "pow"}
)
_ALLOWED = (
    ast.Expression, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Call,
    ast.Constant, ast.Name, ast.Load, ast.Subscript, ast.Slice, ast.Tuple, ast.Attribute,
    ast.operator, ast.unaryop, ast.boolop, ast.cmpop, ast.keyword,
)


class ExprProblem(Exception):
    """One problem with one expression (collected by the validator)."""


@dataclass(frozen=True)
class Compiled:
    """A checked expression: its Python source over ``t`` (or ``l``/``r``) and what it uses."""

    source: str
    attrs: tuple[str, ...]
    functions: tuple[str, ...]
    is_attr: bool  # the whole expression is one attribute name (a copy)


class _Rewriter(ast.NodeTransformer):
    def __init__(self, scopes: Mapping[str, tuple[str, Schema]], functions: frozenset[str],
                 rename: Mapping[str, str] | None = None):
        self.rename = dict(rename or {})
        self.scopes = scopes  # qualifier ('' for unqualified) -> (variable, schema)
        self.functions = functions
        self.attrs: list[str] = []
        self.used_functions: list[str] = []

    def _resolve(self, name: str) -> tuple[str, int] | None:
        hits = [(var, sch.index(name)) for q, (var, sch) in self.scopes.items() if q == "" and name in sch]
        if not hits:
            hits = [(var, sch.index(name)) for q, (var, sch) in self.scopes.items() if q and name in sch]
            if len(hits) > 1:
                msg = f"attribute '{name}' is ambiguous; qualify it as left.{name} or right.{name}"
                raise ExprProblem(msg)
        return hits[0] if hits else None

    def visit_Name(self, node: ast.Name) -> ast.AST:
        hit = self._resolve(node.id)
        if hit is not None:
            self.attrs.append(node.id)
            var, idx = hit
            return ast.copy_location(
                ast.Subscript(ast.Name(var, ast.Load()), ast.Constant(idx), ast.Load()), node
            )
        if node.id in self.functions:
            self.used_functions.append(node.id)
            if node.id in self.rename:
                return ast.copy_location(ast.Name(self.rename[node.id], ast.Load()), node)
            return node
        if node.id in SAFE_BUILTINS or node.id in {"True", "False", "None", "math"}:
            return node
        msg = f"unknown name '{node.id}'"
        raise ExprProblem(msg)

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if isinstance(node.value, ast.Name) and node.value.id == "math":
            return node
        if isinstance(node.value, ast.Name) and node.value.id in self.scopes:
            var, sch = self.scopes[node.value.id]
            if node.attr not in sch:
                msg = f"'{node.value.id}' has no attribute '{node.attr}' (it has {', '.join(sch.names)})"
                raise ExprProblem(msg)
            self.attrs.append(node.attr)
            return ast.copy_location(
                ast.Subscript(ast.Name(var, ast.Load()), ast.Constant(sch.index(node.attr)), ast.Load()),
                node,
            )
        msg = f"attribute access '{ast.unparse(node)}' is not allowed (only math.*, left.x, right.x)"
        raise ExprProblem(msg)


def compile_expr(
    text: str,
    schema: Schema | None = None,
    *,
    functions: frozenset[str] = frozenset(),
    var: str = "t",
    qualified: Mapping[str, tuple[str, Schema]] | None = None,
    rename: Mapping[str, str] | None = None,
) -> Compiled:
    """Check ``text`` and rewrite it to positional reads; raises ``ExprProblem``."""
    if not isinstance(text, str) or not text.strip():
        msg = f"expression must be a non-empty string, got {text!r}"
        raise ExprProblem(msg)
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        msg = f"expression '{text}' is not valid Python: {exc.msg}"
        raise ExprProblem(msg) from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            msg = f"expression '{text}' uses {type(node).__name__}, which is not allowed"
            raise ExprProblem(msg)
    scopes: dict[str, tuple[str, Schema]] = {}
    if schema is not None:
        scopes[""] = (var, schema)
    if qualified:
        scopes.update(qualified)
    rw = _Rewriter(scopes, functions, rename)
    tree_copy = ast.parse(text.strip(), mode="eval")
    try:
        new = rw.visit(tree)
    except ExprProblem as exc:
        msg = f"expression '{text}': {exc}"
        raise ExprProblem(msg) from None
    try:
        type_of(tree_copy.body, scopes)
    except ExprProblem as exc:
        msg = f"expression '{text}': {exc}"
        raise ExprProblem(msg) from None
    ast.fix_missing_locations(new)
    is_attr = isinstance(tree.body, ast.Name) and tree.body.id in rw.attrs
    return Compiled(ast.unparse(new), tuple(dict.fromkeys(rw.attrs)), tuple(dict.fromkeys(rw.used_functions)), is_attr)


def infer_type(text: str, schema: Schema) -> str | None:
    """The type of an expression when it is a bare attribute, a literal or a test; else None
    (a computed output declares its type: the schema says what the developer meant)."""
    try:
        body = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return None
    if isinstance(body, ast.Name) and body.id in schema:
        return schema.type_of(body.id)
    if isinstance(body, ast.Constant):
        return {int: "int", float: "float", str: "str", bool: "bool", bytes: "bytes"}.get(type(body.value))
    if isinstance(body, ast.Compare | ast.BoolOp) or (
        isinstance(body, ast.UnaryOp) and isinstance(body.op, ast.Not)
    ):
        return "bool"
    return None


def static_type(text: str, schema: Schema) -> str | None:
    """``type_of`` for expression text over one schema; None when unknown or ill-typed."""
    try:
        return type_of(ast.parse(text.strip(), mode="eval").body, {"": ("t", schema)})
    except (SyntaxError, ExprProblem):
        return None


# ---- static types ------------------------------------------------------------------------
# Types are the schema's names (int, float, str, bool, bytes); None means unknown (a user
# function's result, a mixed conditional), which is never an error: only combinations
# that would raise (or silently never match) at run time are reported at build time.
_NUM = {"int", "float", "bool"}
_ARITH = {ast.Sub: "-", ast.Div: "/", ast.FloorDiv: "//", ast.Pow: "**", ast.Mod: "%", ast.Add: "+",
          ast.Mult: "*", ast.MatMult: "@", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^",
          ast.LShift: "<<", ast.RShift: ">>"}
_CONST = {bool: "bool", int: "int", float: "float", str: "str", bytes: "bytes"}
_MATH_INT = {"floor", "ceil", "trunc", "factorial", "gcd", "lcm", "isqrt", "comb", "perm"}
_MATH_BOOL = {"isnan", "isinf", "isfinite", "isclose"}


def _num(a: str, b: str) -> str:
    return "float" if "float" in (a, b) else "int"


def _binop(op: ast.operator, a: str | None, b: str | None) -> str | None:
    sym = _ARITH.get(type(op), "?")
    if a is None or b is None:
        if isinstance(op, ast.Div) and {a, b} <= _NUM | {None}:
            return "float"
        return None
    if a in _NUM and b in _NUM:
        if isinstance(op, ast.Div):
            return "float"
        if isinstance(op, ast.BitAnd | ast.BitOr | ast.BitXor | ast.LShift | ast.RShift) and "float" in (a, b):
            raise ExprProblem(f"{a} {sym} {b} is not defined (bitwise operators need int)")
        if isinstance(op, ast.MatMult):
            raise ExprProblem(f"{a} @ {b} is not defined")
        return _num(a, b) if not (a == b == "bool" and isinstance(op, ast.BitAnd | ast.BitOr | ast.BitXor)) else "bool"
    if isinstance(op, ast.Add) and a == b and a in ("str", "bytes"):
        return a
    if isinstance(op, ast.Mult) and {a, b} in ({"str", "int"}, {"bytes", "int"}, {"str", "bool"}, {"bytes", "bool"}):
        return "str" if "str" in (a, b) else "bytes"
    if isinstance(op, ast.Mod) and a in ("str", "bytes"):
        return a  # %-formatting
    hint = ""
    if isinstance(op, ast.Add) and "str" in (a, b):
        hint = "; convert with str(...) first"
    elif a in ("str", "bytes") or b in ("str", "bytes"):
        hint = "; convert with int(...) or float(...) first"
    raise ExprProblem(f"{a} {sym} {b} is not defined{hint}")


def _compare(ops: list[ast.cmpop], types: list[str | None]) -> None:
    for op, a, b in zip(ops, types, types[1:], strict=False):
        if a is None or b is None or isinstance(op, ast.Is | ast.IsNot):
            continue
        if isinstance(op, ast.In | ast.NotIn):
            if b in _NUM:
                raise ExprProblem(f"'in' needs a str, bytes or tuple on its right, got {b}")
            if b in ("str", "bytes") and a != b:
                raise ExprProblem(f"{a} in {b} is not defined (both sides must be {b})")
            continue
        same = a == b or (a in _NUM and b in _NUM)
        if same:
            continue
        if isinstance(op, ast.Eq | ast.NotEq):
            raise ExprProblem(f"comparing {a} with {b} is always {'False' if isinstance(op, ast.Eq) else 'True'}; "
                              f"convert one side first")
        raise ExprProblem(f"ordering {a} against {b} is not defined; convert one side first")


def type_of(node: ast.AST, scopes: Mapping[str, tuple[str, Schema]]) -> str | None:
    """The static type of an (unrewritten) expression node; raises ``ExprProblem`` when the
    declared attribute types make it fail at run time (``str * str``, ``str + int``, ``"a" < 1``).

    >>> s = Schema.parse("k:str, v:str, n:int, x:float")
    >>> type_of(ast.parse("n * x", mode="eval").body, {"": ("t", s)})
    'float'
    >>> try:
    ...     type_of(ast.parse("k * v", mode="eval").body, {"": ("t", s)})
    ... except ExprProblem as e:
    ...     print(e)
    str * str is not defined; convert with int(...) or float(...) first
    """
    t = lambda n: type_of(n, scopes)  # noqa: E731
    if isinstance(node, ast.Constant):
        return _CONST.get(type(node.value))
    if isinstance(node, ast.Name):
        hits = [sch for q, (_, sch) in sorted(scopes.items()) if node.id in sch]  # "" sorts first
        return hits[0].type_of(node.id) if hits else None
    if isinstance(node, ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id in scopes and node.value.id != "math":
            sch = scopes[node.value.id][1]
            return sch.type_of(node.attr) if node.attr in sch else None
        return None
    if isinstance(node, ast.BinOp):
        return _binop(node.op, t(node.left), t(node.right))
    if isinstance(node, ast.UnaryOp):
        a = t(node.operand)
        if isinstance(node.op, ast.Not):
            return "bool"
        if a is not None and a not in _NUM:
            raise ExprProblem(f"unary {'-' if isinstance(node.op, ast.USub) else '+~'} on {a} is not defined")
        if isinstance(node.op, ast.Invert) and a == "float":
            raise ExprProblem("~ on float is not defined")
        return "int" if a == "bool" else a
    if isinstance(node, ast.BoolOp):
        kinds = {t(v) for v in node.values}
        return kinds.pop() if len(kinds) == 1 else None
    if isinstance(node, ast.Compare):
        _compare(node.ops, [t(node.left), *(t(c) for c in node.comparators)])
        return "bool"
    if isinstance(node, ast.IfExp):
        t(node.test)
        a, b = t(node.body), t(node.orelse)
        if a == b:
            return a
        return _num(a, b) if a in _NUM and b in _NUM else None
    if isinstance(node, ast.Subscript):
        base = t(node.value)
        t(node.slice) if not isinstance(node.slice, ast.Slice) else None
        if base == "str":
            return "str"
        if base == "bytes":
            return "bytes" if isinstance(node.slice, ast.Slice) else "int"
        if base in _NUM:
            raise ExprProblem(f"{base} is not subscriptable")
        return None
    if isinstance(node, ast.Tuple):
        for e in node.elts:
            t(e)
        return None
    if isinstance(node, ast.Call):
        args = [t(a) for a in node.args]
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "math":
            for a in args:
                if a in ("str", "bytes"):
                    raise ExprProblem(f"math.{f.attr} of {a} is not defined; convert with float(...) first")
            return "int" if f.attr in _MATH_INT else "bool" if f.attr in _MATH_BOOL else "float"
        if isinstance(f, ast.Name):
            if f.id in ("int", "float", "str", "bool", "bytes"):
                return f.id
            if f.id == "len":
                if args and args[0] in _NUM:
                    raise ExprProblem(f"len of {args[0]} is not defined")
                return "int"
            if f.id == "abs":
                if args and args[0] in ("str", "bytes"):
                    raise ExprProblem(f"abs of {args[0]} is not defined")
                return "int" if args and args[0] == "bool" else (args[0] if args else None)
            if f.id in ("min", "max") and len(args) > 1:
                known = [a for a in args if a is not None]
                if known and not (all(a in _NUM for a in known) or len(set(known)) == 1):
                    raise ExprProblem(f"{f.id} of {', '.join(known)} compares incompatible types")
                return None if len(known) < len(args) else (
                    known[0] if len(set(known)) == 1 else "float" if "float" in known else "int")
            if f.id == "round":
                return "int" if len(args) == 1 else (args[0] if args and args[0] in _NUM else None)
        return None
    return None
