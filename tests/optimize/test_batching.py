"""A plan's batch (optimize.batching): chosen from the profile, written into the build, predicted, overridable."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from spadeopt import api
from spadeopt.codegen.render import generate
from spadeopt.deploy.options import RunOptions
from spadeopt.errors import ArtefactError, UsageError
from spadeopt.optimize.batching import MAX_PLAN_BATCH, plan_batch
from spadeopt.optimize.fatm import OperatorProfile, fuse_auto
from spadeopt.optimize.fatm_physical import predict_physical
from spadeopt.optimize.predict import DEFAULT_MODEL
from spadeopt.optimize.problem import LinearCommModel
from spadeopt.plan.deployment import Deployment
from spadeopt.plan.plan import Plan
from spadeopt.wire import DEFAULT_BATCH


def _chain(work_us: float, rate: float = 100_000.0, size: float = 100.0):
    graph, _ = api.load_graph("apps/chain.py", {"n": "6"})
    load = {op.name: work_us * 1e-6 * rate for op in graph.operators}
    links = tuple((s.src.op, s.dst.op, rate, size) for s in graph.streams)
    return graph, OperatorProfile(graph.name, graph.fingerprint, load, links, rate)


def _build(tmp_path, work_us: float):
    graph, prof = _chain(work_us)
    auto = fuse_auto(graph, prof, LinearCommModel(2e-6), 1, 2, rate="max")
    generate(graph, auto.plan, tmp_path / "b", "apps/chain.py")
    return auto, json.loads((tmp_path / "b" / "deploy.json").read_text()), json.loads(
        (tmp_path / "b" / "plan.json").read_text())


def test_fatm_runs_a_cheap_app_with_a_big_batch_written_into_its_build(tmp_path):
    auto, deploy, plan = _build(tmp_path, work_us=0.1)  # 8 operators x 0.1 us: 2,048 tuples cost 1.6 ms
    assert auto.plan.batch == MAX_PLAN_BATCH == plan["batch"] == deploy["batch_size"]
    assert Deployment.from_json(deploy).settings.batch_size == MAX_PLAN_BATCH  # what the agents hand the PEs
    assert Plan.from_json(plan) == auto.plan
    assert auto.explain["batch"]["tuples"] == MAX_PLAN_BATCH
    assert auto.explain["prediction"]["model"]["run_batch"] == MAX_PLAN_BATCH


def test_a_slow_app_keeps_the_default_batch(tmp_path):
    auto, deploy, plan = _build(tmp_path, work_us=20.0)  # 160 us a source tuple: 512 cost 82 ms already
    assert auto.plan.batch == DEFAULT_BATCH == plan["batch"]
    assert "batch_size" not in deploy  # the default is not written (deploy.json's settings rule)


def test_the_batch_stops_where_a_batch_would_fill_a_frame():
    graph, prof = _chain(0.01, size=3000.0)  # cheap, but 3 KB tuples: 349 of them fill 1 MiB
    assert plan_batch(prof) == DEFAULT_BATCH
    graph, prof = _chain(0.01, size=700.0)
    assert plan_batch(prof) == 1024  # 1,024 x 700 B fit in 1 MiB, 2,048 do not
    graph, prof = _chain(0.01, size=500.0)
    assert plan_batch(prof) == 2048  # 2,048 x 500 B fit


def test_a_bigger_batch_predicts_cheaper_links_and_never_dearer():
    graph, prof = _chain(0.5)
    none = api.make_plan(graph, "none", 1, 2)  # every stream crosses a PE link
    fall = api.make_plan(graph, "all", 1, 2)  # none does
    comm = LinearCommModel(2e-6)
    def rate(plan, batch):
        return predict_physical(graph, prof, Plan(**{**plan.__dict__, "batch": batch}), comm, DEFAULT_MODEL,
                                0.0).rate
    assert rate(none, 2048) > rate(none, 512) == rate(none, None)  # frames of 2,048 save their share
    assert rate(fall, 2048) == rate(fall, 512)  # nothing crosses: nothing to save


def test_plan_json_refuses_a_batch_that_is_not_a_count():
    graph, prof = _chain(20.0)
    doc = api.make_plan(graph, "all", 1, 2).to_json()
    for bad in (0, -4, "512", 2.5, True):
        with pytest.raises(ArtefactError, match="batch"):
            Plan.from_json({**doc, "batch": bad})


def test_run_batch_size_overrides_the_build_and_refuses_nonsense():
    assert RunOptions(batch_size=64).apply(Deployment.from_json(_minimal()).settings).batch_size == 64
    for bad in (0, -1, 2.0, True, 1 << 21):
        with pytest.raises(UsageError, match="--batch-size"):
            RunOptions(batch_size=bad)
    got = subprocess.run([sys.executable, "-m", "spadeopt", "run", "apps/chain.py", "--batch-size", "0"],
                         capture_output=True, text=True, timeout=120)
    assert got.returncode != 0 and "--batch-size must be" in got.stderr


def _minimal() -> dict:
    return {"schema_version": 1, "app": "a", "app_ref": "apps/a.py", "params": {}, "fingerprint": "ab",
            "strategy": "all", "nodes": 1, "cores": 2, "batch_size": 4096,
            "pes": [{"pe": "pe0", "module": "pe0.py", "node": 0, "operators": ["s"], "inputs": {}, "outputs": {}}],
            "links": [], "streams": [], "spark": {"master": "local[2]", "conf": {}, "submit": "x"}}
