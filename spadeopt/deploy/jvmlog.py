"""Where the Spark driver JVM's own output goes: a log file, not the user's terminal.

PySpark starts the driver JVM as a child process that inherits this process's stdout and
stderr; Spark then prints its start-up lines there (the default log level, how to change
it, JVM module warnings). ``jvm_output_to_log`` points both at ``jvm_log()`` while the JVM
starts, so the JVM keeps the log for its whole life and this process gets its own back.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path

JVM_LOG_ENV = "SPADEOPT_JVM_LOG"  # where the driver JVM's own output goes (default below)


def jvm_log() -> Path:
    """The file the driver JVM's stdout and stderr go to: Spark's start-up lines (log
    levels, JVM module warnings) and anything it prints later, instead of the terminal."""
    return Path(os.environ.get(JVM_LOG_ENV) or Path.home() / ".cache" / "spadeopt" / "spark-driver.log")


@contextlib.contextmanager
def jvm_output_to_log(starting: bool):
    """While PySpark starts the JVM (``starting``), this process's stdout and stderr point
    at ``jvm_log()``: the JVM inherits them for its whole life; ours are put back at once."""
    if not starting:
        yield
        return
    try:
        path = jvm_log()
        path.parent.mkdir(parents=True, exist_ok=True)
        log = open(path, "ab")  # noqa: SIM115 - closed below, after the JVM has its copy
        sys.stdout.flush()
        sys.stderr.flush()
        saved = [os.dup(1), os.dup(2)]
    except OSError:  # no log to write to: the JVM keeps our stderr
        yield
        return
    try:
        log.write(f"\n---- {time.strftime('%Y-%m-%d %H:%M:%S')} pid {os.getpid()}: Spark driver JVM\n".encode())
        log.flush()
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)
        log.close()
