"""Sink writers: JSON lines under the run's output directory, or a bare count."""

from __future__ import annotations

import json
from pathlib import Path


class Sink:
    def __init__(self, name: str, mode: str, names: list[str], types: list[str], out_dir: str | None):
        self.name = name
        self.count = 0
        self.names = names
        self._hex = [i for i, t in enumerate(types) if t == "bytes"]
        self._file = None
        if mode == "file" and out_dir:
            self.path = Path(out_dir) / f"{name}.jsonl"
            self._file = open(self.path, "w", encoding="utf-8")  # noqa: SIM115
        self.write = self._write_file if self._file else self._count

    def _count(self, batch) -> None:
        self.count += len(batch)

    def _write_file(self, batch) -> None:
        self.count += len(batch)
        names, hexes, dumps = self.names, self._hex, json.dumps
        if hexes:
            batch = [tuple(v.hex() if i in hexes else v for i, v in enumerate(t)) for t in batch]
        self._file.write("".join(dumps(dict(zip(names, t, strict=True))) + "\n" for t in batch))

    def close(self) -> None:
        if self._file:
            self._file.close()
            self._file = None
