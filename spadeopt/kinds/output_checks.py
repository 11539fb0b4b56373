"""Checks the expression kinds (functor, aggregate, join, split) share: outputs and their types."""

from __future__ import annotations

from typing import Any

from spadeopt.errors import UsageError
from spadeopt.kinds.kind import Problems
from spadeopt.model.expr import compile_expr
from spadeopt.model.schema import TYPES, Schema
from spadeopt.model.types import ExprProblem, infer_type


def split_name(key: str) -> tuple[str, str | None]:
    """``"name:type"`` -> ``(name, type)``; ``"name"`` -> ``(name, None)``."""
    name, sep, typ = key.partition(":")
    return name.strip(), (typ.strip() if sep else None)


def function_names(functions: tuple) -> frozenset[str]:
    return frozenset(n for n, _ in functions)


def check_expr(where: str, text: str, problems: Problems, **kw: Any) -> bool:
    """``compile_expr(text, **kw)`` succeeds; else its problem is appended."""
    try:
        compile_expr(text, **kw)
        return True
    except ExprProblem as exc:
        problems.append(f"{where}: {exc}")
        return False


def typed_output(where: str, key: str, text: str, schema: Schema | None, problems: Problems,
                 qualified: dict | None = None) -> tuple[str, str] | None:
    """The ``(name, type)`` of output ``key`` computing ``text``: the declared type, or one
    ``model.types.infer_type`` defines; else None with the problem appended."""
    name, typ = split_name(key)
    if typ is None:
        typ = infer_type(text, schema, qualified)
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


def output_schema(where: str, attrs: list[tuple[str, str]], problems: Problems) -> Schema | None:
    """The schema of ``attrs``, or None with the problem (a duplicate name) appended."""
    try:
        return Schema.parse(attrs)
    except UsageError as exc:  # a duplicate name
        problems.append(f"{where}: {exc}")
        return None
