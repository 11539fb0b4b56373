"""Helpers the kinds' ``lower`` functions share: imports of user code, rows, keys,
declared-type conversions, argument literals and stable hashes.

Expressions are compiled by ``model.expr.compile_expr`` (attribute names -> ``t[i]``),
window specs become literal constants, and user callables become module-level imports
with unique aliases. Nothing is interpreted per tuple in the generated PE.

Declared output types: an output attribute's declared (or inferred) type is its schema
type, so its values must have that type: ``"bucket:int": "ts // 60"`` on a float ``ts``
must yield ints (a hash split on it indexes by the value). Generated code converts a
value only when the expression's type cannot be shown to be exactly the declared one
(``model.types``), so the common cases (bare attributes, arithmetic on typed attributes)
cost nothing per tuple.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from spadeopt.errors import CodegenError
from spadeopt.kinds.kind import Imports
from spadeopt.model.graph import Operator, SymbolRef
from spadeopt.model.schema import Schema
from spadeopt.protocol import combined_source, key_hash_source


def alias(ref: SymbolRef, imports: Imports) -> str:
    """The generated module's name for user object ``ref`` (``_u_<qualname>``, unique)."""
    key = (ref.module, ref.qualname)
    if key not in imports:
        base = "_u_" + ref.qualname.replace(".", "_")
        name, n = base, 1
        while name in imports.values():
            n += 1
            name = f"{base}{n}"
        imports[key] = name
    return imports[key]


def rename(functions: tuple, imports: Imports) -> dict[str, str]:
    """An operator's user functions: expression name -> generated alias."""
    return {name: alias(ref, imports) for name, ref in functions}


def row(exprs: list[str]) -> str:
    """A tuple display of ``exprs``."""
    return "(" + ", ".join(exprs) + ("," if len(exprs) == 1 else "") + ")"


def key_source(attrs: tuple[str, ...], schema: Schema, var: str = "t") -> str:
    """The group key of ``var``: one attribute, a tuple of several, or ``0`` for none."""
    if not attrs:
        return "0"
    if len(attrs) == 1:
        return f"{var}[{schema.index(attrs[0])}]"
    return row([f"{var}[{schema.index(a)}]" for a in attrs])


def typed(source: str, declared: str, actual: str | None) -> str:
    """``source`` converted to ``declared`` unless it statically has that type already.
    ``bytes`` is only converted from ``str`` (UTF-8); other values are left as they are.

    >>> typed("t[0]", "float", "int")
    'float(t[0])'
    """
    if actual == declared:
        return source
    if declared == "bytes":
        return f"({source}).encode()" if actual == "str" else source
    return f"{declared}({source})"


def literal(v: Any, where: str) -> str:
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
        return "[" + ", ".join(literal(x, where) for x in v) + "]"
    if type(v) is tuple:
        return "(" + ", ".join(literal(x, where) for x in v) + ("," if len(v) == 1 else "") + ")"
    if type(v) is dict:
        return "{" + ", ".join(f"{literal(k, where)}: {literal(x, where)}" for k, x in v.items()) + "}"
    msg = (f"{where}: argument value {v!r} of type {type(v).__name__} cannot be written into "
           f"generated code; pass None, bool, int, float, str, bytes, or lists, tuples and dicts of them")
    raise CodegenError(msg)


def call_args(op: Operator, pairs: tuple) -> str:
    """Keyword arguments ``k=literal, ...`` for a user generator or class."""
    return ", ".join(f"{k}={literal(v, f'operator {op.name!r} argument {k!r}')}" for k, v in pairs)


def number(x: float) -> str:
    """A window constant: an int literal when whole, else a float literal."""
    return repr(int(x)) if float(x).is_integer() else repr(float(x))


def stable_hash(attr: str, schema: Schema) -> str:
    """A hash of attribute ``attr`` of ``t`` that is the same in every process
    (``protocol.KEY_HASHES``)."""
    return key_hash_source(f"t[{schema.index(attr)}]", schema.type_of(attr))


def key_hash(key: Sequence[str], schema: Schema) -> str:
    """The hash of a region key's attributes of ``t``, as a split routes by it
    (``protocol.key_channel`` computes the same from values)."""
    return combined_source([stable_hash(a, schema) for a in key])
