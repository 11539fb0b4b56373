"""Sink writers: JSON lines under the run's output directory, or a bare count.

A file sink writes ``<out>/.<name>.jsonl.part`` while the job runs; only when the whole
job has succeeded does the driver ``commit`` it to ``<out>/<name>.jsonl`` (a rename).
A failed or killed run therefore never leaves a file that looks complete: ``discard``
removes the parts, and any part left by a node that died is hidden and marked.

An *unordered* file sink (``mode="unordered"``: the order of its lines is not part of
the answer) writes one part per copy, ``.<name>#<copy>.jsonl.part`` (each channel of a
parallel region its own), and ``commit`` writes ``<name>.jsonl`` as every copy's lines
sorted: one order, whatever the width or the interleaving.
"""

from __future__ import annotations

import os
from pathlib import Path

from spadeopt.connectors.formats import json_encoder

PART_SUFFIX = ".jsonl.part"
UNORDERED = "#"  # an unordered sink's part: .<name>#<copy>.jsonl.part


def part_name(name: str) -> str:
    """The temporary file name of sink ``name`` while the job runs."""
    return f".{name}{PART_SUFFIX}"


def parts(out_dir: str | os.PathLike[str]) -> dict[str, Path]:
    """Sink name -> part file, for every part in ``out_dir``."""
    found = {}
    for p in sorted(Path(out_dir).glob(f".*{PART_SUFFIX}")):
        found[p.name[1:-len(PART_SUFFIX)]] = p
    return found


def commit(out_dir: str | os.PathLike[str]) -> list[Path]:
    """Rename every part in ``out_dir`` to its final ``<name>.jsonl`` (an unordered sink's
    parts: their lines sorted into it); the final paths."""
    done = []
    unordered: dict[str, list[Path]] = {}
    for name, p in parts(out_dir).items():
        if UNORDERED in name:
            unordered.setdefault(name.split(UNORDERED, 1)[0], []).append(p)
            continue
        final = Path(out_dir) / f"{name}.jsonl"
        os.replace(p, final)
        done.append(final)
    for name, ps in sorted(unordered.items()):
        lines = sorted(line for p in ps for line in p.read_text(encoding="utf-8").splitlines(keepends=True))
        final = Path(out_dir) / f"{name}.jsonl"
        tmp = final.with_name(f".{name}.jsonl.sorting")
        tmp.write_text("".join(lines), encoding="utf-8")
        os.replace(tmp, final)
        for p in ps:
            p.unlink()
        done.append(final)
    return done


def discard(out_dir: str | os.PathLike[str]) -> None:
    """Remove every part in ``out_dir`` (a failed run)."""
    for p in parts(out_dir).values():
        p.unlink(missing_ok=True)


class _Staged:
    """Where a staged file sink writes: a list of lines its checkpoint takes."""

    def __init__(self, lines: list[str]) -> None:
        self.write = lines.append


class Sink:
    """A file sink (JSON lines), a counting sink, or, with ``connector``, a sink
    connector (``spadeopt.connectors.contract.Sink``: a broker stream), opened here and
    closed (flushed) with the sink."""

    def __init__(self, name: str, mode: str, names: list[str], types: list[str], out_dir: str | None,
                 connector=None, part: str = ""):
        self.name = name
        self.count = 0
        self.names = names
        self._file = None
        self.staged = False  # checkpointing: lines wait for their checkpoint (stage, take)
        self._stage: list[str] = []
        self.connector = connector
        if connector is not None:
            connector.open()
            self.write = self._write_connector
            return
        if mode in ("file", "unordered") and out_dir:
            self._encode = json_encoder(names, types)  # json.dumps's text, bytes as hex
            self.path = Path(out_dir) / part_name(name if mode == "file" else f"{name}{UNORDERED}{part or name}")
            self._file = open(self.path, "w", encoding="utf-8")  # noqa: SIM115
        self.write = self._write_file if self._file else self._count

    def _write_connector(self, batch) -> None:
        self.connector.write(batch)
        self.count += len(batch)

    def _count(self, batch) -> None:
        self.count += len(batch)

    def _write_file(self, batch) -> None:
        if batch:
            self.count += len(batch)
            self._file.write("\n".join(map(self._encode, batch)) + "\n")

    def stage(self) -> None:
        """Checkpointing runs (``runtime.barrier_alignment``): a file sink's lines are kept until
        a barrier hands them to the coordinator (``take``), which commits them with the
        checkpoint; at the end of the run the lines after the last barrier go to the part
        file, after the committed ones (``deploy.checkpointed_run``). Counting and connector
        sinks count as before (their count is restored from the checkpoint); a
        transactional connector (the Redis sink) is staged by the checkpointer itself
        (``runtime.checkpoint_channel.attach``): it keeps its records until their checkpoint is
        complete, then appends them with a marker of the checkpoint (exactly once)."""
        if self._file is not None and not self.staged:
            self.staged = True
            self._real, self._file = self._file, _Staged(self._stage)

    def take(self) -> bytes:
        """The lines written since the last ``take`` (UTF-8), for the checkpoint."""
        text = "".join(self._stage)
        self._stage.clear()
        return text.encode()

    def close(self) -> None:
        if self.connector is not None:
            connector, self.connector = self.connector, None
            connector.close()
        if self.staged and self._file is not None:
            self._real.write("".join(self._stage))
            self._stage.clear()
            self._file = self._real
        if self._file:
            self._file.close()
            self._file = None

