"""The optimizer benchmark runs end to end on a small configuration and writes its files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spadeopt.bench.optimizer_bench import main, run

pytestmark = pytest.mark.slow


def test_run_writes_both_reports(tmp_path: Path) -> None:
    report = run(tmp_path, n_graphs=12, speed_sizes=(60,), repeats=1, width_graphs=3)
    gap = json.loads((tmp_path / "optimizer_gap.json").read_text())
    speed = json.loads((tmp_path / "optimizer_speed.json").read_text())
    assert gap == report["gap"] and speed == report["speed"]
    summary = gap["summary"]
    assert summary["graphs"] == 12
    assert 0 <= summary["zero_gap"] <= 12
    assert 0.0 <= summary["median"] <= summary["p90"] <= summary["max"] <= 1.0
    assert all(5 <= c["operators"] <= 9 for c in gap["cases"])
    assert all(c["objective_exact"] <= c["objective_greedy"] + 1e-6 for c in gap["cases"])
    (only,) = speed["runs"]
    assert only["operators"] == 60 and only["seconds_best"] > 0


def test_reports_are_deterministic_apart_from_timings(tmp_path: Path) -> None:
    first = run(tmp_path / "1", n_graphs=8, speed_sizes=(40,), repeats=1, width_graphs=2)
    second = run(tmp_path / "2", n_graphs=8, speed_sizes=(40,), repeats=1, width_graphs=2)
    assert first["gap"]["cases"] == second["gap"]["cases"]
    assert first["speed"]["runs"][0]["pes"] == second["speed"]["runs"][0]["pes"]
    assert first["widths"]["cases"] == second["widths"]["cases"]


def test_cli(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main([str(tmp_path), "--graphs", "3", "--repeats", "1", "--width-graphs", "2"]) == 0
    assert "gap over 3 graphs" in capsys.readouterr().out
