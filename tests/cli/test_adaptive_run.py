"""``spadeopt run APP --adaptive`` (issue 39, record 069), as a user types it: phase 1 runs
the app's FALL plan instrumented with checkpoints, stops at a checkpoint after the
measurement window, refines what it measured, re-plans with FATM and resumes the new
build from the checkpoint. Its sinks must be a plain ``--fusion all`` run's, byte for
byte; ``--json`` records the switch. Real Spark in local mode, real PEs."""

from __future__ import annotations

import json

import pytest

from tests.cli.clitools import cli

APP = "tests/apps/ckpt.py"  # two sources merged by time, keyed windows, a stateful custom operator
SINKS = ("means", "counts", "runs")


def _params(n: int) -> list[str]:
    return ["-p", f"n={n}", "-p", "spin_us=2000", "-p", "width=2"]


@pytest.mark.spark
def test_an_adaptive_run_switches_once_and_its_sinks_are_a_plain_runs(tmp_path):
    params = _params(160_000)  # ~6 s of phase 1 at the instrumented rate: long enough to decide and switch mid-way
    ref = cli("run", APP, "--fusion", "all", *params, "--out", tmp_path / "ref", "--build-dir", tmp_path / "rb")
    assert ref.returncode == 0, ref.stderr
    got = cli("run", APP, "--adaptive", "--adapt-after", "1.5", "--checkpoint-interval", "0.5", *params,
              "--out", tmp_path / "out", "--json", tmp_path / "r.json", "--build-dir", tmp_path / "work")
    assert got.returncode == 0, got.stderr
    for name in SINKS:
        assert (tmp_path / "out" / f"{name}.jsonl").read_bytes() == (tmp_path / "ref" / f"{name}.jsonl").read_bytes(), name
    doc = json.loads((tmp_path / "r.json").read_text())
    sw = doc["adaptive"]
    assert sw["switched"] and sw["checkpoint"] >= 1 and sw["measured_s"] >= 1.5, sw
    before, after = sw["before"], sw["after"]
    assert before["strategy"] == "all" and before["instrumented"] and before["pes"] == 1
    assert before["rate"] > 0 and set(before["busy"]) == {"pe0"} and before["tuples"] > 0
    assert not after["instrumented"] and after["rate"] > 0
    assert sw["predicted"]["start"] and sw["predicted"]["start_plan"] == "FALL"
    assert sw["predicted"]["chosen"] in ("fatm", "fatm-kept", "start")
    assert sw["pause_s"] is not None and sw["pause_s"] > 0 and sw["timings"]["refine_s"] > 0
    # decided while phase 1 ran (its samples so far): refine and plan were not in the pause (record 076)
    assert sw["ahead"] and "while phase 1 ran" in got.stdout, got.stdout[-3000:]
    assert sw["timings"]["warm_up_s"] > 0  # the refinement's first Spark query ran before phase 1
    assert sw["reason"] and sw["profile"]
    # the second plan's PEs ran: the run's result is phase 2's, from the chosen build
    assert doc["pes"] == after["pes"] == len(after["plan"])
    assert {p["pe"] for p in doc["per_pe"]} == set(after["plan"])
    assert doc["checkpoints"]["resumed_from"] == sw["checkpoint"]
    assert "adaptive switch at checkpoint" in got.stdout and "pause" in got.stdout
    shown = doc["live"]["adaptive"]  # what the job's page and `spadeopt top` showed in phase 2
    assert shown["phase"] == 2 and shown["checkpoint"] == sw["checkpoint"] and shown["why"] == sw["reason"]
    assert shown["switch"].startswith(f"switched at checkpoint {sw['checkpoint']} from all")


@pytest.mark.spark
def test_a_run_that_ends_before_the_window_does_not_switch_and_keeps_its_answer(tmp_path):
    params = _params(4_000)
    ref = cli("run", APP, "--fusion", "all", *params, "--out", tmp_path / "ref", "--build-dir", tmp_path / "rb")
    assert ref.returncode == 0, ref.stderr
    got = cli("run", APP, "--adaptive", "--adapt-after", "60", *params, "--out", tmp_path / "out",
              "--json", tmp_path / "r.json", "--build-dir", tmp_path / "work")
    assert got.returncode == 0, got.stderr
    for name in SINKS:
        assert (tmp_path / "out" / f"{name}.jsonl").read_bytes() == (tmp_path / "ref" / f"{name}.jsonl").read_bytes(), name
    sw = json.loads((tmp_path / "r.json").read_text())["adaptive"]
    assert not sw["switched"] and "no switch" in sw["reason"]


