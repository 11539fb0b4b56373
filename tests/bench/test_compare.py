"""``spadeopt compare`` through the CLI, on real Spark: four strategies, one answer."""

from __future__ import annotations

import json

import pytest

from tests.cli.clitools import cli

PARAMS = ["-p", "n=4", "-p", "work=30", "-p", "tuples=20000", "-p", "sink=file"]


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    out = tmp_path_factory.mktemp("compare")
    proc = cli("compare", "apps/chain.py", *PARAMS, "--repeat", "1", "--no-fission", "--out", str(out))
    return out, proc


@pytest.mark.spark
def test_compare_runs_all_four_strategies_and_their_answers_agree(compared):
    out, proc = compared
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((out / "compare.json").read_text())
    assert set(doc["strategies"]) == {"none", "all", "manual", "auto", "auto1"} and not doc["failed"]
    rows = doc["strategies"]
    assert rows["none"]["pes"] == 6 and rows["all"]["pes"] == 1 and rows["manual"]["pes"] == 4
    for row in rows.values():
        assert row["throughput_median"] > 0 and row["sinks"] == {"sink": 20000}
        assert len(row["throughput"]) == 1
    assert rows["auto"]["relative_to_fatm"] == 1.0
    assert doc["answers"]["identical"] and len(doc["answers"]["sha256"]) == 5
    assert doc["fatm_plan"]["rate_mode"] == "max" and doc["fatm_plan"]["planned_rate"] > 0
    assert doc["fatm_plan"]["profiled_under"] == "FALL"
    png = (out / "compare.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    for label in ("NONE", "FALL", "FMAN", "FATM", "FATM-w1", "vs FATM", "pl/meas", "byte-identical"):
        assert label in proc.stdout, proc.stdout
    assert doc["plan_pictures"] == {st: f"plan-{st}.png" for st in ("none", "all", "manual", "auto", "auto1")}
    assert all((out / name).read_bytes().startswith(b"\x89PNG") for name in doc["plan_pictures"].values())
    assert "plan pictures: " in proc.stdout and "plan-auto.png" in proc.stdout


@pytest.mark.spark
def test_compare_reports_predictions_for_every_strategy(compared):
    """--no-fission adds FATM-w1 (every region at width 1) from the same profile; every
    row (NONE, FALL, FMAN too) carries the model's predicted rate and predicted / measured,
    and FATM's is the rate its explain.json predicts for its own plan."""
    out, _ = compared
    doc = json.loads((out / "compare.json").read_text())
    rows = doc["strategies"]
    assert doc["fatm_plan_auto1"]["widths"] == {"ops": 1}
    assert set(doc["fatm_plan"]["widths"]) == {"ops"}
    for st in ("none", "all", "manual", "auto", "auto1"):
        assert rows[st]["planned_rate"] > 0
        assert rows[st]["predicted_over_measured"] == rows[st]["planned_rate"] / rows[st]["throughput_median"]
        assert rows[st]["prediction"]["model"]["source"]
    for st in ("none", "manual", "auto", "auto1"):  # predicted / measured speed-up over FALL
        assert rows[st]["versus_fall"] == rows[st]["predicted_over_measured"] / rows["all"]["predicted_over_measured"]
    assert rows["all"]["versus_fall"] == 1.0 and "/FALL" in (out / "compare.txt").read_text()
    explain = json.loads((out / "build-auto" / "explain.json").read_text())
    assert rows["auto"]["planned_rate"] == explain["rate"]["predicted"] == doc["fatm_plan"]["planned_rate"]
    assert (out / "compare.txt").read_text().startswith("chain on ")
    best = max(rows[st]["throughput_median"] for st in ("all", "manual", "auto1"))
    assert doc["fatm_over_best_other"] == rows["auto"]["throughput_median"] / best
    plan1 = json.loads((out / "build-auto1" / "plan.json").read_text())
    assert [r["width"] for r in plan1["regions"]] == [1]


@pytest.mark.spark
def test_a_strategy_that_fails_is_reported_and_the_others_still_run(compared, tmp_path):
    out, _ = compared
    # a profile of the 4-operator chain cannot drive FATM for the 5-operator one
    proc = cli("compare", "apps/chain.py", *PARAMS, "-p", "n=5", "--strategies", "all,auto",
                "--profile", str(out / "profile.json"), "--repeat", "1", "--out", str(tmp_path))
    assert proc.returncode == 1, proc.stderr[-2000:]
    doc = json.loads((tmp_path / "compare.json").read_text())
    assert "auto" in doc["failed"] and "graph" in doc["failed"]["auto"]
    assert doc["strategies"]["all"]["sinks"] == {"sink": 20000}
    assert "failed" in proc.stdout


def test_compare_refuses_bad_options_before_running_anything(tmp_path):
    for extra, what in ((["--strategies", "all,fast"], "fast"), (["--repeat", "0"], "--repeat")):
        proc = cli("compare", "apps/chain.py", *extra, "--out", str(tmp_path / "x"))
        assert proc.returncode == 2 and what in proc.stderr, proc.stderr
        assert not (tmp_path / "x" / "compare.json").exists()
