"""Records from text and bytes: the attribute casts every source shares (file replays,
sockets, folders, brokers) and the value formats of live connectors.

A cast error always names the place (``file:line``, ``stream 'k' entry 1-0``), the
attribute and the value, and says what the attribute's type accepts.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from typing import Any

from spadeopt.model.schema import SCALARS

_TRUE = frozenset({"1", "true", "yes", "y", "t", "on"})
_FALSE = frozenset({"0", "false", "no", "n", "f", "off"})
FORMATS = ("json", "csv", "msgpack", "fields")  # value formats of live connectors (docs/connectors.md)


def _bool(v) -> bool:
    if isinstance(v, bytes):
        v = v.decode("utf-8", "replace")
    text = str(v).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    msg = "not a boolean (use true/false, yes/no, 1/0)"
    raise ValueError(msg)


def _int(v) -> int:
    if isinstance(v, float) and not v.is_integer():  # JSON 3.0 is an int; 3.5 is not
        msg = "not a whole number"
        raise ValueError(msg)
    return int(v)


def _str(v) -> str:
    if v is None or isinstance(v, dict | list):
        msg = "not a string"
        raise ValueError(msg)
    if isinstance(v, bytes):
        return v.decode("utf-8")
    return str(v)


def _float(v) -> float:
    if v is None:
        msg = "null"
        raise ValueError(msg)
    return float(v)


def _bytes(v) -> bytes:
    return v if isinstance(v, bytes) else bytes.fromhex(v)


CASTS = {"int": _int, "float": float, "str": _str, "bool": _bool, "bytes": bytes.fromhex}
LIVE_CASTS = {**CASTS, "float": _float, "bytes": _bytes}  # values may arrive as bytes (msgpack)


def row_caster(schema: list[list[str]], casts: dict[str, Callable] = CASTS):
    """``cast(values, where)``: the row as a tuple of the schema's types, or a ValueError
    naming the place (``where()``), the attribute and the value."""
    fns = [casts[t] for _, t in schema]

    def cast(values, where) -> tuple:
        try:
            return tuple(c(v) for c, v in zip(fns, values, strict=True))
        except (TypeError, ValueError, AttributeError):
            for (name, typ), c, v in zip(schema, fns, values, strict=True):
                try:
                    c(v)
                except (TypeError, ValueError, AttributeError) as exc:
                    msg = f"{where()}: attribute '{name}': cannot read {v!r} as {typ} ({exc})"
                    raise ValueError(msg) from None
            raise

    return cast


def typed_picker(schema: list[list[str]]) -> Callable[[Any], tuple | None]:
    """``pick(obj)``: a decoded JSON / msgpack object's attribute values as the schema's
    tuple, when each already has its attribute's exact type (``int``, ``float``, ``str``,
    ``bool``); ``None`` when any needs a cast or a check (an int for a float attribute, a
    whole float for an int one, a string of hex): the caller's ``row_caster`` path then
    casts it or says why not. ``KeyError`` / ``TypeError`` when ``obj`` lacks an attribute
    or is no mapping. About 0.13 us for two attributes where that path takes 1.1 us
    (2026-11-26). Compiled from the schema as ``json_encoder`` is: the code names only
    local slots, the attribute names are constants in its scope.

    >>> pick = typed_picker([["k", "int"], ["x", "float"]])
    >>> pick({"x": 2.5, "k": 1, "extra": None}), pick({"k": 1, "x": 2})
    ((1, 2.5), None)
    """
    types = [t for _, t in schema]
    if not types or any(t not in ("int", "float", "str", "bool") for t in types):
        return lambda obj: None
    slots = [f"a{i}" for i in range(len(types))]
    scope: dict[str, Any] = {f"N{i}": n for i, (n, _) in enumerate(schema)}
    code = ("def pick(obj):\n"
            + "".join(f"    {a} = obj[N{i}]\n" for i, a in enumerate(slots))
            + f"    if {' and '.join(f'type({a}) is {t}' for a, t in zip(slots, types, strict=True))}:\n"
            + f"        return ({', '.join(slots)},)\n"
            + "    return None\n")
    exec(compile(code, f"<typed_picker {len(types)} attributes>", "exec"), scope)  # noqa: S102 - slots only
    return scope["pick"]


def decoder(fmt: str, schema: list[list[str]], field: str = "value") -> Callable[[Any, Callable[[], str]], tuple]:
    """``decode(value, where)`` -> a tuple of the schema's types, for value format ``fmt``:

    * ``json``: a JSON object keyed by attribute name (``value`` is str or bytes);
    * ``csv``: one CSV line, the attributes' values in schema order (no header);
    * ``msgpack``: a msgpack map keyed by attribute name, or an array in schema order;
    * ``fields``: ``value`` is a mapping attribute name -> text (a Redis entry's fields).

    Errors are ``ValueError``s naming ``where()``, the attribute and the value.
    """
    names = [n for n, _ in schema]
    cast = row_caster(schema, LIVE_CASTS)

    def shown(v) -> str:
        return repr(v if len(repr(v)) <= 200 else repr(v)[:200] + "...")

    def pick(obj, where, what: str) -> tuple:
        if isinstance(obj, list) and fmt == "msgpack":
            if len(obj) != len(names):
                raise ValueError(f"{where()}: {what} has {len(obj)} values, the schema {len(names)} "
                                 f"({', '.join(names)}): {shown(obj)}")
            return cast(obj, where)
        if not isinstance(obj, dict):
            raise ValueError(f"{where()}: not {what} of the schema's attributes: {shown(obj)}")
        try:
            values = [obj[n] for n in names]
        except KeyError:
            missing = [n for n in names if n not in obj]
            raise ValueError(f"{where()}: no attribute {', '.join(map(repr, missing))} (it has: "
                             f"{', '.join(map(str, obj)) or 'nothing'}): {shown(obj)}") from None
        return cast(values, where)

    if fmt == "json":
        def decode(value, where) -> tuple:
            try:
                obj = json.loads(value)
            except (json.JSONDecodeError, UnicodeDecodeError, TypeError) as exc:
                raise ValueError(f"{where()}: not a JSON object ({exc}): {shown(value)}") from None
            return pick(obj, where, "a JSON object")
    elif fmt == "csv":
        def decode(value, where) -> tuple:
            try:
                text = value.decode("utf-8") if isinstance(value, bytes) else value
                rows = list(csv.reader([text.rstrip("\r\n")]))
            except (UnicodeDecodeError, csv.Error, AttributeError) as exc:
                raise ValueError(f"{where()}: not a CSV line ({exc}): {shown(value)}") from None
            row = rows[0] if rows else []
            if len(row) != len(names):
                raise ValueError(f"{where()}: a CSV line of {len(row)} values where the schema has "
                                 f"{len(names)} ({', '.join(names)}): {shown(value)}")
            return cast(row, where)
    elif fmt == "msgpack":
        import msgpack

        def decode(value, where) -> tuple:
            try:
                obj = msgpack.unpackb(value, raw=False, strict_map_key=False)
            except Exception as exc:  # noqa: BLE001 - msgpack raises several unrelated types
                raise ValueError(f"{where()}: not a msgpack value ({type(exc).__name__}: {exc}): "
                                 f"{shown(value)}") from None
            return pick(obj, where, "a msgpack map or array")
    elif fmt == "fields":
        def decode(value, where) -> tuple:
            obj = {(k.decode("utf-8", "replace") if isinstance(k, bytes) else k):
                   (v.decode("utf-8") if isinstance(v, bytes) else v) for k, v in value.items()}
            return pick(obj, where, "fields")
    else:
        raise ValueError(f"unknown value format {fmt!r}; use {', '.join(FORMATS)}")
    return decode


_FAST = {name: (s.py.__name__, s.json_format) for name, s in SCALARS.items()}
"""attribute type -> (the value's exact type, the %-format of its JSON text)"""


def json_encoder(names: list[str], types: list[str]) -> Callable[[tuple], str]:
    """``encode(tuple)`` -> exactly ``json.dumps(dict(zip(names, t)))`` (bytes as hex),
    about 4x faster for a tuple of the schema's types (2026-11-26: 0.45 vs 1.9 us for
    three numbers; every JSON sink writes one per tuple).

    One ``%`` format per schema does the work when every value has its attribute's exact
    type (``int``, ``float`` finite, ``str``, ``bool``, ``bytes``); any other tuple (a
    NaN, an int in a float attribute, None, a numpy scalar) goes through ``json.dumps``,
    so the text is json.dumps's in every case. The function is compiled from the schema:
    its code names only local slots (``a0``, ``a1``...); attribute names appear solely
    inside the format string, JSON-escaped, never as code.

    >>> enc = json_encoder(["k", "x", "s", "ok"], ["int", "float", "str", "bool"])
    >>> enc((1, 2.5, "ab", True))
    '{"k": 1, "x": 2.5, "s": "ab", "ok": true}'
    >>> enc((1, float("nan"), "a", False)) == json.dumps({"k": 1, "x": float("nan"), "s": "a", "ok": False})
    True
    """
    if len(names) != len(types) or any(t not in _FAST for t in types):
        raise ValueError(f"json_encoder: a schema of {len(names)} names and types {types!r}")
    esc = json.encoder.encode_basestring_ascii
    slots = [f"a{i}" for i in range(len(names))]
    fmt = "{" + ", ".join(esc(n).replace("%", "%%") + ": " + _FAST[t][1] for n, t in zip(names, types, strict=True)) + "}"
    checks = []
    values = []
    for a, t in zip(slots, types, strict=True):
        checks.append(f"type({a}) is {_FAST[t][0]}")
        if t == "float":
            checks.append(f"{a} - {a} == 0.0")  # finite: NaN and infinities take json.dumps's path
        values.append({"str": f"esc({a})", "bool": f"('true' if {a} else 'false')",
                       "bytes": f"{a}.hex()"}.get(t, a))
    unpack = ", ".join(slots) + ("," if len(slots) == 1 else "")
    code = (f"def encode(t):\n"
            f"    {unpack} = t\n"
            f"    if {' and '.join(checks) or 'True'}:\n"
            f"        return FMT % ({', '.join(values)}{',' if len(values) == 1 else ''})\n"
            f"    return slow(t)\n")
    hexes = [i for i, t in enumerate(types) if t == "bytes"]

    def slow(t: tuple) -> str:
        if len(t) != len(names):
            raise ValueError(f"a tuple of {len(t)} values for the {len(names)} attributes {', '.join(names)}")
        if hexes:
            t = tuple(v.hex() if i in hexes and isinstance(v, bytes) else v for i, v in enumerate(t))
        return json.dumps(dict(zip(names, t, strict=True)))

    scope: dict[str, Any] = {"FMT": fmt, "esc": esc, "slow": slow}
    exec(compile(code, f"<json_encoder {len(names)} attributes>", "exec"), scope)  # noqa: S102 - built above from slots only
    return scope["encode"]


def encoder(fmt: str, names: list[str], types: list[str]) -> Callable[[tuple], Any]:
    """``encode(tuple)`` -> the value written for format ``fmt`` (``fields``: a dict of
    field -> text). JSON writes bytes as hex and NaN/infinity as ``NaN``/``Infinity``,
    as file sinks do; msgpack keeps bytes."""
    hexes = [i for i, t in enumerate(types) if t == "bytes"]

    def plain(t: tuple) -> tuple:
        return tuple(v.hex() if i in hexes else v for i, v in enumerate(t)) if hexes else t

    if fmt == "json":
        return json_encoder(names, types)
    if fmt == "csv":
        import io

        def enc_csv(t: tuple) -> str:
            buf = io.StringIO()
            csv.writer(buf, lineterminator="").writerow(plain(t))
            return buf.getvalue()
        return enc_csv
    if fmt == "msgpack":
        import msgpack

        packer = msgpack.Packer(use_bin_type=True)
        return lambda t: packer.pack(dict(zip(names, t, strict=True)))
    if fmt == "fields":
        return lambda t: {n: (json.dumps(v) if isinstance(v, float) else str(v).lower() if isinstance(v, bool) else str(v))
                          for n, v in zip(names, plain(t), strict=True)}
    raise ValueError(f"unknown value format {fmt!r}; use {', '.join(FORMATS)}")
