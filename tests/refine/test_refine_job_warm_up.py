"""The refinement's warm-up (``refine.job.warm_up``, which ``run --adaptive`` runs before
phase 1 so its switch does not wait for Spark SQL's first query): it runs the very query
refine runs, on one made-up line, and leaves nothing behind."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from spadeopt.refine import job

pytestmark = pytest.mark.spark


def test_warm_up_runs_the_refine_query_and_leaves_no_file(monkeypatch):
    seen = []
    real = job._aggregate_files

    def spy(run_files, master, cores, conf=None):
        seen.append([Path(f).read_text() for f in run_files[0]])
        aggs, spans = real(run_files, master, cores, conf)
        seen.append((aggs, spans))
        return aggs, spans

    monkeypatch.setattr(job, "_aggregate_files", spy)
    before = set(Path(tempfile.gettempdir()).glob("spadeopt-warm-up-*"))
    took = job.warm_up("local[2]", 2)
    assert took > 0
    (lines,), (aggs, spans) = seen
    assert lines.count("\n") == 1
    assert aggs[0][("a", "out", "out", None, "count")].n == 1 and spans == {0: (1.0, 1.0)}
    assert set(Path(tempfile.gettempdir()).glob("spadeopt-warm-up-*")) == before
