"""Keyed event-time windows and keyed custom operators in parallel regions on a real
Spark (issue 27, items 2 and 3): the sensor app (tests/apps/sensors.py: a partitioned
custom operator in region ``clean``; a keyed tumbling event-time window and a partitioned
custom operator with on_final in region ``watch``; late readings) writes byte-identical
sink files at widths 1-4 under FMAN, NONE and FALL; with a sliding window too; and with
an allowed lateness and a late port, the same late readings and late count (issue 40)."""

from __future__ import annotations

import json
import re
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


def test_late_readings_are_counted_and_sent_on_identically_at_every_width(tmp_path):
    """The window with an allowed lateness of 500 ms and a late port (an unordered sink in
    region ``watch``): every strategy and width writes the same rows and late readings;
    the result table, ``--json`` and the warning say how many were late, which is the
    number of lines in the late sink."""
    late_args = ("-p", "lateness=500", "-p", "late_port=1")
    seen = {}
    for fusion, width in (("manual", 1), ("manual", 3), ("none", 2), ("all", 2)):
        tag = f"late-{fusion}-{width}"
        res = cli("run", APP, *PARAMS, *late_args, "--fusion", fusion, "--width", f"clean={width}", "--width",
                  f"watch={width}", "--out", tmp_path / tag, "--build-dir", tmp_path / f"b-{tag}",
                  "--json", tmp_path / f"{tag}.json")
        assert res.returncode == 0, res.stderr
        late = tuple((tmp_path / tag / "late.jsonl").read_text().splitlines())
        count = json.loads((tmp_path / f"{tag}.json").read_text())["operators"]["win"]["late"]
        assert count == len(late) > 20, (count, len(late))
        assert re.search(rf"^late tuples +win {count:,} \(dropped by event-time windows", res.stdout, re.M), res.stdout
        assert "WARNING: source 'readings': event time 'ts' went back by at least" in res.stderr
        seen[fusion, width] = ((tmp_path / tag / "windows.jsonl").read_bytes(), late)
    assert len(set(seen.values())) == 1, {k: len(v[1]) for k, v in seen.items()}
