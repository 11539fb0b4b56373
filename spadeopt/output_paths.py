"""Where spadeopt may write: no command deletes or overwrites what spadeopt did not make.

Every output path a command takes (``-o``, ``--out``, ``--build-dir``, ``--json``) is
*claimed* before any work starts. A claim succeeds when the path

- does not exist (it will be created), or
- is an empty directory (for a directory output), or
- holds a previous spadeopt artefact of the same kind, and nothing else.

Anything else (a user's directory, a file where a directory is expected, a profile
where a calibration is expected, a build with files spadeopt did not write in it) is
refused with ``UsageError`` (exit 2) naming what is there and how to go on. With
``force`` the foreign content is not deleted either: it is moved aside to
``<name>.spadeopt-backup-<time>`` and the message says where.

A directory spadeopt writes as a whole carries a marker file (``.spadeopt.json``) with
its kind and the entries spadeopt put in it; builds written before markers existed are
recognised by their ``deploy.json`` and file names. A file artefact is recognised by its
JSON ``kind`` (profiles, calibrations, run results) or, for older files, its keys.

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> (d / "notes.txt").write_text("mine")
4
>>> try:
...     claim_dir(d, "build", "-o")
... except UsageError as e:
...     print(str(e).split(" holds ")[1].splitlines()[0])
1 entry spadeopt did not write (notes.txt); it would be replaced by a build directory.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from spadeopt.errors import UsageError

MARKER = ".spadeopt.json"

# Entries a run adds to a directory of each kind, besides what the marker lists.
_RUN_PRODUCTS = {
    "build": {"logs", "progress", "explain.json"},
    "sinks": set(),
    "compare": set(),
}
def _json_has(path: Path, keys: set[str]) -> bool:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and keys <= set(doc)


_LEGACY = {  # directories written before markers: recognised by their shape and content
    "build": (lambda d, names: {"deploy.json", "plan.json"} <= names
              and _json_has(d / "deploy.json", {"schema_version", "app", "app_ref", "pes", "links", "spark"}),
              re.compile(r"(pe\d+\.py|plan\.json|deploy\.json|explain\.json|logs|progress|__pycache__)")),
    "compare": (lambda d, names: "compare.json" in names
                and _json_has(d / "compare.json", {"schema_version", "app", "answers"}),
                re.compile(r"(compare\.json|compare\.png|build-\w+|sinks|profile-run|profile\.json)")),
}
_WHAT = {"build": "a build directory", "sinks": "a sink output directory", "compare": "a compare directory"}


def _entries(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir())


def _marker(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads((path / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _foreign(path: Path, kind: str) -> tuple[list[str], str | None]:
    """Entries of ``path`` spadeopt did not write as ``kind``; and the kind found, if any."""
    names = _entries(path)
    mark = _marker(path)
    if mark is not None:
        if mark.get("kind") != kind:
            return [n for n in names if n != MARKER], str(mark.get("kind"))
        ours = set(mark.get("entries", [])) | _RUN_PRODUCTS.get(kind, set()) | {MARKER}
        return [n for n in names if n not in ours], kind
    legacy = _LEGACY.get(kind)
    if legacy and names and legacy[0](path, set(names)):
        return [n for n in names if not legacy[1].fullmatch(n)], kind
    return names, None


def _backup(path: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    dest = path.with_name(f"{path.name}.spadeopt-backup-{stamp}")
    n = 1
    while dest.exists():
        n += 1
        dest = path.with_name(f"{path.name}.spadeopt-backup-{stamp}-{n}")
    os.rename(path, dest)
    return dest


def _listing(names: list[str], limit: int = 5) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f", ... ({len(names) - limit} more)" if len(names) > limit else "")


def claim_dir(path: str | os.PathLike[str], kind: str, flag: str, force: bool = False,
              say: Callable[[str], None] | None = None) -> Path:
    """Check that directory output ``path`` (given by option ``flag``) may be (re)written as ``kind``.

    Returns the path. Raises ``UsageError`` when it holds anything spadeopt did not
    write as ``kind``; with ``force`` moves that content aside instead (``say`` is told).
    Writes nothing otherwise.
    """
    path = Path(path)
    what = _WHAT.get(kind, kind)
    if path.is_symlink() and not path.exists():
        raise UsageError(f"{flag} {path} is a dangling symbolic link; remove it or choose another path")
    if path.exists() and not path.is_dir():
        if not force:
            raise UsageError(f"{flag} {path} is a file, not a directory; it would be replaced by {what}. "
                             f"Choose another path, or pass --force to move the file aside")
        dest = _backup(path)
        (say or print)(f"moved the file {path} aside to {dest} (--force)")
        return path
    if not path.is_dir():
        _check_creatable(path, flag)
        return path
    foreign, found = _foreign(path, kind)
    if not foreign:
        if not os.access(path, os.W_OK | os.X_OK):
            raise UsageError(f"{flag} {path} is not writable; choose another path or fix its permissions")
        return path
    if not force:
        n = len(foreign)
        held = f"{_WHAT.get(found, found)} of another kind" if found not in (None, kind) else None
        there = held or f"{n} entr{'y' if n == 1 else 'ies'} spadeopt did not write ({_listing(foreign)})"
        raise UsageError(f"{flag} {path} holds {there}; it would be replaced by {what}.\n"
                         f"Choose a new or empty directory, or pass --force to move the existing "
                         f"directory aside (nothing is deleted)")
    dest = _backup(path)
    (say or print)(f"moved the existing directory {path} aside to {dest} (--force)")
    return path


def mark_dir(path: str | os.PathLike[str], kind: str, entries: Iterable[str]) -> None:
    """Record that spadeopt wrote ``entries`` in directory ``path`` as ``kind``."""
    from spadeopt.atomic import write_atomic

    path = Path(path)
    old = _marker(path)
    names = set(entries)
    if old is not None and old.get("kind") == kind:
        names |= set(old.get("entries", []))
    doc = {"kind": kind, "written_by": "spadeopt", "entries": sorted(names)}
    write_atomic(path / MARKER, json.dumps(doc, indent=2, sort_keys=True) + "\n")


def marker_text(kind: str, entries: Iterable[str]) -> str:
    """The marker file's text for a directory written whole (e.g. a build)."""
    doc = {"kind": kind, "written_by": "spadeopt", "entries": sorted(set(entries))}
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


