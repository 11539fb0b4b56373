"""The raw profile on disk: one JSON-lines file of kept samples per PE, plus a manifest.

Layout of a profiling run directory::

    RUN_DIR/manifest.json          written last, by the driver: the run is complete
    RUN_DIR/raw/<pe_id>.jsonl      written by each PE at exit: one kept sample a line

A sample line (keys always in this order)::

    {"pe":"pe_1","op":"B","port":"out0","dir":"out","sub":"C.in0",
     "metric":"process_cpu","ts":1763750000.123456,"value":2.1e-06}

``dir`` and ``metric`` combinations (``METRICS``): ``out`` points have ``count``,
``size``, ``submit_cpu``, ``process_cpu`` (``sub`` = the subscriber ``"op.port"``) and
``total``; ``in`` points (PE input ports) have ``count``, ``size``, ``process_cpu``
(``sub`` null: the port's own process call) and ``total``; ``thread`` points have
``thread_cpu`` only, with ``port`` holding the thread's label. ``sub`` is null except on
``out`` process timings and on ``in`` ``key`` lines: a keyed operator's input port's
sampled key hashes (``profiling.keys``), ``sub`` the hash as a decimal string (or ``*``,
the rarer keys' count) and ``value`` how many sampled tuples had it. Units: ``ts`` wall-clock seconds since the epoch; CPU values
seconds per tuple (``thread_cpu``: cumulative seconds); ``size`` bytes per tuple;
``count`` and ``total`` tuples. For ``count`` and ``thread_cpu`` the exact first and last
samples of the run are always among the lines (they are the smallest and largest ``ts``).

JSON lines rather than Parquet: a PE writes a few thousand lines per point at most,
people can read them, and Spark reads them natively (``spark.read.json``).

Every file is written atomically (temporary file in the same directory, then
``os.replace``), so a crash leaves either the old file or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import socket
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Final, NamedTuple

from spadeopt.atomic import write_atomic
from spadeopt.errors import ProfileError, UsageError
from spadeopt.model.schema import FILE_NAME_RULE, is_file_name

SCHEMA_VERSION: Final = 1
MANIFEST_NAME: Final = "manifest.json"
RAW_DIR: Final = "raw"

METRICS: Final[dict[str, frozenset[str]]] = {
    "out": frozenset({"count", "size", "submit_cpu", "process_cpu", "total"}),
    "in": frozenset({"count", "size", "process_cpu", "total", "key"}),
    "thread": frozenset({"thread_cpu"}),
}
"""Which metrics each kind of instrumentation point records."""

_RERUN = "re-run `spadeopt profile` into a new directory"


class SampleRecord(NamedTuple):
    """One kept sample, as one line of ``raw/<pe>.jsonl``."""

    pe: str
    op: str
    port: str
    dir: str
    sub: str | None
    metric: str
    ts: float
    value: float


class HostInfo(NamedTuple):
    host: str
    cores: int
    cpu_model: str


@dataclass(frozen=True)
class Manifest:
    """``manifest.json``: what was run, where, how it was sampled, and the PE files.

    ``started``/``finished`` are wall-clock seconds since the epoch (the same clock as
    the samples' ``ts``); ``duration`` is the profiled run's length in seconds.
    ``pe_files`` are paths relative to the run directory, ``raw/<pe_id>.jsonl``.
    """

    app: str
    graph_fingerprint: str
    plan: Any
    params: dict[str, Any]
    host: str
    cores: int
    cpu_model: str
    duration: float
    seed: int
    sample_rate: float
    reservoir_size: int
    started: float
    finished: float
    pe_files: tuple[str, ...]
    schema_version: int = SCHEMA_VERSION

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["pe_files"] = list(self.pe_files)
        return {"schema_version": data.pop("schema_version"), **data}

    @classmethod
    def from_json(cls, data: object, path: Path) -> Manifest:
        """Validate a parsed manifest; ``ProfileError`` lists every problem found."""
        if not isinstance(data, dict):
            msg = f"{path}: expected a JSON object, found {type(data).__name__}; {_RERUN}"
            raise ProfileError(msg)
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            msg = (
                f"{path}: schema_version {version!r} is not supported (this spadeopt reads "
                f"schema_version {SCHEMA_VERSION}); use the spadeopt version that wrote "
                f"it, or {_RERUN}"
            )
            raise ProfileError(msg)
        problems = [p for f in fields(cls) if (p := _field_problem(f.name, data))]
        if problems:
            listed = "\n".join(f"  - {p}" for p in problems)
            msg = f"{path}: invalid manifest ({len(problems)} problem(s)):\n{listed}\n{_RERUN}"
            raise ProfileError(msg)
        kwargs = {f.name: data[f.name] for f in fields(cls)}
        kwargs["pe_files"] = tuple(kwargs["pe_files"])
        kwargs["sample_rate"] = float(kwargs["sample_rate"])
        return cls(**kwargs)

    def pe_ids(self) -> tuple[str, ...]:
        return tuple(Path(f).name.removesuffix(".jsonl") for f in self.pe_files)


def _is_num(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


_FIELD_CHECKS: Final[dict[str, tuple[str, Any]]] = {
    "app": ("a non-empty string", lambda v: isinstance(v, str) and v != ""),
    "graph_fingerprint": ("a string", lambda v: isinstance(v, str)),
    "plan": ("any JSON value", lambda v: True),
    "params": ("a JSON object", lambda v: isinstance(v, dict)),
    "host": ("a string", lambda v: isinstance(v, str)),
    "cores": ("an integer >= 1", lambda v: _is_int(v) and v >= 1),
    "cpu_model": ("a string", lambda v: isinstance(v, str)),
    "duration": ("a number >= 0", lambda v: _is_num(v) and v >= 0),
    "seed": ("an integer", _is_int),
    "sample_rate": ("a number in (0, 1]", lambda v: _is_num(v) and 0 < v <= 1),
    "reservoir_size": ("an integer >= 1", lambda v: _is_int(v) and v >= 1),
    "started": ("a number (epoch seconds)", _is_num),
    "finished": ("a number (epoch seconds)", _is_num),
    "pe_files": (
        "a list of distinct 'raw/<pe_id>.jsonl' paths",
        lambda v: (
            isinstance(v, list)
            and all(isinstance(f, str) and _pe_of_file(f) is not None for f in v)
            and len(set(v)) == len(v)
        ),
    ),
    "schema_version": ("an integer", _is_int),
}


def _field_problem(name: str, data: dict[str, Any]) -> str | None:
    if name not in data:
        return f"'{name}' is missing"
    expected, check = _FIELD_CHECKS[name]
    if not check(data[name]):
        return f"'{name}' must be {expected}; found {data[name]!r}"
    return None


def _pe_of_file(rel: str) -> str | None:
    """The PE id of a manifest entry ``raw/<pe_id>.jsonl``, or None if malformed."""
    prefix = RAW_DIR + "/"
    if not (rel.startswith(prefix) and rel.endswith(".jsonl")):
        return None
    pe = rel[len(prefix) : -len(".jsonl")]
    return pe if is_file_name(pe) else None


@dataclass(frozen=True)
class RawRun:
    """A validated profiling run: its manifest and every kept sample of every PE."""

    run_dir: Path
    manifest: Manifest
    records: tuple[SampleRecord, ...]


def pe_file(pe: str) -> str:
    """The path of a PE's sample file relative to the run directory."""
    if not is_file_name(pe):
        msg = f"PE id {pe!r} cannot name a file: use {FILE_NAME_RULE}"
        raise UsageError(msg)
    return f"{RAW_DIR}/{pe}.jsonl"


def host_info() -> HostInfo:
    """This machine's name, core count and CPU model (from /proc/cpuinfo where present)."""
    model = ""
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                name, _, value = line.partition(":")
                if name.strip() == "model name":
                    model = value.strip()
                    break
    return HostInfo(socket.gethostname(), os.cpu_count() or 1, model or platform.processor())


def write_pe_samples(
    run_dir: str | os.PathLike[str], pe: str, records: Iterable[SampleRecord]
) -> Path:
    """Write ``RUN_DIR/raw/<pe>.jsonl`` atomically; return its path.

    Every record must belong to ``pe``. Values must be finite numbers.
    """
    path = Path(run_dir) / pe_file(pe)
    lines = []
    for rec in records:
        if rec.pe != pe:
            msg = f"sample of PE {rec.pe!r} handed to the writer of PE {pe!r}: {rec}"
            raise UsageError(msg)
        try:
            lines.append(json.dumps(rec._asdict(), allow_nan=False, separators=(",", ":")))
        except (TypeError, ValueError) as e:
            msg = f"PE {pe}: sample cannot be written as JSON ({e}): {rec}"
            raise ProfileError(msg) from e
    write_atomic(path, "".join(line + "\n" for line in lines))
    return path


def write_manifest(run_dir: str | os.PathLike[str], manifest: Manifest) -> Path:
    """Write ``RUN_DIR/manifest.json`` atomically, after checking its PE files exist."""
    root = Path(run_dir)
    missing = [f for f in manifest.pe_files if not (root / f).is_file()]
    if missing:
        msg = (
            f"{root}: not writing the manifest, PE sample files are missing: "
            f"{', '.join(missing)}; a PE did not write its samples (did it crash?)"
        )
        raise ProfileError(msg)
    try:
        text = json.dumps(manifest.to_json(), indent=2, sort_keys=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        msg = f"{root / MANIFEST_NAME}: manifest cannot be written as JSON ({e})"
        raise ProfileError(msg) from e
    path = root / MANIFEST_NAME
    write_atomic(path, text + "\n")
    return path


def read_run(run_dir: str | os.PathLike[str]) -> RawRun:
    """Read and validate a profiling run directory.

    Raises ``ProfileError`` naming the file (and line) when the manifest or a PE file is
    missing, is not valid JSON, is cut short, or holds values of the wrong shape, and when
    the manifest's ``schema_version`` is not one this code reads.
    """
    root = Path(run_dir)
    manifest = _read_manifest(root)
    records: list[SampleRecord] = []
    for rel in manifest.pe_files:
        pe = _pe_of_file(rel)
        assert pe is not None  # checked by Manifest.from_json
        records.extend(_read_pe_file(root / rel, pe))
    return RawRun(root, manifest, tuple(records))


def _read_manifest(root: Path) -> Manifest:
    path = root / MANIFEST_NAME
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        msg = (
            f"{path} is missing: {root} is not a finished profiling run (the run did not "
            f"complete, or this is the wrong directory); {_RERUN}"
        )
        raise ProfileError(msg) from None
    except (OSError, UnicodeDecodeError) as e:
        msg = f"{path}: cannot read ({e}); {_RERUN}"
        raise ProfileError(msg) from e
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        msg = f"{path} line {e.lineno}: not valid JSON ({e.msg}, column {e.colno}); {_RERUN}"
        raise ProfileError(msg) from e
    return Manifest.from_json(data, path)


_KEYS: Final = SampleRecord._fields


def _read_pe_file(path: Path, pe: str) -> list[SampleRecord]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        msg = f"{path} is missing but listed in the manifest; PE {pe} lost its samples; {_RERUN}"
        raise ProfileError(msg) from None
    except OSError as e:
        msg = f"{path}: cannot read ({e}); {_RERUN}"
        raise ProfileError(msg) from e
    lines = data.split(b"\n")
    if lines[-1]:
        msg = (
            f"{path} line {len(lines)}: truncated (the file does not end with a newline, so "
            f"it was cut short while being written); {_RERUN}"
        )
        raise ProfileError(msg)
    out = []
    for lineno, line in enumerate(lines[:-1], 1):
        try:
            obj = json.loads(line)
        except ValueError as e:
            msg = f"{path} line {lineno}: not valid JSON ({e}); the file is corrupt; {_RERUN}"
            raise ProfileError(msg) from e
        problem = _record_problem(obj, pe)
        if problem:
            msg = f"{path} line {lineno}: {problem}; the file is corrupt; {_RERUN}"
            raise ProfileError(msg)
        out.append(SampleRecord(*(obj[k] for k in _KEYS)))
    return out


def _record_problem(obj: object, pe: str) -> str | None:
    """What is wrong with one parsed sample line, or None."""
    if not isinstance(obj, dict):
        return f"expected a JSON object, found {type(obj).__name__}"
    if set(obj) != set(_KEYS):
        return f"expected the keys {list(_KEYS)}, found {sorted(obj)}"
    if obj["pe"] != pe:
        return f"'pe' is {obj['pe']!r} in the file of PE {pe!r}"
    for key in ("op", "port"):
        if not isinstance(obj[key], str) or not obj[key]:
            return f"'{key}' must be a non-empty string, found {obj[key]!r}"
    direction, metric, sub = obj["dir"], obj["metric"], obj["sub"]
    if direction not in METRICS:
        return f"'dir' must be one of {sorted(METRICS)}, found {direction!r}"
    if metric not in METRICS[direction]:
        return f"metric {metric!r} does not exist for dir {direction!r}"
    if metric == "key":
        if not (isinstance(sub, str) and (sub == "*" or sub.lstrip("-").isdigit())):
            return f"'sub' must be a key hash (an integer) or '*' for in key, found {sub!r}"
    elif (wants_sub := direction == "out" and metric == "process_cpu") != isinstance(sub, str):
        expected = "a subscriber 'op.port'" if wants_sub else "null"
        return f"'sub' must be {expected} for {direction} {metric}, found {sub!r}"
    for key in ("ts", "value"):
        if not _is_num(obj[key]):
            return f"'{key}' must be a finite number, found {obj[key]!r}"
    return None


def check_run_dir(run_dir: str | os.PathLike[str]) -> Path:
    """Check that a profiling run may be written to ``run_dir``; write nothing.

    ``UsageError`` when it is not a directory, cannot be created or written, or already
    holds a run (a manifest, or PE sample files of an unfinished one).
    """
    root = Path(run_dir)
    if root.exists() and not root.is_dir():
        msg = f"run directory {root} exists and is not a directory; choose another path"
        raise UsageError(msg)
    if root.is_dir():
        manifest = root / MANIFEST_NAME
        if manifest.exists():
            msg = (
                f"run directory {root} already holds a profiling run ({manifest}); "
                f"choose a new directory, or delete that run first"
            )
            raise UsageError(msg)
        raw = root / RAW_DIR
        if raw.is_dir() and any(raw.glob("*.jsonl")):
            msg = (
                f"run directory {root} holds the samples of an unfinished run ({raw}); "
                f"choose a new directory, or delete them first"
            )
            raise UsageError(msg)
        if not os.access(root, os.W_OK | os.X_OK):
            msg = (
                f"run directory {root} is not writable; choose another path or fix its permissions"
            )
            raise UsageError(msg)
        return root
    ancestor = root.absolute().parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        msg = f"cannot create run directory {root}: {ancestor} is not a directory"
        raise UsageError(msg)
    if not os.access(ancestor, os.W_OK | os.X_OK):
        msg = f"cannot create run directory {root}: {ancestor} is not writable"
        raise UsageError(msg)
    return root
