"""A region entered by two streams on a real Spark (issue 27, item 4): the orders/fills
app (tests/apps/orders_fills.py: two sources, a filter on each, a keyed join with tied
event times, a keyed count window, all in region ``desk``, one split per entering
stream) writes byte-identical sink files at widths 1-4 under FMAN, NONE and FALL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.clitools import cli

pytestmark = pytest.mark.spark

APP = "tests/apps/orders_fills.py"
PARAMS = ("-p", "tuples=6000")


def _run(tmp_path: Path, fusion: str, width: int) -> bytes:
    tag = f"{fusion}-{width}"
    res = cli("run", APP, *PARAMS, "--fusion", fusion, "--width", f"desk={width}", "--out", tmp_path / tag,
              "--build-dir", tmp_path / f"b-{tag}")
    assert res.returncode == 0, res.stderr
    plan = json.loads((tmp_path / f"b-{tag}" / "plan.json").read_text())
    assert {r["name"]: r["width"] for r in plan["regions"]} == {"desk": width}
    return (tmp_path / tag / "matches.jsonl").read_bytes()


def test_two_source_keyed_join_gives_identical_sinks_at_every_width(tmp_path):
    base = _run(tmp_path, "manual", 1)
    assert len(base.decode().splitlines()) > 500
    for fusion, width in (("manual", 2), ("manual", 3), ("manual", 4), ("none", 3), ("all", 2)):
        assert _run(tmp_path, fusion, width) == base, (fusion, width)
