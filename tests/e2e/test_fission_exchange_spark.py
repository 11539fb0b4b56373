"""A key exchange between two parallel regions on a real Spark (issue 27 item 4, second
part): tests/apps/exchange.py (region ``prep`` led by the splittable source, stateless or
static-rate, or split by account; region ``desk`` counting per symbol) writes byte-identical sink files at widths
1-4 on both sides, with the exchange in place whenever both are wider than 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.clitools import cli

pytestmark = pytest.mark.spark

APP = "tests/apps/exchange.py"


def _run(tmp_path: Path, case: str, fusion: str, wprep: int, wdesk: int) -> bytes:
    tag = f"{case}-{fusion}-{wprep}-{wdesk}"
    res = cli("run", APP, "-p", f"case={case}", "-p", "tuples=8000", "--fusion", fusion,
              "--width", f"prep={wprep}", "--width", f"desk={wdesk}", "--out", tmp_path / tag,
              "--build-dir", tmp_path / f"b-{tag}")
    assert res.returncode == 0, res.stderr
    plan = json.loads((tmp_path / f"b-{tag}" / "plan.json").read_text())
    regions = {r["name"]: r for r in plan["regions"]}
    assert (regions["prep"]["width"], regions["desk"]["width"]) == (wprep, wdesk)
    assert (regions["desk"]["fed"] == "exchange") == (wprep > 1 and wdesk > 1)
    return (tmp_path / tag / "sink.jsonl").read_bytes()


# every width pair under every fusion runs in process (tests/toolkit/test_fission_exchange.py);
# here, on Spark, the split-led shape gets the full set and the other two a sample of it
FULL = (("manual", 2, 2), ("manual", 3, 4), ("manual", 4, 2), ("manual", 2, 1), ("none", 2, 3), ("all", 4, 4))
SAMPLE = (("manual", 3, 4), ("none", 2, 3), ("all", 4, 2))


@pytest.mark.parametrize("case", ["source", "keyed", "static"])
def test_two_regions_joined_by_a_key_exchange_give_identical_sinks_at_every_width(tmp_path, case):
    base = _run(tmp_path, case, "manual", 1, 1)
    assert len(base.decode().splitlines()) > 300
    for fusion, wprep, wdesk in FULL if case == "keyed" else SAMPLE:
        assert _run(tmp_path, case, fusion, wprep, wdesk) == base, (fusion, wprep, wdesk)
