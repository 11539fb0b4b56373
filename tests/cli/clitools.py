"""The CLI as a user types it, run in this process, and a hash of a tree, for tests that
check what a command leaves on disk.

``cli(...)`` calls ``spadeopt.cli.main(argv)`` the way ``python -m spadeopt`` would, with
what the process would see set around it and put back after: the working directory, the
environment, the SIGTERM handler main installs, stdout and stderr (captured). An
exception that would escape the interpreter becomes exit 1 with its traceback on stderr,
as Python prints it, so "no traceback" assertions keep their teeth. Only what needs a
separate process starts one (signals, process trees, the ``python -m spadeopt`` entry
point itself: ``cli_subprocess``).

Spark started in-process keeps its JVM between commands (each command still stops its
SparkSession at its end, as ``spadeopt`` does), so a command that runs Spark costs a
session, not a JVM.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import signal
import subprocess
import sys
import traceback
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[2]


class Result(NamedTuple):
    """What a CLI command did: its exit code and what it printed."""

    returncode: int
    stdout: str
    stderr: str


@contextlib.contextmanager
def _environment(env: dict[str, str] | None):
    saved = dict(os.environ)
    os.environ.update(env or {})
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def cli(*args: str | Path, env: dict[str, str] | None = None, cwd: Path = ROOT) -> Result:
    """``spadeopt ARGS...`` in this process, run in ``cwd`` with ``env`` added to the environment."""
    from spadeopt import cli as spadeopt_cli
    from spadeopt import console

    out, err = io.StringIO(), io.StringIO()
    sigterm = signal.getsignal(signal.SIGTERM)
    console._last_status[0] = 0.0  # a fresh process prints its first status line at once
    try:
        with _environment(env), contextlib.chdir(cwd), \
                contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = spadeopt_cli.main([str(a) for a in args])
            except SystemExit as exc:  # argparse: exit 2 on a usage error, 0 for --help
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                if not isinstance(exc.code, int | None):
                    print(exc.code, file=sys.stderr)
            except Exception:  # noqa: BLE001 - what would reach the interpreter: its traceback, exit 1
                traceback.print_exc()
                code = 1
    finally:
        signal.signal(signal.SIGTERM, sigterm)
    return Result(code, out.getvalue(), err.getvalue())


def cli_subprocess(*args: str | Path, env: dict[str, str] | None = None, cwd: Path = ROOT,
                   timeout: float = 600) -> subprocess.CompletedProcess:
    """``python -m spadeopt ARGS...`` in a child process: for what needs one."""
    return subprocess.run([sys.executable, "-m", "spadeopt", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, **(env or {})}, timeout=timeout)


def tree_hash(path: Path) -> str:
    """Names, kinds and bytes of everything under ``path`` (or of the file itself)."""
    h = hashlib.sha256()
    if path.is_file():
        return hashlib.sha256(b"file\0" + path.read_bytes()).hexdigest()
    for p in sorted(path.rglob("*")):
        h.update(p.relative_to(path).as_posix().encode() + b"\0")
        h.update(b"d" if p.is_dir() else b"f" + p.read_bytes())
    return h.hexdigest()


def refused(proc: Result | subprocess.CompletedProcess, *needles: str) -> None:
    """Exit 2 (bad input), no traceback, and every needle in stderr."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    for n in needles:
        assert n in proc.stderr, (n, proc.stderr)