# ---- files ---------------------------------------------------------------------------------
_RESULT_KEYS = {"app", "strategy", "master", "throughput", "per_pe"}
def _json_kind(test: Callable[[dict], bool]) -> Callable[[bytes], bool]:
    def recognise(data: bytes) -> bool:
        try:
            doc = json.loads(data)
        except ValueError:
            return False
        return isinstance(doc, dict) and test(doc)

    return recognise


FILE_KINDS: dict[str, Callable[[bytes], bool]] = {
    "profile": _json_kind(lambda d: d.get("kind") == "spadeopt-profile"),
    "calibration": _json_kind(lambda d: str(d.get("kind", "")).startswith("spadeopt-calibration")),
    "result": _json_kind(lambda d: d.get("kind") == "spadeopt-run-result" or _RESULT_KEYS <= set(d)),
    "plan picture (PNG)": lambda b: b.startswith(b"\x89PNG") and b"spadeopt plan picture" in b[:4096],
    "plan picture (DOT)": lambda b: b.startswith(b"// spadeopt plan picture"),
}


def claim_file(path: str | os.PathLike[str], kind: str, flag: str, force: bool = False,
               say: Callable[[str], None] | None = None) -> Path:
    """Check that file output ``path`` may be (re)written as a ``kind`` artefact; writes nothing."""
    path = Path(path)
    if path.is_dir():
        if not force or any(path.iterdir()):
            raise UsageError(f"{flag} {path} is a directory; give a file path inside it")
        return path
    if not path.exists():
        _check_creatable(path, flag)
        return path
    try:
        ours = FILE_KINDS[kind](path.read_bytes())
    except OSError:
        ours = False
    if ours:
        if not os.access(path, os.W_OK) or not os.access(path.parent, os.W_OK | os.X_OK):
            raise UsageError(f"{flag} {path} is not writable; choose another path or fix its permissions")
        return path
    if not force:
        raise UsageError(f"{flag} {path} exists and is not a spadeopt {kind} file; it would be overwritten.\n"
                         f"Choose another path, or pass --force to move the existing file aside "
                         f"(nothing is deleted)")
    dest = _backup(path)
    (say or print)(f"moved the existing file {path} aside to {dest} (--force)")
    return path


def _check_creatable(path: Path, flag: str) -> None:
    ancestor = path.absolute().parent
    while not ancestor.exists():
        if ancestor.is_symlink() or ancestor == ancestor.parent:
            break
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise UsageError(f"{flag} {path}: cannot create it, {ancestor} is not a directory")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {path}: cannot create it, {ancestor} is not writable")
