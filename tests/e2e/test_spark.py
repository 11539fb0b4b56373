"""End to end on a real local Spark: every fusion gives the same answers; failures are clean."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from spadeopt import api
from spadeopt.deploy.options import RunOptions
from spadeopt.errors import RunError
from spadeopt.optimize.strategies import plan_for
from tests.cli.clitools import cli

ROOT = Path(__file__).resolve().parents[2]

APPS = [
    ("apps/chain.py", {"n": "6", "tuples": "30000", "sink": "file", "work": "3"}),
]
for _name, _params in (("apps/bargain.py", {"groups": "3"}), ("apps/outlier.py", {"antennas": "3"})):
    if (ROOT / _name).exists():
        APPS.append((_name, _params))


def _sink_bytes(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.glob("*.jsonl"))}


def _pe_processes(under: Path) -> int:
    """PE processes still running from builds under ``under``."""
    out = subprocess.run(["pgrep", "-f", f"spadeopt.runtime.pe_main.*{under}"], capture_output=True, text=True)
    return len(out.stdout.split())


@pytest.mark.spark
@pytest.mark.parametrize("app,params", APPS, ids=[a for a, _ in APPS])
def test_every_fusion_gives_identical_sink_output(app, params, tmp_path):
    outputs = {}
    for fusion in ("none", "all", "manual"):
        res = api.run(app, fusion, params, build_dir=tmp_path / f"build-{fusion}", options=RunOptions(out=tmp_path / fusion))
        assert res.tuples > 0 and res.throughput > 0
        outputs[fusion] = _sink_bytes(tmp_path / fusion)
    assert outputs["none"], "the app must write sink files"
    assert any(outputs["none"].values()), "sink output must not be empty"
    assert outputs["none"] == outputs["all"] == outputs["manual"]


@pytest.mark.parametrize("n", [1, 2, 8, 16, 32])
def test_chain_lengths_none_is_one_pe_per_operator_all_is_one(n):
    graph, _ = api.load_graph("apps/chain.py", {"n": str(n)})
    assert len(plan_for(graph, "none").pes) == n + 2
    assert len(plan_for(graph, "all").pes) == 1


@pytest.mark.spark
@pytest.mark.parametrize("n", [1, 32])
def test_chain_runs_on_spark_at_both_ends(n, tmp_path):
    for fusion, pes in (("none", n + 2), ("all", 1)):
        res = api.run("apps/chain.py", fusion, {"n": str(n), "tuples": "5000"}, build_dir=tmp_path / fusion)
        assert res.pes == pes and res.tuples == 5000 and res.sinks == {"sink": 5000}


@pytest.mark.spark
def test_failing_operator_stops_the_job_names_it_and_leaves_no_process(tmp_path):
    with pytest.raises(RunError) as exc:
        api.run("tests/apps/crash.py", "none", {"at": "3000"}, build_dir=tmp_path / "b", options=RunOptions(out=tmp_path / "o"))
    msg = str(exc.value)
    assert "app 'crash'" in msg and "operator 'boom'" in msg and "PE pe2" in msg and "boom.in" in msg
    assert "ValueError: bad tuple 3000" in msg
    time.sleep(0.5)
    assert _pe_processes(tmp_path) == 0
    assert not (tmp_path / "o").exists(), "a failed run leaves --out as it was: no sink file, not even the folder"


@pytest.mark.spark
def test_cli_run_writes_outputs_and_json_and_exits_1_on_failure(tmp_path):
    proc = cli("run", "apps/chain.py", "--fusion", "manual", "-p", "n=3", "-p", "tuples=2000", "-p", "sink=file",
               "--out", tmp_path / "o", "--json", tmp_path / "r.json", "--build-dir", tmp_path / "b")
    assert proc.returncode == 0, proc.stderr
    assert "throughput" in proc.stdout and "tuples/s" in proc.stdout
    assert (tmp_path / "o" / "sink.jsonl").read_text().count("\n") == 2000
    doc = json.loads((tmp_path / "r.json").read_text())
    assert {"throughput", "pes", "nodes", "wall_s"} <= set(doc)
    bad = cli("run", "tests/apps/crash.py", "--fusion", "all", "--build-dir", tmp_path / "c")
    assert bad.returncode == 1
    assert "operator 'boom'" in bad.stderr and "PE pe0" in bad.stderr
    assert _pe_processes(tmp_path) == 0


@pytest.mark.spark
def test_local_cluster_runs_each_pe_on_the_node_its_plan_names(tmp_path):
    """Two executors (nodes); each PE reports, from inside, which executor JVM it runs under."""
    res = api.run("apps/chain.py", "manual", {"n": "4", "tuples": "5000"}, nodes=2, cores=1, build_dir=tmp_path / "b", options=RunOptions(master="local-cluster[2,1,1024]"))
    assert res.nodes_used == 2
    jvm_of_node: dict[int, set] = {}
    for pe in res.per_pe:
        assert pe["where"]["executor_jvm"] is not None, pe
        jvm_of_node.setdefault(pe["node"], set()).add(pe["where"]["executor_jvm"])
    assert all(len(j) == 1 for j in jvm_of_node.values()), jvm_of_node
    assert jvm_of_node[0] != jvm_of_node[1], "the two nodes must be different executors"
