"""`spadeopt cluster start / status / stop` print the whole recipe, PYSPARK_PYTHON
included, and a plan that does not fit a standalone cluster is refused before the job
is submitted."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from tests.cli.clitools import cli


def test_status_without_a_cluster_says_how_to_start_one(tmp_path: Path) -> None:
    proc = cli("cluster", "status", "--state-dir", str(tmp_path / "none"))
    assert proc.returncode == 1 and "spadeopt cluster start" in proc.stdout


@pytest.mark.spark
@pytest.mark.slow
def test_start_prints_the_recipe_status_shows_it_and_a_plan_too_big_is_refused_before_submitting(tmp_path):
    state = tmp_path / "cl"
    start = cli("cluster", "start", "--workers", "2", "--cores", "1", "--state-dir", str(state))
    if start.returncode != 0 and "did not start" in start.stderr:
        pytest.skip(f"a Spark standalone cluster does not start here: {start.stderr[-300:]}")
    try:
        assert start.returncode == 0, start.stderr
        assert f"export PYSPARK_PYTHON={sys.executable}" in start.stdout
        assert "export SPADEOPT_SPARK_SECRET_FILE=" in start.stdout
        master = next(w for w in start.stdout.split() if w.startswith("spark://"))
        assert f"--nodes 2 --cores 1 --master {master}" in start.stdout
        status = cli("cluster", "status", "--state-dir", str(state))
        assert status.returncode == 0 and master in status.stdout and "2 worker(s) x 1 core(s)" in status.stdout
        assert f"export PYSPARK_PYTHON={sys.executable}" in status.stdout
        # a 1 node x 2 cores plan on 2 workers of 1 core: refused, nothing submitted or written
        out = tmp_path / "out"
        secret = next(w.split("=", 1)[1] for w in start.stdout.split() if w.startswith("SPADEOPT_SPARK_SECRET"))
        t0 = time.monotonic()
        run = cli("run", "apps/chain.py", "-p", "n=2", "-p", "tuples=1000", "--fusion", "all", "--nodes", "1",
                  "--cores", "2", "--master", master, "--out", str(out), "--build-dir", str(tmp_path / "b"),
                  env={"SPADEOPT_SPARK_SECRET_FILE": secret, "PYSPARK_PYTHON": sys.executable})
        assert run.returncode == 2, run.stderr
        assert "offers 2 executor(s), room for 0 task(s) of 2 core(s)" in run.stderr and "1 node(s) x 2 core(s)" in run.stderr
        assert "Nothing was submitted" in run.stderr and "Traceback" not in run.stderr
        assert time.monotonic() - t0 < 45
        assert not out.exists()
    finally:
        stop = cli("cluster", "stop", "--state-dir", str(state))
    assert stop.returncode == 0, stop.stderr
    assert cli("cluster", "status", "--state-dir", str(state)).returncode == 1
