"""``cluster stop`` signals only the processes ``cluster start`` made (no Spark needed)."""

from __future__ import annotations

import json
import subprocess
import time

from spadeopt.deploy import cluster


def _record(state, procs: list[cluster.Proc]) -> None:
    doc = cluster.Cluster("spark://127.0.0.1:1", str(state), procs, str(state / "spark-secret.conf"))
    (state / cluster.STATE_FILE).write_text(json.dumps(doc.to_json()))
    (state / "spark-secret.conf").write_text("x")


def test_a_reused_pid_is_left_alone(tmp_path):
    """Same pid, same command line, another start time: another process, not ours."""
    other = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        started = cluster.start_time(other.pid)
        _record(tmp_path, [cluster.Proc("master", other.pid, "m.log", ["sleep", "60"], started - 1)])
        assert cluster.stop(tmp_path) == []
        assert other.poll() is None, "stop signalled a process it did not start"
        assert not (tmp_path / cluster.STATE_FILE).exists() and not (tmp_path / "spark-secret.conf").exists()
    finally:
        other.kill()
        other.wait()


def test_its_own_processes_are_stopped_with_their_group(tmp_path):
    ours = subprocess.Popen(["sh", "-c", "sleep 60 & sleep 60"], start_new_session=True)
    time.sleep(0.2)
    _record(tmp_path, [cluster.Proc("worker-0", ours.pid, "w.log", ["sh"], cluster.start_time(ours.pid))])
    assert cluster.stop(tmp_path) == ["worker-0"]
    assert ours.wait(timeout=5) is not None
    assert not (tmp_path / cluster.STATE_FILE).exists()
