"""Built-in source generators: file replay and a seeded tuple counter.

Every source is a generator function called in the PE's source thread; its tuples
are chunked into batches by the runtime.
"""

from __future__ import annotations

import csv
import json
import random
from collections.abc import Iterator

CASTS = {"int": int, "float": float, "str": str, "bool": lambda v: str(v).lower() in ("1", "true", "yes"),
         "bytes": bytes.fromhex}


def _row_caster(schema: list[list[str]]):
    casts = [CASTS[t] for _, t in schema]
    return lambda values: tuple(c(v) for c, v in zip(casts, values, strict=True))


def read_csv(path: str, schema: list[list[str]]) -> Iterator[tuple]:
    """Replay a CSV file with a header row; columns are picked by schema attribute name."""
    cast = _row_caster(schema)
    names = [n for n, _ in schema]
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        for row in reader:
            yield cast([row[n] for n in names])


def read_jsonl(path: str, schema: list[list[str]]) -> Iterator[tuple]:
    """Replay a JSON-lines file of objects keyed by attribute name."""
    cast = _row_caster(schema)
    names = [n for n, _ in schema]
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                obj = json.loads(line)
                yield cast([obj[n] for n in names])


def read_parquet(path: str, schema: list[list[str]]) -> Iterator[tuple]:
    """Replay a Parquet file, batch by batch (pyarrow)."""
    import pyarrow.parquet as pq

    names = [n for n, _ in schema]
    for batch in pq.ParquetFile(path).iter_batches(columns=names):
        cols = [batch.column(n).to_pylist() for n in names]
        yield from zip(*cols, strict=True)


def counter(n: int, size: int = 100, seed: int = 0) -> Iterator[tuple]:
    """``n`` tuples ``(seq, payload)`` whose msgpack encoding is about ``size`` bytes."""
    rng = random.Random(seed)
    payload_len = max(0, size - 12)
    payload = bytes(rng.getrandbits(8) for _ in range(payload_len))
    for i in range(n):
        yield (i, payload)
