"""Tuple schemas: ordered, typed attribute lists.

Tuples travel as plain Python tuples; a schema maps attribute names to positions so
generated code can read ``t[2]`` instead of looking names up per tuple.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass

from spadeopt.errors import UsageError


@dataclass(frozen=True)
class Scalar:
    """One attribute type: everything spadeopt's layers need to know of it, in one row of
    :data:`SCALARS` (the schema's names, the wire's checks, a join's numbering, the
    connectors' encoders all read it here).

    ``py``: the Python type a value has; ``wire``: the Python types a value decoded off the
    wire may have (besides None, which every attribute may carry; a float attribute takes
    an int, as Python's arithmetic does); ``order``: how a join numbers a channel by an
    attribute of this type (``"int"`` exact, ``"float"`` by its bits; ``None``: not an
    order attribute); ``json_format``: the %-format of the value's JSON text when it has
    exactly ``py`` (``connectors.formats.json_encoder``)."""

    name: str
    py: type
    wire: frozenset[type]
    order: str | None
    json_format: str


SCALARS: dict[str, Scalar] = {s.name: s for s in (
    Scalar("int", int, frozenset({int}), "int", "%d"),
    Scalar("float", float, frozenset({float, int}), "float", "%r"),
    Scalar("str", str, frozenset({str}), None, "%s"),
    Scalar("bool", bool, frozenset({bool}), "int", "%s"),
    Scalar("bytes", bytes, frozenset({bytes}), None, '"%s"'),
)}
"""The five attribute types, the one table (:class:`Scalar`)."""

TYPES: dict[str, type] = {name: s.py for name, s in SCALARS.items()}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_FILE_NAME = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]|\.(?!\.))*")
MAX_FILE_NAME = 100


def is_identifier(name: object) -> bool:
    """An ASCII Python identifier that is not a keyword. Every such name is allowed:
    generated code never uses a user's name bare (attributes become ``t[i]``, operators
    are mangled by ``gid``, functions get ``_u_`` aliases), so none can collide with it.
    Non-ASCII names are refused because Python NFKC-normalises identifiers, so two
    distinct names could become one."""
    return is_port_name(name) and not keyword.iskeyword(name)


def is_port_name(name: object) -> bool:
    """An ASCII Python identifier, keywords included (``in``): a port's name only ever
    ends a generated name (``_5price__in``)."""
    return isinstance(name, str) and _NAME.fullmatch(name) is not None


def is_file_name(name: object) -> bool:
    """A name that is safe as one path component and on one line of generated code (app
    names, PE ids, strategies): ASCII letters, digits, ``_``, ``-`` and ``.``, not
    starting with ``.`` or ``-``, no ``..``, at most ``MAX_FILE_NAME`` characters."""
    return (isinstance(name, str) and len(name) <= MAX_FILE_NAME
            and _FILE_NAME.fullmatch(name) is not None)


FILE_NAME_RULE = (f"letters, digits, '_', '-' and '.', not starting with '.' or '-', no '..', "
                  f"at most {MAX_FILE_NAME} characters")
"""``is_file_name`` in words, for messages."""


def gid(name: str) -> str:
    """The name generated code uses for operator ``name``: ``_<len><name>`` (``_5price``).

    The length prefix makes the mangling injective and parseable (``runtime.pe`` reads an
    operator back from a traceback's function name): every generated name derived from an
    operator is ``<pattern prefix><gid><suffix>``, where the prefix (``""``, ``"_"``,
    ``"send_"``, ``"_rec_"``, ``"_cd_"``) is followed by ``_<digit>`` and the operator's
    name is read by its length; no other generated name (locals such as ``t``, ``out``,
    ``batch``; ``_u_`` aliases; module names) contains ``_<digit>`` at such a place."""
    return f"_{len(name)}{name}"


_GID = re.compile(r"^_{1,2}(\d+)")


def ungid(fname: str) -> tuple[str, str] | None:
    """The operator and the rest of a generated function name (``_5price__in`` ->
    ``("price", "__in")``, ``__5price_row`` -> ``("price", "_row")``); ``None`` when the
    name was not derived from an operator."""
    m = _GID.match(fname)
    if not m:
        return None
    n, start = int(m.group(1)), m.end()
    name = fname[start:start + n]
    if len(name) != n:
        return None
    return name, fname[start + n:]


@dataclass(frozen=True)
class Schema:
    """An ordered tuple of ``(name, type)`` pairs; types are names from ``TYPES``."""

    attrs: tuple[tuple[str, str], ...]

    @classmethod
    def parse(cls, spec: str | dict[str, str] | Schema | list | tuple) -> Schema:
        """Build from ``"sym:str, price:float"``, a dict, or a list of pairs."""
        if isinstance(spec, Schema):
            return spec
        if isinstance(spec, str):
            pairs = []
            for part in (p.strip() for p in spec.split(",") if p.strip()):
                name, sep, typ = part.partition(":")
                if not sep:
                    msg = f"schema attribute '{part}' has no type; write it as 'name:type'"
                    raise UsageError(msg)
                pairs.append((name.strip(), typ.strip()))
        elif isinstance(spec, dict):
            pairs = list(spec.items())
        else:
            pairs = [tuple(p) for p in spec]
        schema = cls(tuple((str(n), str(t)) for n, t in pairs))
        schema.check()
        return schema

    def check(self) -> None:
        seen: set[str] = set()
        for name, typ in self.attrs:
            if not is_identifier(name):
                msg = f"schema attribute name '{name}' is not a valid identifier"
                raise UsageError(msg)
            if name in seen:
                msg = f"schema attribute '{name}' appears twice"
                raise UsageError(msg)
            if typ not in TYPES:
                msg = f"schema attribute '{name}' has unknown type '{typ}'; use one of {sorted(TYPES)}"
                raise UsageError(msg)
            seen.add(name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.attrs)

    def index(self, name: str) -> int:
        return self.names.index(name)

    def type_of(self, name: str) -> str:
        return dict(self.attrs)[name]

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def __len__(self) -> int:
        return len(self.attrs)

    def __str__(self) -> str:
        return ", ".join(f"{n}:{t}" for n, t in self.attrs)

    def to_json(self) -> list[list[str]]:
        return [[n, t] for n, t in self.attrs]
