"""A local Spark standalone cluster from the pip PySpark: ``spadeopt cluster start|stop``.

The pip package of PySpark has no ``start-master.sh``/``start-worker.sh``, but it has
``bin/spark-class``, which runs ``org.apache.spark.deploy.master.Master`` and
``org.apache.spark.deploy.worker.Worker``. ``start`` runs one master and N workers of C
cores each, all bound to 127.0.0.1 (``SPARK_LOCAL_IP`` too, so no port listens on
another interface), each in its own process group, and records what it started in
``STATE_DIR/cluster.json`` (pids, ports, command lines; logs next to it). ``stop``
kills exactly those process groups, after checking that each pid still runs the
command it recorded (a pid reused by another program is left alone), and removes
the state file. Nothing else is touched.

Ports: the master's port is free when chosen (or the one asked for); web UIs use
random free ports; the REST submission server is off.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from spadeopt.errors import EnvironmentProblem, UsageError

STATE_FILE = "cluster.json"
START_TIMEOUT_S = 90.0


@dataclass
class Proc:
    role: str  # "master" or "worker-<i>"
    pid: int
    log: str
    cmdline: list[str]


@dataclass
class Cluster:
    master_url: str
    state_dir: str
    procs: list[Proc] = field(default_factory=list)

    def to_json(self) -> dict:
        return asdict(self)


def spark_class() -> Path:
    """``bin/spark-class`` of the installed PySpark."""
    import pyspark

    path = Path(pyspark.__file__).resolve().parent / "bin" / "spark-class"
    if not path.is_file():
        raise EnvironmentProblem(f"{path} not found: this PySpark installation has no spark-class; "
                                 f"reinstall pyspark with pip")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env.setdefault("SPARK_NO_DAEMONIZE", "1")
    return env


def _launch(role: str, args: list[str], state: Path, prefix: Sequence[str] = (),
            env: dict[str, str] | None = None) -> Proc:
    log = state / f"{role}.log"
    cmd = [*prefix, str(spark_class()), *args]
    with open(log, "wb") as f:
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             env=env or _env(), start_new_session=True, cwd=state)
    return Proc(role, p.pid, str(log), cmd)


def _wait_for(log: str, text: str, proc: Proc, timeout: float = START_TIMEOUT_S) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if text in Path(log).read_text(errors="replace"):
                return
        except OSError:
            pass
        if not _alive(proc):
            break
        time.sleep(0.3)
    tail = "\n".join(Path(log).read_text(errors="replace").splitlines()[-15:]) if Path(log).exists() else ""
    raise EnvironmentProblem(f"Spark {proc.role} did not start (no '{text}' in {log} within {timeout:.0f} s):\n{tail}")


def _alive(proc: Proc) -> bool:
    try:
        os.kill(proc.pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie of ours counts as dead
        with open(f"/proc/{proc.pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def start(state_dir: Path, workers: int = 2, cores: int = 1, memory: str = "1g", port: int | None = None,
          worker_prefix: dict[int, Sequence[str]] | None = None,
          worker_env: dict[int, dict[str, str]] | None = None) -> Cluster:
    """Start a master and ``workers`` workers on 127.0.0.1; wait until all registered.

    ``worker_prefix[i]`` is put in front of worker i's command (e.g. ``unshare ...``
    to run it in a private mount namespace, as the tests do); ``worker_env[i]``
    replaces its environment.
    """
    from spadeopt.deploy.launcher import check_java

    if workers < 1 or cores < 1:
        raise UsageError(f"--workers and --cores must be >= 1 (got {workers}, {cores})")
    state = Path(state_dir).resolve()
    if (state / STATE_FILE).exists():
        raise UsageError(f"{state / STATE_FILE} exists: a cluster started there may still run; "
                         f"`spadeopt cluster stop --state-dir {state_dir}` first")
    check_java()
    state.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    url = f"spark://127.0.0.1:{port}"
    cluster = Cluster(url, str(state))
    try:
        master = _launch("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                    "--port", str(port), "--webui-port", "0"], state)
        cluster.procs.append(master)
        _save(cluster)
        _wait_for(master.log, "I have been elected leader", master)
        for i in range(workers):
            wdir = state / f"worker-{i}"
            wdir.mkdir(exist_ok=True)
            env = (worker_env or {}).get(i)
            if env is not None:
                env = {**env, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1"}
            w = _launch(f"worker-{i}", ["org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                                        "--cores", str(cores), "--memory", memory, "--webui-port", "0",
                                        "--work-dir", str(wdir)], state, (worker_prefix or {}).get(i, ()), env)
            cluster.procs.append(w)
            _save(cluster)
        for w in cluster.procs[1:]:
            _wait_for(w.log, "Successfully registered with master", w)
    except BaseException:
        stop(state)
        raise
    return cluster


def _save(cluster: Cluster) -> None:
    from spadeopt.atomic import write_atomic

    write_atomic(Path(cluster.state_dir) / STATE_FILE, json.dumps(cluster.to_json(), indent=2) + "\n")


def load(state_dir: Path) -> Cluster:
    path = Path(state_dir) / STATE_FILE
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"no cluster recorded in {state_dir} (no {STATE_FILE}); nothing to stop") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    return Cluster(doc["master_url"], doc["state_dir"], [Proc(**p) for p in doc["procs"]])


def _same_program(proc: Proc) -> bool:
    """Does pid still run what we started (and not a program that reused the pid)?"""
    try:
        with open(f"/proc/{proc.pid}/cmdline", "rb") as f:
            argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return False
    # spark-class execs java, so compare the Spark main class, which both carry
    main = next((a for a in proc.cmdline if a.startswith("org.apache.spark.deploy.")), None)
    return main is not None and main in argv or argv[: len(proc.cmdline)] == proc.cmdline


def stop(state_dir: Path) -> list[str]:
    """Stop what ``start`` recorded in ``state_dir``; the roles that were stopped."""
    state = Path(state_dir).resolve()
    if not (state / STATE_FILE).exists():
        raise UsageError(f"no cluster recorded in {state_dir} (no {STATE_FILE}); nothing to stop")
    cluster = load(state)
    stopped = []
    for proc in reversed(cluster.procs):  # workers first (they would try to reconnect)
        if not _same_program(proc):
            continue
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)  # the group: spark-class, its java, and executors it forked
            except ProcessLookupError:
                break
            deadline = time.time() + 10
            while time.time() < deadline and _alive(proc):
                time.sleep(0.1)
            if not _alive(proc):
                break
        stopped.append(proc.role)
    (state / STATE_FILE).unlink(missing_ok=True)
    return stopped
