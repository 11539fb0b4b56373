"""``spadeopt bench adaptive``'s report (its runs are measured, not tested: they are
``run --adaptive`` and ``run``, which tests/cli/test_adaptive_run.py covers)."""

from __future__ import annotations

import argparse

import pytest

from spadeopt.bench.adaptive_bench import from_args, table
from spadeopt.errors import UsageError


def _doc(**kw):
    doc = {"app": "ysb", "app_ref": "apps/ysb.py", "params": {"tuples": "1"}, "cores": 2, "switched": True,
           "reason": "FATM chosen", "pause_s": 2.91, "timings": {"refine_s": 1.7, "plan_s": 0.1, "warm_up_s": 9.0},
           "refused": ["FATM: cannot resume"], "phase1": {"strategy": "all", "pes": 1, "steady_rate": 1e6},
           "phase2": {"strategy": "auto", "pes": 3, "widths": {"r": 2}, "steady_rate": 1.5e6},
           "static_fatm": {"pes": 3, "widths": {"r": 2}, "steady_rate": 1.6e6}, "phase2_over_static_fatm": 0.9375,
           "answers_identical": True, "sink_counts": {"static_fatm": {"out": 7}, "adaptive": {"out": 7}}}
    doc.update(kw)
    return doc


def test_the_report_gives_the_pause_its_parts_the_ratio_and_the_answers():
    text = table(_doc())
    assert "pause 2.91 s (refine 1.70 s, plan 0.10 s; warm-up before phase 1 9.00 s)" in text
    assert "phase 2 / static FATM: 0.94" in text and "identical sinks (counts {'out': 7})" in text
    assert "refused: FATM: cannot resume" in text
    text = table(_doc(pause_s=None, switched=False, phase2_over_static_fatm=None, answers_identical=False))
    assert "- (no switch)" in text and "phase 2 / static FATM: -" in text and "SINKS DIFFER" in text


def test_bench_adaptive_needs_an_app():
    with pytest.raises(UsageError, match="bench adaptive needs an app"):
        from_args(argparse.Namespace(app=None, out="x", params={}, cores=None, force=False), log=print)
