"""The one expression type checker: type, exactness and may-raise of an expression.

Validation (``model.expr.compile_expr``, the kinds' ``derive``), lowering (which
declared-type conversions generated code needs) and ``codegen.collapse`` (which
expressions it may drop, inline or repeat) all ask ``check``; nothing else infers
expression types.

Types are the schema's names (int, float, str, bool, bytes). ``check`` returns an
``ExprType``:

* ``type``: the value's type, or None when unknown (a user function's result, a
  conditional mixing str and int). Unknown is never an error: only combinations that
  would raise (or silently never match) at run time raise ``ExprProblem``.
* ``exact``: the value *always* has exactly ``type``. Numeric promotion gives an inexact
  answer: ``max(i, x)`` over an int ``i`` and a float ``x`` is typed float (for the
  checks: it is a number, and adding a str to it is an error) but is not exact, since
  ``max(3, 2.5)`` is the int 3; so lowering converts it when its output is declared
  float. Likewise ``i ** j`` over ints (a negative exponent gives a float), ``i if c
  else x``, and ``/`` with an unknown side.
* ``may_raise``: evaluating it may raise or has an effect. Only attribute reads,
  constants, ``+ - *`` on numbers (not an int with a float, unless one side is a small
  int constant: a huge int raises OverflowError converting), ``+`` of two str or two
  bytes, comparisons of numbers or ``==``/``!=`` of anything, ``not``, unary ``- +`` on
  numbers, and ``and``/``or``/``if-else`` of such parts cannot raise; calls, subscripts,
  division, power, modulo and everything else may.

Limits: a float power is typed float although a negative base to a fractional power
gives a complex number (generated code does not convert it).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from spadeopt.model.schema import Schema


class ExprProblem(Exception):
    """One problem with one expression (collected by the validator)."""


@dataclass(frozen=True)
class ExprType:
    """What the checker knows about an expression's value (module docstring)."""

    type: str | None
    exact: bool = True
    may_raise: bool = False

    @property
    def static(self) -> str | None:
        """The type the value always has, or None."""
        return self.type if self.exact else None


Lookup = Callable[[ast.AST], ExprType | None]
"""The type of a leaf the caller binds (an attribute name, ``left.x``, ``t[3]``), or None."""

NUMERIC = frozenset({"int", "float", "bool"})
_UNKNOWN = ExprType(None, False, True)
_ARITH = {ast.Sub: "-", ast.Div: "/", ast.FloorDiv: "//", ast.Pow: "**", ast.Mod: "%", ast.Add: "+",
          ast.Mult: "*", ast.MatMult: "@", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^",
          ast.LShift: "<<", ast.RShift: ">>"}
_BITS = ast.BitAnd | ast.BitOr | ast.BitXor | ast.LShift | ast.RShift
_CONST = {bool: "bool", int: "int", float: "float", str: "str", bytes: "bytes"}
_CONVERSIONS = frozenset({"int", "float", "str", "bool", "bytes"})
_MATH_CONST = frozenset({"pi", "e", "tau", "inf", "nan"})
_MATH_INT = frozenset({"floor", "ceil", "trunc", "gcd", "lcm", "isqrt", "comb", "perm", "factorial"})
_MATH_BOOL = frozenset({"isnan", "isinf", "isfinite", "isclose"})
_MATH_FLOAT = frozenset({
    "sqrt", "cbrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan",
    "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "hypot",
    "fabs", "pow", "fsum", "fmod", "degrees", "radians", "copysign", "dist", "remainder", "erf",
    "erfc", "gamma", "lgamma", "ldexp", "nextafter", "ulp", "sumprod",
})


def _promote(a: str | None, b: str | None) -> str | None:
    if a in NUMERIC and b in NUMERIC:
        return "float" if "float" in (a, b) else "int"
    return None


def _num(t: ExprType) -> bool:
    """A value that is surely a number (bool, int or float)."""
    return t.exact and t.type in NUMERIC


