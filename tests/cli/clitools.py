"""The CLI as a user types it, and a hash of a tree, for tests that check what a command
leaves on disk."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str, env: dict[str, str] | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spadeopt", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, **(env or {})}, timeout=600)


def tree_hash(path: Path) -> str:
    """Names, kinds and bytes of everything under ``path`` (or of the file itself)."""
    h = hashlib.sha256()
    if path.is_file():
        return hashlib.sha256(b"file\0" + path.read_bytes()).hexdigest()
    for p in sorted(path.rglob("*")):
        h.update(p.relative_to(path).as_posix().encode() + b"\0")
        h.update(b"d" if p.is_dir() else b"f" + p.read_bytes())
    return h.hexdigest()


def refused(proc: subprocess.CompletedProcess, *needles: str) -> None:
    """Exit 2 (bad input), no traceback, and every needle in stderr."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    for n in needles:
        assert n in proc.stderr, (n, proc.stderr)
