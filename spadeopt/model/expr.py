"""Attribute expressions: parsed once at build time, specialised into straight Python.

An expression is a small Python expression over a tuple's attribute names, e.g.
``"price * volume"`` or ``"ask < vwap and size > 100"``. ``compile_expr`` checks
every name against the schema(s) and the declared functions, and rewrites attribute
names into positional reads (``t[2] * t[3]``), so the generated PE never interprets a
parameter per tuple, and checks the expression's types (``model.types.check``). Only a safe subset of Python is accepted: no lambdas,
comprehensions, assignments or attribute access other than ``math.*`` and, in joins,
``left.x`` / ``right.x``.
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Mapping
from dataclasses import dataclass

from spadeopt.model.schema import Schema
from spadeopt.model.types import ExprProblem, check, scope_lookup

SAFE_BUILTINS = frozenset(
    {"abs", "min", "max", "round", "len", "int", "float", "str", "bool", "bytes", "divmod", "pow"}
)
_ALLOWED = (
    ast.Expression, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Call,
    ast.Constant, ast.Name, ast.Load, ast.Subscript, ast.Slice, ast.Tuple, ast.Attribute,
    ast.operator, ast.unaryop, ast.boolop, ast.cmpop, ast.keyword,
)


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
        raise ExprProblem(self._unknown(node.id))

    def _unknown(self, name: str) -> str:
        """``unknown name 'dwel'``, with the nearest names it could have meant."""
        attrs = [a for q, (_, sch) in self.scopes.items() if q == "" for a in sch.names]
        known = [*attrs, *sorted(self.functions), *sorted(SAFE_BUILTINS)]
        near = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        hint = f"; did you mean {' or '.join(repr(n) for n in near)}?" if near else ""
        have = (f" (attributes: {', '.join(attrs) or 'none'}; a function of yours must be passed with "
                f"functions=[{name}])") if not near else ""
        return f"unknown name '{name}'{hint}{have}"

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
        msg = (f"attribute access '{ast.unparse(node)}' is not allowed (only math.*, and left.x / right.x "
               f"in a join): expressions cannot call methods; move the call into a module-level function "
               f"(def f({_root(node)}): ...) and pass it with functions=[f], "
               f"then call f({_root(node)}) in the expression (docs/api.md, \"Expressions\")")
        raise ExprProblem(msg)


def _root(node: ast.AST) -> str:
    """The name an attribute chain starts from (``agent`` of ``agent.lower``), else ``x``."""
    while isinstance(node, ast.Attribute | ast.Call | ast.Subscript):
        node = node.value if not isinstance(node, ast.Call) else node.func
    return node.id if isinstance(node, ast.Name) else "x"


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
        check(tree_copy.body, scope_lookup(scopes))
    except ExprProblem as exc:
        msg = f"expression '{text}': {exc}"
        raise ExprProblem(msg) from None
    ast.fix_missing_locations(new)
    is_attr = isinstance(tree.body, ast.Name) and tree.body.id in rw.attrs
    return Compiled(ast.unparse(new), tuple(dict.fromkeys(rw.attrs)), tuple(dict.fromkeys(rw.used_functions)), is_attr)
