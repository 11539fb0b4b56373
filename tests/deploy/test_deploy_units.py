"""Shipping, commit-on-success sinks, master hints and one-line failure causes (no Spark)."""

from __future__ import annotations

import sys
import zipfile

import pytest

from spadeopt.cli import _conf
from spadeopt.deploy import ship
from spadeopt.deploy.masters import is_local, slots_hint
from spadeopt.deploy.spark_errors import explain
from spadeopt.errors import UsageError
from spadeopt.plan.deployment import DeployedPE, Deployment, SparkSettings
from spadeopt.runtime.sinks import Sink, commit, discard, parts

DEPLOY = Deployment("chain", "apps/chain.py", "ab", "none", 2, 1,
                    tuple(DeployedPE(pe, f"{pe}.py", node, (), {}, {}) for pe, node in
                          (("pe0", 0), ("pe1", 1), ("pe2", 0))), (), SparkSettings("local[2]", {}, ""))


def test_pack_ships_build_and_app_dir_and_unpack_rewrites_the_app_ref(tmp_path):
    build = tmp_path / "build"
    build.mkdir()
    (build / "pe0.py").write_text("X = 1\n")
    (build / "deploy.json").write_text("{}\n")
    (build / "logs").mkdir()
    (build / "logs" / "pe0.log").write_text("not shipped\n")
    app = tmp_path / "proj" / "apps"
    (app / "__pycache__").mkdir(parents=True)
    (app / "__init__.py").write_text("")  # a package: shipped whole, its siblings importable
    (app / "mine.py").write_text("app = None\n")
    (app / "helper.py").write_text("H = 2\n")
    (app / "__pycache__" / "mine.cpython-311.pyc").write_bytes(b"x")
    (app / "data.csv").write_text("not code\n")
    b = ship.pack(build, f"{app / 'mine.py'}:app", tmp_path)
    assert b.app_ref == "app/apps/mine.py:app"
    names = set(zipfile.ZipFile(b.path).namelist())
    assert names == {"build/pe0.py", "build/deploy.json", "app/apps/__init__.py", "app/apps/mine.py",
                     "app/apps/helper.py"}
    u = ship.unpack(str(b.path), str(tmp_path / "x"), b.app_ref)
    assert u.app_ref == f"{tmp_path / 'x' / 'app' / 'apps' / 'mine.py'}:app"
    assert (tmp_path / "x" / "build" / "pe0.py").read_text() == "X = 1\n"
    assert u.pythonpath == str(tmp_path / "x" / "app")


def test_pack_of_a_module_reference_ships_its_package(tmp_path, monkeypatch):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("app = None\n")
    (tmp_path / "build").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    b = ship.pack(tmp_path / "build", "mypkg.a:app", tmp_path)
    assert b.app_ref == "mypkg.a:app"
    assert set(zipfile.ZipFile(b.path).namelist()) == {"app/mypkg/__init__.py", "app/mypkg/a.py"}
    with pytest.raises(UsageError, match="cannot find the source of app module 'nosuchpkg_xyz.a'"):
        ship.pack(tmp_path / "build", "nosuchpkg_xyz.a:app", tmp_path)


def test_sinks_are_parts_until_committed_and_discard_removes_them(tmp_path):
    s = Sink("out", "file", ["a"], ["int"], str(tmp_path))
    s.write([(1,), (2,)])
    s.close()
    assert [p.name for p in tmp_path.iterdir()] == [".out.jsonl.part"]
    assert list(parts(tmp_path)) == ["out"]
    discard(tmp_path)
    assert list(tmp_path.iterdir()) == []
    s = Sink("out", "file", ["a"], ["int"], str(tmp_path))
    s.write([(3,)])
    s.close()
    assert commit(tmp_path) == [tmp_path / "out.jsonl"]
    assert (tmp_path / "out.jsonl").read_text() == '{"a": 3}\n'


def test_write_outputs_refuses_paths_outside_the_run_dir(tmp_path):
    ship.write_outputs({"sinks": {"s": "x\n"}, "profile": {"raw/pe0.jsonl": "{}\n", "../evil": "no"}},
                       tmp_path / "o", tmp_path / "run")
    assert (tmp_path / "o" / ".s.jsonl.part").read_text() == "x\n"
    assert (tmp_path / "run" / "raw" / "pe0.jsonl").read_text() == "{}\n"
    assert not (tmp_path / "evil").exists()


