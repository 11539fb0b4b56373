"""A local Spark standalone cluster from the pip PySpark: ``spadeopt cluster start|stop``.

The pip package of PySpark has no ``start-master.sh``/``start-worker.sh``, but it has
``bin/spark-class``, which runs ``org.apache.spark.deploy.master.Master`` and
``org.apache.spark.deploy.worker.Worker``. ``start`` runs one master and N workers of C
cores each, bound to 127.0.0.1 unless ``host`` says otherwise (``SPARK_LOCAL_IP`` too,
so no port listens on another interface), each in its own process group, and records
what it started in ``STATE_DIR/cluster.json`` (pids, their start times, ports, command
lines; logs next to it).

Only its owner can use it. ``start`` makes a random secret, writes it to
``STATE_DIR/spark-secret.conf`` (mode 0600, in a 0700 directory; a Spark properties
file, see ``spadeopt.deploy.sparkauth``) and gives it to the master and workers in
their environment (``_SPARK_AUTH_SECRET``, readable only by this user), never on a
command line; they run with ``spark.authenticate`` and RPC encryption on, so a
driver, worker or executor without the secret is refused. The REST submission server
(which would take jobs over HTTP without any credential) is off, and the web UIs cannot
kill applications.

``stop`` signals exactly those process groups, after checking that each pid still is
the process it started (same start time since boot: a pid reused by another program
is left alone), and removes the state file only when nothing it started is alive.
Nothing else is touched.

Ports: the master's port is free when chosen (or the one asked for); web UIs use
random free ports.
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

from spadeopt.deploy.procs import running, start_time
from spadeopt.deploy.sparkauth import AUTH_CONF, SECRET_FILE, new_secret, write_secret_file
from spadeopt.errors import EnvironmentProblem, UsageError

STATE_FILE = "cluster.json"
START_TIMEOUT_S = 90.0


@dataclass
class Proc:
    role: str  # "master" or "worker-<i>"
    pid: int
    log: str
    cmdline: list[str]
    started: int | None = None  # start time (clock ticks since boot, /proc/PID/stat field 22)


@dataclass
class Cluster:
    master_url: str
    state_dir: str
    procs: list[Proc] = field(default_factory=list)
    secret_file: str | None = None  # the clients' copy of the secret (None: a pre-auth record)

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


# what the master and workers run with (not secret: these may show on a command line)
DAEMON_CONF = {**AUTH_CONF, "spark.master.rest.enabled": "false", "spark.ui.killEnabled": "false"}


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def daemon_env(base: dict[str, str], host: str, secret: str) -> dict[str, str]:
    """The environment of a master or worker: bound to ``host``, authenticated with ``secret``,
    its JVM compiling with C1 only as spadeopt's drivers do (a daemon coordinates)."""
    from spadeopt.deploy.spark_session import JVM_OPTIONS

    opts = " ".join([JVM_OPTIONS, *(f"-D{k}={v}" for k, v in DAEMON_CONF.items())])
    return {**base, "SPARK_LOCAL_IP": host, "SPARK_NO_DAEMONIZE": "1", "_SPARK_AUTH_SECRET": secret,
            "SPARK_DAEMON_JAVA_OPTS": f"{base.get('SPARK_DAEMON_JAVA_OPTS', '')} {opts}".strip()}


def _launch(role: str, args: list[str], state: Path, env: dict[str, str], prefix: Sequence[str] = ()) -> Proc:
    log = state / f"{role}.log"
    cmd = [*prefix, str(spark_class()), *args]
    with open(log, "wb") as f:
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             env=env, start_new_session=True, cwd=state)
    return Proc(role, p.pid, str(log), cmd, start_time(p.pid))


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
    return running(proc.pid)