@pytest.mark.spark
def test_an_adaptive_run_widens_a_region_led_by_a_splittable_source_with_a_plain_runs_answer(tmp_path):
    """Phase 1 runs region ``reg`` (a splittable source whose splits cost CPU, functors)
    at width 1; FATM widens it, and each new copy skips its splits' records the width-1
    run read (record 068): the sinks are a ``--fusion all`` run's, byte for byte."""
    app = "tests/apps/splits.py"
    params = ["-p", "case=static", "-p", "tuples=100000", "-p", "spin_us=300", "-p", "width=2"]
    ref = cli("run", app, "--fusion", "all", *params, "--out", tmp_path / "ref", "--build-dir", tmp_path / "rb")
    assert ref.returncode == 0, ref.stderr
    got = cli("run", app, "--adaptive", "--adapt-after", "1", "--checkpoint-interval", "0.5", *params,
              "--out", tmp_path / "out", "--json", tmp_path / "r.json", "--build-dir", tmp_path / "work")
    assert got.returncode == 0, got.stderr
    assert (tmp_path / "out" / "sink.jsonl").read_bytes() == (tmp_path / "ref" / "sink.jsonl").read_bytes()
    sw = json.loads((tmp_path / "r.json").read_text())["adaptive"]
    assert sw["switched"] and not sw["refused"], sw
    assert sw["predicted"]["chosen"] == "fatm" and sw["after"]["widths"] == {"reg": 2}, sw


@pytest.mark.spark
def test_an_adaptive_run_starts_from_a_given_build(tmp_path):
    """``spadeopt run BUILD --adaptive``: phase 1 is the build's own plan (NONE here: one PE
    per operator), instrumented; FATM is chosen against that plan's prediction, and the
    answer is a plain run's."""
    app = "tests/apps/splits.py"
    params = ["-p", "case=static", "-p", "tuples=100000", "-p", "spin_us=300", "-p", "width=2"]
    ref = cli("run", app, "--fusion", "all", *params, "--out", tmp_path / "ref", "--build-dir", tmp_path / "rb")
    assert ref.returncode == 0, ref.stderr
    assert cli("build", app, "--fusion", "none", "--width", "reg=1", *params, "-o", tmp_path / "b").returncode == 0
    refused = cli("run", tmp_path / "b", "--adaptive", "--fusion", "all", "--out", tmp_path / "no")
    assert refused.returncode == 2 and "drop --fusion and --width" in refused.stderr
    got = cli("run", tmp_path / "b", "--adaptive", "--adapt-after", "1", "--checkpoint-interval", "0.5",
              "--out", tmp_path / "out", "--json", tmp_path / "r.json", "--build-dir", tmp_path / "work")
    assert got.returncode == 0, got.stderr
    assert (tmp_path / "out" / "sink.jsonl").read_bytes() == (tmp_path / "ref" / "sink.jsonl").read_bytes()
    sw = json.loads((tmp_path / "r.json").read_text())["adaptive"]
    assert sw["before"]["strategy"] == "none" and sw["before"]["pes"] == 4, sw["before"]
    assert sw["predicted"]["start_plan"] == "NONE" and "NONE at" in sw["reason"], sw


@pytest.mark.spark
def test_an_adaptive_run_switches_onto_two_nodes_of_a_local_cluster(tmp_path):
    """Phase 1 (FALL: one PE) on a 2-executor local-cluster; FATM for 2 nodes x 1 core puts
    a channel on each node, and phase 2 resumes across them with a plain run's answer.
    (local-cluster: two executor JVMs on this machine; the build, the state and the sinks
    travel through Spark and the driver's sockets, as on a standalone cluster.)"""
    app = "tests/apps/splits.py"
    params = ["-p", "case=static", "-p", "tuples=100000", "-p", "spin_us=300", "-p", "width=2"]
    ref = cli("run", app, "--fusion", "all", *params, "--out", tmp_path / "ref", "--build-dir", tmp_path / "rb")
    assert ref.returncode == 0, ref.stderr
    got = cli("run", app, "--adaptive", "--adapt-after", "1", "--checkpoint-interval", "0.5", *params,
              "--nodes", "2", "--cores", "1", "--master", "local-cluster[2,1,1024]",
              "--out", tmp_path / "out", "--json", tmp_path / "r.json", "--build-dir", tmp_path / "work")
    assert got.returncode == 0, got.stderr
    assert (tmp_path / "out" / "sink.jsonl").read_bytes() == (tmp_path / "ref" / "sink.jsonl").read_bytes()
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["adaptive"]["switched"] and doc["adaptive"]["after"]["widths"] == {"reg": 2}, doc["adaptive"]
    assert {p["node"] for p in doc["per_pe"]} == {0, 1}, doc["per_pe"]