@pytest.mark.parametrize("master,local", [("local", True), ("local[2]", True), ("local-cluster[2,1,1024]", True),
                                          ("spark://h:7077", False), ("yarn", False), ("k8s://https://x", False)])
def test_is_local(master, local):
    assert is_local(master) is local


def test_slots_hints_fit_the_master():
    assert "local[4]" in slots_hint("local[2]", 2, 2)
    assert "local-cluster[2,2,1024]" in slots_hint("local-cluster[1,1,1024]", 2, 2)
    assert "spadeopt cluster start --workers 2 --cores 2" in slots_hint("spark://h:7077", 2, 2)
    assert "spark.executor.instances=2" in slots_hint("yarn", 2, 2)


PY4J = "An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.\n"


def test_lost_executor_names_executor_node_pes_and_reason():
    text = (PY4J + ": org.apache.spark.SparkException: Job aborted due to stage failure: ResultStage 0 (collect at "
            "x.py:1) has failed the maximum allowable number of times: 1. Most recent failure reason: Stage failed "
            "because barrier task ResultTask(0, 1) finished unsuccessfully.\nExecutorLostFailure (executor 3 exited "
            "caused by one of the running tasks) Reason: Command exited with code 137\n\tat org.apache...")
    msg = explain(text, DEPLOY, "spark://h:7077")
    assert msg == ("app 'chain' failed: Spark lost executor 3 running node 1 (PEs pe1): Command exited with code "
                   "137. The job was stopped on every node; check that host's worker log (was it killed, out of "
                   "memory, or its host gone?)")


def test_missing_spadeopt_dynamic_allocation_and_slots_are_named():
    text = (PY4J + "Lost task 0.0 in stage 0.0 (TID 0) (10.0.0.5 executor 1): org.apache.spark.api.python."
            "PythonException: Traceback:\nModuleNotFoundError: No module named 'spadeopt.deploy'\n")
    msg = explain(text, DEPLOY, "spark://h:7077", "/opt/py/bin/python")
    assert "spadeopt is not installed for the Python (/opt/py/bin/python) of the executor on executor 1 " \
           "on host 10.0.0.5" in msg
    assert f"export PYSPARK_PYTHON={sys.executable}" in msg and "pip install spadeopt" not in msg
    dyn = explain(PY4J + "SparkException: [SPARK-24942]: Barrier execution mode does not support dynamic resource "
                  "allocation for now.", DEPLOY, "spark://h:7077")
    assert "dynamic allocation" in dyn and "SPARK-24942" in dyn
    slots = explain(PY4J + "BarrierJobSlotsNumberCheckFailed", DEPLOY, "spark://h:7077")
    assert "too few task slots for 2 node(s) of 1 core(s)" in slots and "cluster start" in slots
    other = explain(PY4J + "Traceback (most recent call last):\nValueError: bad\n\tat x", DEPLOY, "local[2]")
    assert other == "app 'chain' failed on Spark: ValueError: bad"


def test_conf_pairs():
    assert _conf(["spark.a=1", "spark.b=x=y"]) == {"spark.a": "1", "spark.b": "x=y"}
    with pytest.raises(UsageError, match="--conf expects KEY=VALUE"):
        _conf(["spark.a"])


def test_cluster_stop_kills_only_what_it_recorded(tmp_path):
    """A recorded pid now running another program (pid reuse) is left alone; the state goes."""
    import json
    import subprocess

    from spadeopt.deploy import cluster

    other = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        state = {"master_url": "spark://127.0.0.1:1", "state_dir": str(tmp_path),
                 "procs": [{"role": "master", "pid": other.pid, "log": str(tmp_path / "m.log"),
                            "cmdline": ["spark-class", "org.apache.spark.deploy.master.Master"]}]}
        (tmp_path / "cluster.json").write_text(json.dumps(state))
        assert cluster.stop(tmp_path) == []
        assert other.poll() is None, "a process spadeopt did not start was killed"
        assert not (tmp_path / "cluster.json").exists()
        with pytest.raises(UsageError, match="no cluster recorded"):
            cluster.stop(tmp_path)
    finally:
        other.kill()
        other.wait()