def start(state_dir: Path, workers: int = 2, cores: int = 1, memory: str = "1g", port: int | None = None,
          worker_prefix: dict[int, Sequence[str]] | None = None,
          worker_env: dict[int, dict[str, str]] | None = None, host: str = "127.0.0.1") -> Cluster:
    """Start a master and ``workers`` workers on ``host``; wait until all registered.

    ``worker_prefix[i]`` is put in front of worker i's command (e.g. ``unshare ...``
    to run it in a private mount namespace, as the tests do); ``worker_env[i]``
    replaces its environment (the binding and the secret are added to it).
    """
    from spadeopt.deploy.spark_session import check_java

    if workers < 1 or cores < 1:
        raise UsageError(f"--workers and --cores must be >= 1 (got {workers}, {cores})")
    try:
        socket.getaddrinfo(host, None)
    except OSError:
        raise UsageError(f"--host {host!r} is not an address or name of this host") from None
    state = Path(state_dir).resolve()
    if (state / STATE_FILE).exists():
        raise UsageError(f"{state / STATE_FILE} exists: a cluster started there may still run; "
                         f"`spadeopt cluster stop --state-dir {state_dir}` first")
    if (state / SECRET_FILE).exists():
        raise UsageError(f"{state / SECRET_FILE} exists without a {STATE_FILE}: a cluster's secret that "
                         f"spadeopt did not record; move it away or use another --state-dir")
    check_java()
    if not state.exists():
        state.mkdir(parents=True, mode=0o700)  # logs name ports and paths; the secret lives here
    secret = new_secret()
    port = port or free_port(host)
    url = f"spark://{host}:{port}"
    cluster = Cluster(url, str(state), secret_file=str(state / SECRET_FILE))
    _save(cluster)  # recorded before anything exists that `stop` must remove
    write_secret_file(state / SECRET_FILE, secret)
    try:
        master = _launch("master", ["org.apache.spark.deploy.master.Master", "--host", host,
                                    "--port", str(port), "--webui-port", "0"], state,
                         daemon_env(dict(os.environ), host, secret))
        cluster.procs.append(master)
        _save(cluster)
        _wait_for(master.log, "I have been elected leader", master)
        for i in range(workers):
            wdir = state / f"worker-{i}"
            wdir.mkdir(exist_ok=True)
            env = daemon_env((worker_env or {}).get(i, dict(os.environ)), host, secret)
            w = _launch(f"worker-{i}", ["org.apache.spark.deploy.worker.Worker", url, "--host", host,
                                        "--cores", str(cores), "--memory", memory, "--webui-port", "0",
                                        "--work-dir", str(wdir)], state, env, (worker_prefix or {}).get(i, ()))
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
        return Cluster(doc["master_url"], doc["state_dir"], [Proc(**p) for p in doc["procs"]],
                       doc.get("secret_file"))
    except FileNotFoundError:
        raise UsageError(f"no cluster recorded in {state_dir} (no {STATE_FILE}); nothing to stop") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}; stop its processes by hand") from None


def _same_process(proc: Proc) -> bool:
    """Is pid still the process we started (not a program that reused the pid)?

    The start time since boot settles it; records without one (written before start
    times were kept) fall back to the command line.
    """
    now = start_time(proc.pid)
    if now is None:
        return False
    if proc.started is not None:
        return now == proc.started
    try:
        with open(f"/proc/{proc.pid}/cmdline", "rb") as f:
            argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return False
    # spark-class execs java, so compare the Spark main class, which both carry
    main = next((a for a in proc.cmdline if a.startswith("org.apache.spark.deploy.")), None)
    return main is not None and main in argv or argv[: len(proc.cmdline)] == proc.cmdline


def status(state_dir: Path) -> tuple[Cluster, dict[str, bool]] | None:
    """The cluster recorded in ``state_dir`` and, per role, whether the process ``start``
    started is still running (pid and start time); None when nothing is recorded there."""
    if not (Path(state_dir) / STATE_FILE).exists():
        return None
    cluster = load(Path(state_dir))
    return cluster, {p.role: _same_process(p) for p in cluster.procs}


def worker_cores(cluster: Cluster) -> int | None:
    """Cores per worker, as ``start`` gave them (from the first worker's command line)."""
    for p in cluster.procs:
        if p.role.startswith("worker") and "--cores" in p.cmdline:
            i = p.cmdline.index("--cores")
            if i + 1 < len(p.cmdline) and p.cmdline[i + 1].isdigit():
                return int(p.cmdline[i + 1])
    return None


def stop(state_dir: Path) -> list[str]:
    """Stop what ``start`` recorded in ``state_dir``; the roles that were stopped.

    The state file (and the secret) go only when none of the recorded processes is
    left alive; otherwise ``EnvironmentProblem`` names the survivors and the record stays.
    """
    state = Path(state_dir).resolve()
    if not (state / STATE_FILE).exists():
        raise UsageError(f"no cluster recorded in {state_dir} (no {STATE_FILE}); nothing to stop")
    cluster = load(state)
    stopped, alive = [], []
    for proc in reversed(cluster.procs):  # workers first (they would try to reconnect)
        if not _same_process(proc):
            continue
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if not _same_process(proc):
                break
            try:
                os.killpg(proc.pid, sig)  # the group: spark-class, its java, and executors it forked
            except ProcessLookupError:
                break
            deadline = time.time() + 10
            while time.time() < deadline and _alive(proc):
                time.sleep(0.1)
            if not _alive(proc):
                break
        (alive if _alive(proc) and _same_process(proc) else stopped).append(proc.role)
    if alive:
        raise EnvironmentProblem(f"{', '.join(alive)} of the cluster in {state} did not stop; its record "
                                 f"{state / STATE_FILE} is kept: run `spadeopt cluster stop` again")
    (state / STATE_FILE).unlink(missing_ok=True)
    if cluster.secret_file:
        Path(cluster.secret_file).unlink(missing_ok=True)
    return stopped
