"""The two-source app of issue 36 (tests/apps/twowin.py: a filter and a keyed custom
smoother on one source, a keyed event-time window on each, tumbling and sliding, a
per-key join of the windows; late readings) on a real Spark: byte-identical sinks at
widths 2 and 3 under both layouts its author would declare, as with no region at all;
with an unordered sink inside the region (no merge left), the sorted same lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.clitools import cli

pytestmark = pytest.mark.spark

APP = "tests/apps/twowin.py"
PARAMS = ("-p", "n=5000", "-p", "late=40")


def _run(tmp_path: Path, regions: str, width: int, sink: str = "file") -> bytes:
    tag = f"{regions}-{width}-{sink}"
    widths = [] if regions == "none" else ["--width", f"keyed={width}"]
    if regions == "two":
        widths += ["--width", f"clean={width}"]
    res = cli("run", APP, *PARAMS, "-p", f"regions={regions}", "-p", f"sink={sink}", *widths, "--fusion", "manual",
              "--out", tmp_path / tag, "--build-dir", tmp_path / f"b-{tag}")
    assert res.returncode == 0, res.stderr
    plan = json.loads((tmp_path / f"b-{tag}" / "plan.json").read_text())
    assert all(r["width"] == width for r in plan["regions"]), plan["regions"]
    return (tmp_path / tag / "pairs.jsonl").read_bytes()


def test_the_two_source_app_gives_identical_sinks_under_both_declared_layouts(tmp_path):
    base = _run(tmp_path, "none", 1)
    assert len(base.splitlines()) > 1000
    for regions, width in (("one", 2), ("one", 3), ("two", 2), ("two", 3)):
        assert _run(tmp_path, regions, width) == base, (regions, width)
    assert _run(tmp_path, "one", 3, "unordered") == b"".join(sorted(base.splitlines(keepends=True)))
