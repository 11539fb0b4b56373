"""Output that explains itself: the result table's footer, the backlog note on live
latency, compare naming only what it ran, the parameters a build carries, and Spark's
start-up noise kept out of the terminal."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from spadeopt import api
from spadeopt.bench.compare import table
from spadeopt.console import result_table
from spadeopt.deploy import jvmlog
from spadeopt.deploy.launcher import RunResult

ROOT = Path(__file__).resolve().parents[2]


def _result(**kw) -> RunResult:
    return RunResult("clicks", "all", "local[2]", 1, 1, 120_356.0, 3.4, 100_000,
                     [{"pe": "pe0", "node": 0, "cpu_s": 0.8, "wall_s": 0.9}], {"out": 10}, 1, **kw)


def test_result_table_says_what_throughput_and_wall_time_measure():
    text = result_table(_result())
    assert "throughput: source tuples / the time from the first source tuple to the last PE's end" in text
    assert "wall time also counts starting the PEs" in text


def test_live_latency_says_when_it_includes_a_backlog_read_at_the_start():
    live, _ = api.load_graph("apps/clicks.py", {"live": "true"})
    assert api.backlog_sources(live) == ["clicks"]
    replay, _ = api.load_graph("apps/clicks.py", {})
    assert api.backlog_sources(replay) == []
    lat = {"p50_ms": 10.5, "p99_ms": 5766.5, "max_ms": 11805.2, "markers": 40, "backlog_sources": ["clicks"]}
    text = result_table(_result(latency=lat))
    assert "includes the backlog read at the start: clicks started at the beginning" in text
    assert "backlog" not in result_table(_result(latency={**lat, "backlog_sources": []}))


def test_compare_footer_names_only_the_strategies_it_ran():
    doc = json.loads((ROOT / "docs/results/compare/bargain-issue27b.json").read_text())
    assert set(doc["strategies"]) == {"all", "manual", "auto"}
    text = table(doc)
    assert "FATM / best of FALL, FMAN measured:" in text and "FATM-w1" not in text


def test_the_jvm_s_start_up_output_goes_to_the_log_not_the_terminal(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv(jvmlog.JVM_LOG_ENV, str(tmp_path / "jvm.log"))
    with jvmlog.jvm_output_to_log(True):  # a child started now keeps the log as its stderr
        child = subprocess.Popen(["sh", "-c", "sleep 0.3; echo 'Setting default log level' >&2; echo out"])
    os.write(2, b"ours\n")
    child.wait()
    err = capfd.readouterr()
    assert "Setting default log level" not in err.err and "ours" in err.err and "out" not in err.out
    assert "Setting default log level" in (tmp_path / "jvm.log").read_text()


@pytest.mark.spark
def test_run_of_a_build_says_which_parameters_it_carries_and_spark_stays_quiet(tmp_path):
    from tests.cli.clitools import cli

    assert cli("build", "apps/clicks.py", "-p", "n=500", "--fusion", "all", "-o", str(tmp_path / "b")).returncode == 0
    proc = cli("run", str(tmp_path / "b"), "--out", str(tmp_path / "o"),
               env={jvmlog.JVM_LOG_ENV: str(tmp_path / "jvm.log")})
    assert proc.returncode == 0, proc.stderr
    assert ("with the parameters it was built with: gap=30.0, jitter=0.0, lateness=0.0, live=False, n=500, "
            "stream='clicks', users=50, window=60.0") in proc.stderr
    assert "Setting default log level" not in proc.stderr