def _small_int(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int and abs(node.value) < 2**63


def _binop(node: ast.BinOp, a: ExprType, b: ExprType) -> ExprType:
    op, exact = node.op, a.exact and b.exact
    ta, tb, sym = a.type, b.type, _ARITH.get(type(node.op), "?")
    if ta is None or tb is None:
        if isinstance(op, ast.Div) and {ta, tb} <= NUMERIC | {None}:
            return ExprType("float", False, True)
        return _UNKNOWN
    pure = not (a.may_raise or b.may_raise)
    if ta in NUMERIC and tb in NUMERIC:
        if isinstance(op, ast.Div):
            return ExprType("float", exact, True)
        if isinstance(op, _BITS) and "float" in (ta, tb):
            raise ExprProblem(f"{ta} {sym} {tb} is not defined (bitwise operators need int)")
        if isinstance(op, ast.MatMult):
            raise ExprProblem(f"{ta} @ {tb} is not defined")
        if isinstance(op, ast.BitAnd | ast.BitOr | ast.BitXor) and ta == tb == "bool":
            return ExprType("bool", exact, True)
        if isinstance(op, ast.Pow):  # int ** negative int is a float
            return ExprType(_promote(ta, tb), exact and "float" in (ta, tb), True)
        if isinstance(op, ast.Add | ast.Sub | ast.Mult):
            overflow = {ta, tb} == {"int", "float"} and not (_small_int(node.left) or _small_int(node.right))
            return ExprType(_promote(ta, tb), exact, not (pure and exact) or overflow)
        return ExprType(_promote(ta, tb), exact, True)
    if isinstance(op, ast.Add) and ta == tb and ta in ("str", "bytes"):
        return ExprType(ta, exact, not pure)
    if isinstance(op, ast.Mult) and {ta, tb} in ({"str", "int"}, {"bytes", "int"}, {"str", "bool"},
                                                {"bytes", "bool"}):
        return ExprType("str" if "str" in (ta, tb) else "bytes", exact, True)
    if isinstance(op, ast.Mod) and ta in ("str", "bytes"):
        return ExprType(ta, a.exact, True)  # %-formatting
    hint = ""
    if isinstance(op, ast.Add) and "str" in (ta, tb):
        hint = "; convert with str(...) first"
    elif ta in ("str", "bytes") or tb in ("str", "bytes"):
        hint = "; convert with int(...) or float(...) first"
    raise ExprProblem(f"{ta} {sym} {tb} is not defined{hint}")


def _compare(node: ast.Compare, parts: list[ExprType]) -> ExprType:
    for op, a, b in zip(node.ops, [p.type for p in parts], [p.type for p in parts[1:]], strict=False):
        if a is None or b is None or isinstance(op, ast.Is | ast.IsNot):
            continue
        if isinstance(op, ast.In | ast.NotIn):
            if b in NUMERIC:
                raise ExprProblem(f"'in' needs a str, bytes or tuple on its right, got {b}")
            if b in ("str", "bytes") and a != b:
                raise ExprProblem(f"{a} in {b} is not defined (both sides must be {b})")
            continue
        if a == b or (a in NUMERIC and b in NUMERIC):
            continue
        if isinstance(op, ast.Eq | ast.NotEq):
            raise ExprProblem(f"comparing {a} with {b} is always {'False' if isinstance(op, ast.Eq) else 'True'}; "
                              f"convert one side first")
        raise ExprProblem(f"ordering {a} against {b} is not defined; convert one side first")
    pure = not any(p.may_raise for p in parts) and (
        all(isinstance(o, ast.Eq | ast.NotEq) for o in node.ops) or all(_num(p) for p in parts))
    return ExprType("bool", True, not pure)


def _unary(node: ast.UnaryOp, a: ExprType) -> ExprType:
    if isinstance(node.op, ast.Not):
        return ExprType("bool", True, a.may_raise)  # the truth of a builtin-typed value never raises
    if a.type is not None and a.type not in NUMERIC:
        raise ExprProblem(f"unary {'-' if isinstance(node.op, ast.USub) else '+~'} on {a.type} is not defined")
    if isinstance(node.op, ast.Invert):
        if a.type == "float":
            raise ExprProblem("~ on float is not defined")
        return ExprType("int", a.exact, True) if a.type else _UNKNOWN
    if a.type is None:
        return _UNKNOWN
    return ExprType("int" if a.type == "bool" else a.type, a.exact, a.may_raise or not a.exact)


def _same(parts: list[ExprType], promote: bool) -> ExprType:
    """The type of a value that is one of ``parts`` (``and``/``or``, ``if-else``, ``min``)."""
    may_raise = any(p.may_raise for p in parts)
    types = {p.type for p in parts}
    if len(types) == 1:
        return ExprType(types.pop(), all(p.exact for p in parts), may_raise)
    if promote and types <= NUMERIC:
        return ExprType("float" if "float" in types else "int", False, may_raise)
    return ExprType(None, False, may_raise)


def _call(node: ast.Call, args: list[ExprType]) -> ExprType:
    f, kws = node.func, {k.arg for k in node.keywords}
    ts = [a.type for a in args]
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "math":
        for t in ts:
            if t in ("str", "bytes"):
                raise ExprProblem(f"math.{f.attr} of {t} is not defined; convert with float(...) first")
        typ = "int" if f.attr in _MATH_INT else "bool" if f.attr in _MATH_BOOL else (
            "float" if f.attr in _MATH_FLOAT else None)
        return ExprType(typ, typ is not None, True)
    if not isinstance(f, ast.Name):
        return _UNKNOWN
    if f.id in _CONVERSIONS:
        return ExprType(f.id, True, True)
    if f.id == "len":
        if ts and ts[0] in NUMERIC:
            raise ExprProblem(f"len of {ts[0]} is not defined")
        return ExprType("int", True, True)
    if f.id == "abs" and len(args) == 1 and not kws:
        if ts[0] in ("str", "bytes"):
            raise ExprProblem(f"abs of {ts[0]} is not defined")
        return ExprType("int" if ts[0] == "bool" else ts[0], args[0].exact and ts[0] is not None, True)
    if f.id in ("min", "max") and len(args) > 1 and not kws:
        known = [t for t in ts if t is not None]
        if known and not (all(t in NUMERIC for t in known) or len(set(known)) == 1):
            raise ExprProblem(f"{f.id} of {', '.join(known)} compares incompatible types")
        same = _same(args, promote=True)
        return ExprType(same.type, same.exact, True)
    if f.id == "round" and args and kws <= {"ndigits"}:
        if ts[0] not in NUMERIC:
            return _UNKNOWN
        if len(args) == 1 and not kws:
            return ExprType("int", True, True)
        return ExprType("float" if ts[0] == "float" else "int", args[0].exact, True)
    return _UNKNOWN


def check(node: ast.AST, lookup: Lookup) -> ExprType:
    """The ``ExprType`` of an expression node; raises ``ExprProblem`` when the types of
    its leaves (``lookup``) make it fail at run time (``str * str``, ``"a" < 1``).

    >>> s = Schema.parse("k:str, n:int, x:float")
    >>> def t(text):
    ...     return check(ast.parse(text, mode="eval").body, scope_lookup({"": ("t", s)}))
    >>> t("n * x")
    ExprType(type='float', exact=True, may_raise=True)
    >>> t("n + 1")
    ExprType(type='int', exact=True, may_raise=False)
    >>> t("max(n, x)")  # a float or an int, whichever is larger
    ExprType(type='float', exact=False, may_raise=True)
    >>> try:
    ...     t("k * k")
    ... except ExprProblem as e:
    ...     print(e)
    str * str is not defined; convert with int(...) or float(...) first
    """
    leaf = lookup(node)
    if leaf is not None:
        return leaf
    ty = lambda n: check(n, lookup)  # noqa: E731
    if isinstance(node, ast.Constant):
        typ = _CONST.get(type(node.value))
        return ExprType(typ, typ is not None, False)
    if isinstance(node, ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id == "math" and node.attr in _MATH_CONST:
            return ExprType("float", True, True)
        return _UNKNOWN
    if isinstance(node, ast.BinOp):
        return _binop(node, ty(node.left), ty(node.right))
    if isinstance(node, ast.UnaryOp):
        return _unary(node, ty(node.operand))
    if isinstance(node, ast.BoolOp):
        return _same([ty(v) for v in node.values], promote=False)
    if isinstance(node, ast.Compare):
        return _compare(node, [ty(node.left), *(ty(c) for c in node.comparators)])
    if isinstance(node, ast.IfExp):
        test = ty(node.test)
        branches = _same([ty(node.body), ty(node.orelse)], promote=True)
        return ExprType(branches.type, branches.exact, branches.may_raise or test.may_raise)
    if isinstance(node, ast.Subscript):
        base = ty(node.value)
        if not isinstance(node.slice, ast.Slice):
            ty(node.slice)
        if base.type in NUMERIC:
            raise ExprProblem(f"{base.type} is not subscriptable")
        if base.type == "bytes" and not isinstance(node.slice, ast.Slice):
            return ExprType("int", base.exact, True)
        return ExprType(base.type, base.exact and base.type is not None, True)
    if isinstance(node, ast.Tuple):
        for e in node.elts:
            ty(e)
        return _UNKNOWN
    if isinstance(node, ast.Call):
        return _call(node, [ty(a) for a in node.args])
    return _UNKNOWN


def scope_lookup(scopes: Mapping[str, tuple[str, Schema]]) -> Lookup:
    """Leaves of an unrewritten expression: attribute names and ``left.x``/``right.x``.

    ``scopes`` maps a qualifier (``""`` for unqualified names) to (variable, schema). An
    unqualified name found in no unqualified scope and in several qualified ones is
    ambiguous: unknown here (``compile_expr`` refuses it)."""
    def lookup(node: ast.AST) -> ExprType | None:
        if isinstance(node, ast.Name):
            if "" in scopes and node.id in scopes[""][1]:
                return ExprType(scopes[""][1].type_of(node.id))
            hits = [sch.type_of(node.id) for q, (_, sch) in scopes.items() if q and node.id in sch]
            return ExprType(hits[0]) if len(hits) == 1 else None
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in scopes and node.attr in scopes[node.value.id][1]):
            return ExprType(scopes[node.value.id][1].type_of(node.attr))
        return None
    return lookup


def _scopes(schema: Schema | None, qualified: Mapping[str, tuple[str, Schema]] | None
            ) -> dict[str, tuple[str, Schema]]:
    scopes = dict(qualified or {})
    if schema is not None:
        scopes[""] = ("t", schema)
    return scopes


def static_type(text: str, schema: Schema | None = None,
                qualified: Mapping[str, tuple[str, Schema]] | None = None) -> str | None:
    """The type an expression's value always has (``ExprType.static``), or None when it
    depends on values or user functions, or the expression does not check."""
    try:
        return check(ast.parse(text.strip(), mode="eval").body, scope_lookup(_scopes(schema, qualified))).static
    except (SyntaxError, ExprProblem):
        return None


def infer_type(text: str, schema: Schema | None = None,
               qualified: Mapping[str, tuple[str, Schema]] | None = None) -> str | None:
    """The type of an output whose declaration omits it: defined only when the expression
    is an attribute, a literal or a test (comparison, ``and``/``or``/``not`` of tests: a
    test is a bool whatever its parts); else None (a computed output declares its type:
    the schema says what the developer meant)."""
    try:
        body = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return None
    if isinstance(body, ast.Compare | ast.BoolOp) or (isinstance(body, ast.UnaryOp)
                                                      and isinstance(body.op, ast.Not)):
        return "bool"
    if isinstance(body, ast.Name | ast.Attribute | ast.Constant):
        return static_type(text, schema, qualified)
    return None
