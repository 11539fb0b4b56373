"""A join fed by a tumbling count window's end-of-stream flush, in a region, on a real
Spark (issue 36 item 2, decision 067): ``tests/apps/flush_join.py`` writes byte-identical
sink files at widths 1-3 (the join's left side behind a side exchange)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.clitools import cli

pytestmark = pytest.mark.spark

APP = "tests/apps/flush_join.py"


def _run(tmp_path: Path, fusion: str, width: int) -> bytes:
    tag = f"{fusion}-{width}"
    res = cli("run", APP, "--fusion", fusion, "--width", f"flush={width}", "--out", tmp_path / tag,
              "--build-dir", tmp_path / f"b-{tag}")
    assert res.returncode == 0, res.stderr
    plan = json.loads((tmp_path / f"b-{tag}" / "plan.json").read_text())
    assert {r["name"]: r["width"] for r in plan["regions"]} == {"flush": width}
    return (tmp_path / tag / "matches.jsonl").read_bytes()


def test_a_join_fed_by_a_count_window_flush_gives_identical_sinks_at_every_width(tmp_path):
    base = _run(tmp_path, "manual", 1)
    assert len(base.decode().splitlines()) > 200
    for fusion, width in (("manual", 3), ("none", 2)):
        assert _run(tmp_path, fusion, width) == base, (fusion, width)
