"""Keyed event-time windows and keyed custom operators in parallel regions on a real
Spark (issue 27, items 2 and 3): the sensor app (tests/apps/sensors.py: a partitioned
custom operator in region ``clean``; a keyed tumbling event-time window and a partitioned
custom operator with on_final in region ``watch``; late readings) writes byte-identical
sink files at widths 1-4 under FMAN, NONE and FALL; with a sliding window too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.clitools import cli

pytestmark = pytest.mark.spark

APP = "tests/apps/sensors.py"
PARAMS = ("-p", "tuples=6000", "-p", "late=30")


def _run(tmp_path: Path, fusion: str, width: int, *extra: str) -> bytes:
    tag = f"{fusion}-{width}"
    res = cli("run", APP, *PARAMS, *extra, "--fusion", fusion, "--width", f"clean={width}", "--width",
              f"watch={width}", "--out", tmp_path / tag, "--build-dir", tmp_path / f"b-{tag}")
    assert res.returncode == 0, res.stderr
    plan = json.loads((tmp_path / f"b-{tag}" / "plan.json").read_text())
    assert {r["name"]: r["width"] for r in plan["regions"]} == {"clean": width, "watch": width}
    return (tmp_path / tag / "windows.jsonl").read_bytes()


def test_sensor_app_gives_identical_sinks_at_every_width(tmp_path):
    base = _run(tmp_path, "manual", 1)
    rows = base.decode().splitlines()
    assert len(rows) > 500 and any('"alert": true' in r for r in rows), rows[:3]
    for fusion, width in (("manual", 2), ("manual", 3), ("manual", 4), ("none", 3), ("all", 2)):
        assert _run(tmp_path, fusion, width) == base, (fusion, width)


def test_a_sliding_event_time_window_gives_identical_sinks_at_every_width(tmp_path):
    """The same app with windows of 1000 sliding by 250: a group outlives a close, so a
    channel numbers a row by its window and its group's opening."""
    base = _run(tmp_path, "manual", 1, "-p", "slide=250")
    assert len(base.decode().splitlines()) > 1500
    for fusion, width in (("manual", 2), ("manual", 4), ("none", 3)):
        assert _run(tmp_path, fusion, width, "-p", "slide=250") == base, (fusion, width)