@pytest.mark.spark
def test_an_adaptive_run_moves_sliding_windows_to_fatms_widths_with_a_plain_runs_answer(tmp_path):
    """Phase 1 runs ``tests/apps/slide.py``'s regions wider than FATM plans them (a
    sliding event-time window with an allowed lateness over out-of-order, partly late
    readings at 3; a sliding count window at 2): the switch moves their groups, opening
    numbers, clocks and late counts to FATM's widths (record 068) where it used to be
    refused, and the sinks are a plain run's, byte for byte."""
    app, params = "tests/apps/slide.py", ["-p", "n=1200000", "-p", "keys=50", "-p", "lateness=0.3"]
    ref = cli("run", app, "--fusion", "all", "--width", "swins=1", *params, "--out", tmp_path / "ref",
              "--build-dir", tmp_path / "rb")
    assert ref.returncode == 0, ref.stderr
    got = cli("run", app, "--adaptive", "--width", "swins=3", "--width", "scnts=2", "--adapt-after", "1",
              "--checkpoint-interval", "0.5", "--cores", "16", *params, "--out", tmp_path / "out",
              "--json", tmp_path / "r.json", "--build-dir", tmp_path / "work")
    assert got.returncode == 0, got.stderr
    for name in ("means", "counts"):
        assert (tmp_path / "out" / f"{name}.jsonl").read_bytes() == (tmp_path / "ref" / f"{name}.jsonl").read_bytes()
    sw = json.loads((tmp_path / "r.json").read_text())["adaptive"]
    assert sw["switched"] and not sw["refused"], sw
    assert sw["after"]["widths"] != {"swins": 3, "scnts": 2}, sw["after"]["widths"]  # a region was rescaled
    assert "its state is rescaled (region" in got.stderr + got.stdout


@pytest.mark.parametrize("args,said", [
    (["--adaptive", "--adapt-after", "-1"], "--adapt-after must be a number of seconds >= 0"),
    (["--adapt-after", "3"], "add --adaptive"),
    (["--adaptive", "--fusion", "auto"], "not auto"),
    (["--adaptive", "--resume", "somewhere"], "cannot --resume"),
    (["--adaptive", "--max-switches", "0"], "--max-switches must be a whole number >= 1"),
    (["--max-switches", "2"], "add --adaptive"),
])
def test_bad_adaptive_options_exit_2_before_anything_is_written(tmp_path, args, said):
    got = cli("run", APP, *args, "--out", tmp_path / "out")
    assert got.returncode == 2, (got.stdout, got.stderr)
    assert said in got.stderr and "Traceback" not in got.stderr
    assert not (tmp_path / "out").exists()


def test_a_live_source_without_live_metrics_is_refused_before_anything_is_written(tmp_path):
    """The switch of a live run waits for its lag to grow, read in the live metrics (record 071)."""
    got = cli("run", "tests/apps/tcp_relay.py", "--adaptive", "--no-metrics", "--out", tmp_path / "out")
    assert got.returncode == 2 and "watches the lag of live source(s)" in got.stderr, got.stderr
    assert "drop --no-metrics" in got.stderr and not (tmp_path / "out").exists()


def test_a_plan_with_a_pe_holding_a_source_and_input_links_is_resumed(tmp_path):
    """Record 037's gap (such a PE reordered a link's frames after an alignment its sources
    thread ended) is fixed: the plan is no longer skipped; a PE cycle still is."""
    import dataclasses

    from spadeopt.adaptive.choose import cannot_resume
    from spadeopt.codegen.render import generate
    from spadeopt.deploy.checkpoint_store import CheckpointStore
    from spadeopt.plan.plan import make_plan
    from tests.apps.ckpt import ckpt

    g = ckpt.build({"n": 1000})
    rest = ["both", "win", "avg", "means", "cnt", "counts", "run", "runs"]
    store = CheckpointStore(tmp_path / "chk")  # empty: nothing else is refused

    def build(groups, name):
        plan = make_plan(g, "all", groups, [0] * len(groups), 1, 2, honours=frozenset())
        return generate(g, dataclasses.replace(plan, checkpoints=True), tmp_path / name, APP)

    assert cannot_resume(build([["ra"], ["rb", *rest]], "mixed"), store) is None
    assert cannot_resume(build([["ra"], ["rb"], rest], "apart"), store) is None


@pytest.mark.parametrize("value", [-1.0, float("nan"), float("inf")])
def test_the_measurement_window_must_be_a_finite_number_of_seconds(value):
    from spadeopt.adaptive import AdaptOptions
    from spadeopt.errors import UsageError

    with pytest.raises(UsageError, match="--adapt-after must be"):
        AdaptOptions(adapt_after=value)
