"""Atomic file writes: a temporary file in the same directory, fsync, then rename.

Every artefact spadeopt writes goes through here, so a crash never leaves half a file.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_atomic(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` via a temporary file in the same directory and a rename."""
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` via a temporary file in the same directory (fsynced) and
    a rename: readers see the old file or the new one, never a part of it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path
