"""`bench scale`: the bound arithmetic, the table and the plot from a result, and its usage errors.

The end-to-end command (profile, plan, run FALL and FATM-N on real PEs) is a benchmark,
run by hand (docs/scaling.md has its figures); these tests start no Spark."""

from __future__ import annotations

import subprocess
import sys

import pytest

from spadeopt.bench.scale import CURVE_CORES, bound, parse_cores, plot, table
from spadeopt.errors import UsageError


def test_the_bound_is_the_busiest_pe_or_the_cores_whichever_is_lower():
    # 4 PEs of 1 s each for 1000 tuples: 1000/s on one PE's core; on 2 cores 2 x 1000 / 4 s = 500/s
    assert bound(1000, [1.0, 1.0, 1.0, 1.0], 2) == pytest.approx(500.0)
    assert bound(1000, [1.0, 1.0, 1.0, 1.0], 16) == pytest.approx(1000.0)
    # an unbalanced plan is held by its busiest PE however many cores
    assert bound(1000, [2.0, 0.5, 0.5], 64) == pytest.approx(500.0)
    assert bound(1000, [4.0], 1) == bound(1000, [4.0], 64) == pytest.approx(250.0)


def _row(plan, pes, cpu, cores, tuples=1000):
    return {"plan": plan, "pes": pes, "cores": cores, "busiest_pe_cpu_s": max(cpu), "total_cpu_s": sum(cpu),
            "bound": bound(tuples, cpu, cores), "bound_by": "busiest PE",
            "speedup_over_fall": bound(tuples, cpu, cores) / bound(tuples, [4.0], 1),
            "curve_speedup": {str(n): bound(tuples, cpu, n) / bound(tuples, [4.0], 1) for n in CURVE_CORES},
            "predicted": None if plan == "FALL" else 4000.0, "predicted_over_bound": None if plan == "FALL" else 1.0,
            "measured_rate": 300.0, "measured_is_meaningful": cores <= 2}


def test_table_and_plot_say_what_was_measured(tmp_path):
    doc = {"app": "x", "app_ref": "apps/x.py", "host_cores": 2, "answers_identical": True,
           "plans": [_row("FALL", 1, [4.0], 16), _row("FATM-16", 16, [0.25] * 16, 16)]}
    text = table(doc)
    assert "FATM-16" in text and "16.00" in text and "identical" in text  # 16 PEs of 0.25 s: 16x FALL's 4 s
    assert "measured on fewer cores than the plan's" in text
    plot(doc, tmp_path / "scale.png")
    assert (tmp_path / "scale.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cores_are_parsed_and_bad_ones_refused():
    assert parse_cores("16") == [16] and parse_cores("2,4,16") == [2, 4, 16]
    with pytest.raises(UsageError, match="--cores"):
        parse_cores("many")


def test_bench_scale_without_an_app_exits_2_naming_the_fix(tmp_path):
    out = tmp_path / "o"
    proc = subprocess.run([sys.executable, "-m", "spadeopt", "bench", "scale", "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "bench scale needs an app" in proc.stderr, proc.stderr
    assert not out.exists()
    proc = subprocess.run([sys.executable, "-m", "spadeopt", "bench", "scale", "apps/opaque_chain.py", "--cores", "0",
                           "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--cores takes core counts from 1 to 64" in proc.stderr, proc.stderr
    assert not out.exists()


def test_fatm_is_planned_on_the_fall_run_of_the_same_command(tmp_path):
    """bench scale anchors the profile's production probe on its own FALL run, so the
    operators' cost per tuple FATM plans with is the one measured beside its plans."""
    from spadeopt.api import operator_profile
    from spadeopt.bench.scale import anchor_profile
    from spadeopt.refine.profile import Profile, ProfileRun

    run = ProfileRun("run", "all", 1, 1, 0.01, 100, 0.0, 1.0,
                     production={"cpu_s": 1.0, "tuples": 1000, "throughput": 900.0})
    prof = Profile("x", "fp", {}, "host", "cpu", 2, (run,), {}, {}, {}, ())
    prof.save(tmp_path / "profile.json")
    fall = {"total_cpu_s": 5.0, "tuples": 1000, "measured_rate": 150.0}
    out = anchor_profile(tmp_path / "profile.json", fall, tmp_path / "anchored.json")
    again = Profile.load_file(out)
    assert again.runs[0].production["cpu_s"] == 5.0 and again.graph_fingerprint == "fp"
    assert operator_profile(again).production_fall_cpu_s == pytest.approx(5.0 / 1000)
    assert operator_profile(Profile.load_file(tmp_path / "profile.json")).production_fall_cpu_s == pytest.approx(1e-3)
