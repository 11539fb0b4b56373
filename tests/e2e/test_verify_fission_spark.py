"""``spadeopt run --verify-fission N``: a custom operator whose declared state kind is
wrong is caught on the first N records, before the run; an honest one runs on."""

from __future__ import annotations

import json

import pytest

from tests.cli.clitools import cli

APP = "tests/apps/declared_state.py"


@pytest.mark.spark
def test_a_custom_operator_that_lies_about_its_state_stops_the_run_before_it_starts(tmp_path):
    out = tmp_path / "out"
    r = cli("run", APP, "--fusion", "manual", "-p", "state=liar", "--verify-fission", "300",
            "--out", out, "--build-dir", tmp_path / "build")
    assert r.returncode == 1, r.stderr
    assert "--verify-fission 300: sink 'sink' line" in r.stderr
    assert "'number' state='stateless'" in r.stderr and "reg at width 2" in r.stderr
    assert "Traceback" not in r.stderr
    assert not out.exists() or not any(out.iterdir())  # the real run never started
    kept = tmp_path / "build" / "verify"
    width1, plan = (kept / "width1-out" / "sink.jsonl").read_text(), (kept / "plan-out" / "sink.jsonl").read_text()
    assert len(width1.splitlines()) == 300 and width1 != plan


@pytest.mark.spark
def test_an_honest_custom_operator_is_verified_and_the_run_goes_on(tmp_path):
    out = tmp_path / "out"
    r = cli("run", APP, "--fusion", "manual", "-p", "state=honest", "-p", "tuples=1000", "--verify-fission", "300",
            "--out", out, "--build-dir", tmp_path / "build")
    assert r.returncode == 0, r.stderr
    assert "--verify-fission 300: every sink matches width 1 under regions reg (width 2)" in r.stdout + r.stderr
    rows = [json.loads(line) for line in (out / "sink.jsonl").read_text().splitlines()]
    assert len(rows) == 1000  # the whole run, not the verified prefix
    assert [r["n"] for r in rows if r["k"] == 1][:3] == [1, 2, 3]
    assert not (tmp_path / "build" / "verify").exists()
