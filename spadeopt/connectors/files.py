"""File replays on the connector contract: CSV with a header, JSON lines, Parquet.

Each ``read_*`` gives a ``FileSource`` (``connectors.contract.RecordSource``): bounded, opened
at its first record, position = records read. Columns are picked by attribute name and
cast to the schema's types; errors name the file, line, attribute and value. Apps reach
them as ``spadeopt.toolkit.sources.read_csv`` etc. (``source(file=...)``); the watched
folder reads its files through them.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterator

from spadeopt.connectors.contract import RecordSource
from spadeopt.connectors.formats import CASTS, row_caster, typed_picker


def _csv_records(path: str, schema: list[list[str]]) -> Iterator[tuple]:
    cast = row_caster(schema)
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


def _jsonl_records(path: str, schema: list[list[str]]) -> Iterator[tuple]:
    cast, pick = row_caster(schema), typed_picker(schema)
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
                    rec = pick(obj)  # every value already of its attribute's type: no cast
                except (KeyError, TypeError):
                    rec = None  # said below
                if rec is not None:
                    yield rec
                    continue
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


def _parquet_records(path: str, schema: list[list[str]]) -> Iterator[tuple]:
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


class FileSource(RecordSource):
    """A file replay on the connector contract (``spadeopt.connectors.contract``): bounded,
    opened at its first record, position = records read, lag unknown."""

    def __init__(self, path: str, schema: list[list[str]], records: Callable) -> None:
        super().__init__()
        self.path, self.schema, self._records = path, schema, records

    def records(self) -> Iterator[tuple]:
        return self._records(self.path, self.schema)


def read_csv(path: str, schema: list[list[str]]) -> FileSource:
    """Replay a CSV file with a header row; columns are picked by schema attribute name."""
    return FileSource(path, schema, _csv_records)


def read_jsonl(path: str, schema: list[list[str]]) -> FileSource:
    """Replay a JSON-lines file of objects keyed by attribute name."""
    return FileSource(path, schema, _jsonl_records)


def read_parquet(path: str, schema: list[list[str]]) -> FileSource:
    """Replay a Parquet file, batch by batch (pyarrow); columns are picked by attribute
    name and converted to the attribute types (e.g. an int64 column read as float)."""
    return FileSource(path, schema, _parquet_records)
