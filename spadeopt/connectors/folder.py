"""A watched-folder source: every ready file of a directory is read once, in name order
(as Spark Structured Streaming's file source does), JSON lines or CSV with a header.

A file is *ready* when its name does not start with '.' or '_' and does not end with
'.tmp' or '.part' (``spec.IGNORED``, ``spec.UNFINISHED``): a writer creates it under
such a name and renames it when complete (a rename within one file system is atomic),
so a half-written file is never read. Files are remembered by name: a file is not read
again if it is rewritten; a ready file whose name sorts before one already read is read
next (name order holds among the files of one listing). Non-blocking: the folder is
listed at most every ``poll`` seconds, and a read takes at most ``n`` records of the
current file. Bounded mode: ``until="empty"`` ends when a listing finds no unread
ready file; ``count=N`` after N records.
"""

from __future__ import annotations

import os
import time
from typing import Any

from spadeopt.connectors.contract import ConnectorError, RecordSource, Source
from spadeopt.connectors.declared import IGNORED, UNFINISHED
from spadeopt.connectors.files import read_csv, read_jsonl


def ready(name: str) -> bool:
    """Is a file of this name complete by the folder rule (module docstring)?"""
    return not name.startswith(IGNORED) and not name.endswith(UNFINISHED)


class FolderSource(Source):
    live = True

    def __init__(self, *, name: str, schema: list, path: str, format: str = "jsonl", existing: bool = True,
                 until: str | None = None, count: int | None = None, poll: float = 0.1) -> None:
        self.name, self.schema, self.path, self.format = name, schema, path, format
        self.existing, self.until, self.limit, self.poll = existing, until, count, poll
        self.seen: set[str] = set()
        self.queue: list[str] = []  # ready files not read yet, in name order
        self.current: RecordSource | None = None
        self.current_name: str | None = None
        self.done_files = 0
        self.records = 0
        self._next_list = 0.0
        self._opened = False

    def _list(self) -> list[str]:
        try:
            with os.scandir(self.path) as it:
                return sorted(e.name for e in it if e.is_file() and ready(e.name) and e.name not in self.seen)
        except FileNotFoundError:
            raise ConnectorError(f"source '{self.name}': watched folder {self.path} does not exist") from None

    def open(self) -> None:
        if self._opened:
            return
        if not os.path.isdir(self.path):
            raise ConnectorError(f"source '{self.name}': watched folder {self.path} does not exist (create it)")
        self._opened = True
        if not self.existing:
            self.seen.update(self._list())

    def _file_source(self, file: str) -> RecordSource:
        reader = read_jsonl if self.format == "jsonl" else read_csv
        return reader(os.path.join(self.path, file), self.schema)

    def read(self, n: int) -> list[tuple] | None:
        if not self._opened:
            self.open()
        if self.limit is not None and self.records >= self.limit:
            return None
        want = n if self.limit is None else min(n, self.limit - self.records)
        while True:
            if self.current is None:
                if not self.queue:
                    now = time.monotonic()
                    if now < self._next_list:
                        return []
                    self._next_list = now + self.poll
                    self.queue = self._list()
                    if not self.queue:
                        return None if self.until == "empty" else []
                self.current_name = self.queue.pop(0)
                self.seen.add(self.current_name)
                self.current = self._file_source(self.current_name)
                self.current.open()
            batch = self.current.read(want)
            if batch is not None:
                self.records += len(batch)
                return batch
            self.current.close()
            self.current, self.current_name = None, None
            self.done_files += 1

    def position(self) -> dict[str, Any]:
        return {"files_done": self.done_files, "file": self.current_name,
                "record": self.current.position() if self.current else 0}

    def lag(self) -> int | None:
        """Ready files not read yet (as of the last listing)."""
        return len(self.queue) + (self.current is not None)

    def close(self) -> None:
        if self.current is not None:
            self.current.close()
            self.current = None
