"""bench profiling-overhead: how rounds become overheads and target verdicts (no runs)."""

from __future__ import annotations

import pytest

from spadeopt.bench.profiling_overhead import summarize


def _samples(off: list[float], s001: list[float]) -> dict[str, list[float]]:
    return {"None": off, "0.001": s001, "0.01": [50.0] * len(off), "0.1": [10.0] * len(off)}


def test_overhead_is_one_minus_median_ratio_and_targets_are_judged():
    out = summarize("chain n=8", _samples([100.0, 90.0, 110.0], [95.0, 80.0, 91.0]))
    assert out["overhead"]["0.001"] == pytest.approx(1 - 91 / 100)
    assert out["overhead"]["0.1"] == pytest.approx(0.9)
    assert out["off_noise"] == pytest.approx(0.2)
    assert out["target_met"] is True
    assert summarize("chain n=8", _samples([100.0] * 3, [85.0] * 3))["target_met"] is False
    assert summarize("chain n=32", _samples([100.0] * 3, [80.0] * 3))["target_met"] is True


def test_bargain_must_stay_within_the_off_runs_noise():
    assert summarize("bargain", _samples([100.0, 95.0, 105.0], [97.0] * 3))["target_met"] is True
    assert summarize("bargain", _samples([100.0, 99.0, 101.0], [90.0] * 3))["target_met"] is False
    assert "target_met" not in summarize("chain n=1", _samples([1.0], [1.0]))


def test_in_process_view_runs_the_generated_pe_off_and_at_every_rate(tmp_path):
    """The in-process view really runs both builds: every tuple through, rates profiled."""
    from spadeopt.bench.profiling_overhead import in_process

    out = in_process("apps/chain.py", {"n": "2", "tuples": "20000"}, tmp_path, 2)
    assert out["tuples"] == 20000
    assert set(out["min_cpu_s"]) == {"None", "0.001", "0.01", "0.1"}
    assert all(len(v) == 2 and min(v) > 0 for v in out["cpu_s"].values())
    assert out["overhead"]["0.1"] == pytest.approx(1 - out["min_cpu_s"]["None"] / out["min_cpu_s"]["0.1"])
