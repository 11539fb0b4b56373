"""`spadeopt profile` end to end: instrumented builds, fusion-transparent metrics, bad input."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from spadeopt import api
from spadeopt.codegen.render import render_build
from spadeopt.optimize.strategies import plan_for
from spadeopt.profiling import read_run
from tests.cli.clitools import Result, cli

INSTRUMENTATION_MARKS = ("rt.point", "_tt()", "__submit_", "countdown", "thread_time_ns", "_pc()",
                         "rt.window", "_cd__")


def _build(fusion: str, instrumented: bool) -> dict[str, str]:
    graph, _ = api.load_graph("apps/chain.py", {"n": "3"})
    return render_build(graph, plan_for(graph, fusion, instrumented=instrumented), "APP_REF")


@pytest.mark.parametrize("fusion", ["none", "all", "manual"])
def test_production_builds_carry_no_instrumentation(fusion):
    plain = _build(fusion, False)
    profiled = _build(fusion, True)
    for name, code in plain.items():
        if name.endswith(".py"):
            assert not any(mark in code for mark in INSTRUMENTATION_MARKS), (name, fusion)
    assert any("rt.point" in code for name, code in profiled.items() if name.endswith(".py"))


def test_instrumented_golden():
    files = _build("all", True)
    gold = Path(__file__).parent / "golden" / "chain3_all_instrumented.py"
    if os.environ.get("UPDATE_GOLDEN"):
        gold.parent.mkdir(exist_ok=True)
        gold.write_text(files["pe0.py"])
    assert files["pe0.py"] == gold.read_text()


def _logical(run_dir: Path) -> set[tuple[str, str, str, str]]:
    """The metric set per logical port, wherever in the PE graph it was recorded."""
    out = set()
    for r in read_run(run_dir).records:
        if r.metric == "total":
            continue
        if r.dir == "out" and r.metric == "process_cpu":
            op, port = r.sub.split(".")
            out.add((op, port, "in", "process_cpu"))
        elif r.dir == "in" and r.metric in ("count", "size"):
            continue  # the upstream out point records the same tuples
        else:
            out.add((r.op, r.port, r.dir, r.metric))
    return out


@pytest.mark.spark
def test_same_metric_set_under_none_all_and_manual_and_fig3(tmp_path):
    sets = {}
    for fusion in ("none", "all", "manual"):
        _, run_dir = api.profile("tests/apps/fanout.py", tmp_path / fusion, fusion, {"tuples": "20000"},
                                 production_probe=False,
                                 sample_rate=0.01, reservoir=5000, seed=7)
        sets[fusion] = _logical(run_dir)
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert manifest["seed"] == 7 and manifest["sample_rate"] == 0.01 and manifest["app"] == "fanout"
    assert sets["none"] == sets["all"] == sets["manual"]
    assert ("src", "thread", "thread", "thread_cpu") in sets["none"]
    # Fig. 3: under FALL, src.out has two in-PE subscribers -> three timings per sample
    recs = [r for r in read_run(tmp_path / "all").records if (r.op, r.port, r.dir) == ("src", "out", "out")]
    timings = {(r.metric, r.sub) for r in recs if r.metric.endswith("_cpu")}
    assert timings == {("submit_cpu", None), ("process_cpu", "a.in"), ("process_cpu", "b.in")}
    n_size = sum(1 for r in recs if r.metric == "size")
    assert abs(n_size - 20000 * 0.01) <= 1, "stride sampling takes floor(n*s) +- 1 samples"


def _cli(*args: str) -> Result:
    return cli("profile", "apps/chain.py", *args)


@pytest.mark.parametrize("args,expect", [
    (["--sample-rate", "0"], "(0, 1]"),
    (["--sample-rate", "1.5"], "(0, 1]"),
    (["--reservoir", "0"], ">= 1"),
])
def test_bad_sampling_parameters_exit_2_and_write_nothing(args, expect, tmp_path):
    proc = _cli(*args, "-o", str(tmp_path / "run"))
    assert proc.returncode == 2, proc.stderr
    assert expect in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "run").exists()


def test_run_dir_holding_another_run_or_unwritable_is_refused(tmp_path):
    taken = tmp_path / "taken"
    (taken / "raw").mkdir(parents=True)
    (taken / "manifest.json").write_text("{}")
    before = sorted(p.name for p in taken.rglob("*"))
    proc = _cli("-o", str(taken))
    assert proc.returncode == 2 and "already" in proc.stderr, proc.stderr
    assert sorted(p.name for p in taken.rglob("*")) == before
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    proc = _cli("-o", str(blocker / "run"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.spark
def test_production_probe_runs_by_default_and_can_be_skipped(tmp_path):
    """`profile` runs the production FALL build PROBE_RUNS times after the profiled run
    and keeps the median run (production.json: what FATM fits collapse savings /
    oper_scale on); the flag skips it."""
    proc = _cli("--fusion", "all", "-p", "tuples=3000", "-p", "n=2", "-o", str(tmp_path / "with"))
    assert proc.returncode == 0, proc.stderr
    probe = json.loads((tmp_path / "with" / "production.json").read_text())
    assert probe["tuples"] == 3000 and probe["fusion"] == "all" and probe["collapse"] is True
    assert len(probe["runs"]) == api.PROBE_RUNS == 3
    assert probe["steady_throughput"] == sorted(probe["runs"])[1]  # the median run's figures
    assert proc.stderr.count("production probe") >= 3 or proc.stdout.count("production probe") >= 3
    proc = _cli("--fusion", "all", "-p", "tuples=3000", "-p", "n=2", "--no-production-probe",
                "-o", str(tmp_path / "without"))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "without" / "manifest.json").exists()
    assert not (tmp_path / "without" / "production.json").exists()
