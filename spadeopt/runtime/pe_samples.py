"""A running instrumented PE's samples so far, on request (``run --adaptive`` decides a
switch while the phase runs: docs/decisions/076-adaptive-decides-before-it-stops.md).

The driver writes a number into the samples request (``SAMPLES_FILE``, beside the run's
stop file in a local run's ``progress/``). Each instrumented PE polls it every
``runtime.pe.STOP_POLL`` seconds; when the number changes it writes its samples so far to
its sample file (``RUN/raw/<pe>.jsonl``, atomically, as at its end: ``Profiler.write(live=True)``)
and then the number to ``RUN/raw/<pe>.snapshot``. Once every PE's answer holds the number,
the run directory is a profiling run the refinement reads. The PE's end writes its
samples again, over the snapshot. Cost: nothing on the hot path; a snapshot takes this
thread as long as ``Profiler.write`` at the PE's end does.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from spadeopt.atomic import write_atomic
from spadeopt.errors import SpadeoptError
from spadeopt.profiling.records import pe_file

SAMPLES_FILE = "samples"  # the request, in a local run's progress directory
ANSWER_SUFFIX = ".snapshot"  # RUN/raw/<pe>.snapshot: the request number a PE's sample file answers
TRIES = 5  # a copy taken while a record is replaced can fail its checks: take it again


def answer_path(run_dir: str | os.PathLike[str], pe: str) -> Path:
    """Where PE ``pe`` writes the number of the request its sample file answers."""
    return (Path(run_dir) / pe_file(pe)).with_suffix(ANSWER_SUFFIX)


def watch(pe: str, profiler, run_dir: str, stop_file: str, done: threading.Event, poll: float) -> None:
    """Answer the run's samples requests until ``done`` (the module doc)."""
    request = os.path.join(os.path.dirname(stop_file), SAMPLES_FILE)
    last = ""
    while not done.wait(poll):
        try:
            with open(request) as f:
                number = f.read().strip()
        except OSError:
            continue
        if not number or number == last:
            continue
        last = number
        for _ in range(TRIES):
            try:
                profiler.write(run_dir, live=True)
            except (ValueError, RuntimeError, SpadeoptError):
                continue
            write_atomic(answer_path(run_dir, pe), number)
            break
