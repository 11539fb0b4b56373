"""Built-in source generators: file replay and a seeded tuple counter; splittable sources.

Every source is a generator function called in the PE's source thread; its tuples
are chunked into batches by the runtime.

A *splittable* generator (:func:`splittable`) cuts its stream into *splits* of a fixed
number of records, numbered 0, 1, 2, ...: called with ``part=p, parts=n`` it yields,
in order, the splits ``p, p + n, p + 2n, ...``, each as a list (or tuple) of records,
every split full except the stream's last. With ``part=0, parts=1`` it yields the
whole stream. Such a source may lead a parallel region (fission): each channel's copy
reads its own share of the splits, with no split operator and no link in front of it,
and the region's merge takes the splits back in order, so the answer is the width-1
answer. Data-parallel readers in the style of Spark's input splits or Flink's source
splits; the runtime checks the sizes it can (a short split that is not a copy's last
stops the job naming the source).
"""

from __future__ import annotations

import csv
import inspect
import json
import random
from collections.abc import Callable, Iterator

SPLIT_ATTR = "__spadeopt_split__"


def splittable(size: int | str) -> Callable[[Callable], Callable]:
    """Declare a generator splittable into splits of ``size`` records (module docstring);
    ``size`` may name one of the generator's arguments that holds the split size.

    >>> @splittable(2)
    ... def numbers(n, *, part=0, parts=1):
    ...     for s in range(part, -(-n // 2), parts):
    ...         yield list(range(2 * s, min(2 * s + 2, n)))
    >>> list(numbers(5, part=1, parts=2))
    [[2, 3]]
    >>> split_size(numbers, {"n": 5})
    2
    """
    if isinstance(size, bool) or not (isinstance(size, str) and size.isidentifier()
                                      or isinstance(size, int) and size >= 1):
        raise ValueError(f"splittable(size): size must be an integer >= 1 or an argument's name, got {size!r}")

    def mark(fn: Callable) -> Callable:
        setattr(fn, SPLIT_ATTR, size)
        return fn

    return mark


def split_size(fn: Callable, args: dict) -> int:
    """Records per split of a :func:`splittable` generator called with ``args``; 0 when it
    is not splittable. ``ValueError`` when the size argument is not an integer >= 1."""
    size = getattr(fn, SPLIT_ATTR, 0)
    if isinstance(size, str):
        name = size
        if name in args:
            size = args[name]
        else:
            param = inspect.signature(fn).parameters.get(name)
            size = None if param is None else param.default
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"the split size argument {name!r} must be an integer >= 1, got {size!r}")
    return size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else 0


_TRUE = frozenset({"1", "true", "yes", "y", "t", "on"})
_FALSE = frozenset({"0", "false", "no", "n", "f", "off"})


def _bool(v) -> bool:
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
    return str(v)


CASTS = {"int": _int, "float": float, "str": _str, "bool": _bool, "bytes": bytes.fromhex}


def _row_caster(schema: list[list[str]]):
    """``cast(values, where)``: the row as a tuple of the schema's types, or a ValueError
    naming the place (``file:line``), the attribute and the value."""
    casts = [CASTS[t] for _, t in schema]

    def cast(values, where) -> tuple:
        try:
            return tuple(c(v) for c, v in zip(casts, values, strict=True))
        except (TypeError, ValueError, AttributeError):
            for (name, typ), c, v in zip(schema, casts, values, strict=True):
                try:
                    c(v)
                except (TypeError, ValueError, AttributeError) as exc:
                    msg = f"{where()}: attribute '{name}': cannot read {v!r} as {typ} ({exc})"
                    raise ValueError(msg) from None
            raise

    return cast


def read_csv(path: str, schema: list[list[str]]) -> Iterator[tuple]:
    """Replay a CSV file with a header row; columns are picked by schema attribute name."""
    cast = _row_caster(schema)
    names = [n for n, _ in schema]
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        missing = [n for n in names if n not in header]
        if missing:
            msg = (f"{path}: no column {', '.join(repr(n) for n in missing)} in the CSV header "
                   f"({', '.join(header) or 'empty file'})")
            raise ValueError(msg)
        for row in reader:
            yield cast([row[n] for n in names], lambda: f"{path}:{reader.line_num}")


def read_jsonl(path: str, schema: list[list[str]]) -> Iterator[tuple]:
    """Replay a JSON-lines file of objects keyed by attribute name."""
    cast = _row_caster(schema)
    names = [n for n, _ in schema]
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if line.strip():
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    msg = f"{path}:{lineno}: not a JSON object ({exc})"
                    raise ValueError(msg) from None
                try:
                    values = [obj[n] for n in names]
                except (KeyError, TypeError):
                    have = ", ".join(obj) if isinstance(obj, dict) else type(obj).__name__
                    missing = [n for n in names if not isinstance(obj, dict) or n not in obj]
                    msg = f"{path}:{lineno}: no attribute {', '.join(map(repr, missing))} (the line has: {have})"
                    raise ValueError(msg) from None
                yield cast(values, lambda lineno=lineno: f"{path}:{lineno}")


def _from_arrow(typ: str, arrow_type) -> object | None:
    """A per-value converter from an Arrow column to attribute type ``typ``, or None when
    the column's values already have that Python type."""
    import pyarrow.types as pat

    native = {"int": pat.is_integer, "float": pat.is_floating, "str": lambda t: pat.is_string(t) or pat.is_large_string(t),
              "bool": pat.is_boolean, "bytes": lambda t: pat.is_binary(t) or pat.is_large_binary(t)}
    if native[typ](arrow_type):
        return None
    if typ == "str":
        return lambda v: v.decode() if isinstance(v, bytes) else str(v)
    if typ == "bytes":
        return lambda v: v if isinstance(v, bytes) else bytes.fromhex(v)
    cast = CASTS[typ]
    if typ == "bool":
        return lambda v: cast(v) if isinstance(v, str) else bool(v)
    return cast


def read_parquet(path: str, schema: list[list[str]]) -> Iterator[tuple]:
    """Replay a Parquet file, batch by batch (pyarrow); columns are picked by attribute
    name and converted to the attribute types (e.g. an int64 column read as float)."""
    import pyarrow.parquet as pq

    names = [n for n, _ in schema]
    types = [t for _, t in schema]
    pf = pq.ParquetFile(path)
    arrow_schema = pf.schema_arrow
    convs = [_from_arrow(t, arrow_schema.field(n).type) for n, t in zip(names, types, strict=True)]
    row = 0
    for batch in pf.iter_batches(columns=names):
        cols = []
        for n, conv in zip(names, convs, strict=True):
            col = batch.column(n)
            if col.null_count:
                i = next(i for i, v in enumerate(col.is_null().to_pylist()) if v)
                msg = f"{path}: column '{n}' is null in row {row + i}; attributes cannot be null"
                raise ValueError(msg)
            values = col.to_pylist()
            cols.append(values if conv is None else [conv(v) for v in values])
        row += batch.num_rows
        yield from zip(*cols, strict=True)


def counter(n: int, size: int = 100, seed: int = 0) -> Iterator[tuple]:
    """``n`` tuples ``(seq, payload)`` whose msgpack encoding is about ``size`` bytes."""
    rng = random.Random(seed)
    payload_len = max(0, size - 12)
    payload = bytes(rng.getrandbits(8) for _ in range(payload_len))
    for i in range(n):
        yield (i, payload)
