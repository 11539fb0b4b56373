"""On a real Spark standalone cluster where nothing but the network is shared.

One cluster for the whole module (``spadeopt cluster``'s library: a master and two
1-core workers on 127.0.0.1). Worker 1 runs in a private mount namespace
(``unshare --mount``): tmpfs over the repository (only the virtualenv and the spadeopt
package are bound back, as "spadeopt installed on the worker") and over /tmp (where
every build, output and profile of these tests lives). So that worker cannot read the
driver's build, app module, or output directories: the job has to ship them and bring
outputs back. Tests skip only if Java/Spark cannot start or the sandbox cannot unshare.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from spadeopt import api
from spadeopt.deploy import cluster, sparkauth
from spadeopt.deploy.options import RunOptions

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
CHAIN = ["-p", "n=4", "-p", "tuples=20000", "-p", "sink=file", "-p", "work=2"]


def _isolation_script(hide_package: bool = False) -> str:
    """Shell that hides the repository (except venv + spadeopt) and /tmp, then execs "$@"."""
    keep = [p for p in (Path(sys.prefix).resolve(), ROOT / "spadeopt") if ROOT in p.parents]
    if hide_package:
        keep = [p for p in keep if p != ROOT / "spadeopt"]
    lines = ["set -e", "mount -t tmpfs spo-keep /mnt"]
    for i, k in enumerate(keep):
        lines += [f"mkdir /mnt/k{i}", f"mount --bind {shlex.quote(str(k))} /mnt/k{i}"]
    # /tmp first: a checkout under /tmp (as CI's may be) vanishes with it, and the kept
    # folders are bound back afterwards either way
    lines += ["mount -t tmpfs spo-tmp /tmp",
              f"if [ -d {shlex.quote(str(ROOT))} ]; then mount -t tmpfs spo-hide {shlex.quote(str(ROOT))}; fi"]
    for i, k in enumerate(keep):
        lines += [f"mkdir -p {shlex.quote(str(k))}", f"mount --bind /mnt/k{i} {shlex.quote(str(k))}"]
    lines += ["cd /", 'exec "$@"']
    return "\n".join(lines)


def _can_unshare() -> bool:
    if not shutil.which("unshare") or not Path("/mnt").is_dir():
        return False
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", _isolation_script(),
                            "sh", "sh", "-c", f"test ! -e {shlex.quote(str(ROOT / 'apps'))} && "
                            f"{shlex.quote(PY)} -c 'import spadeopt.deploy.agent'"],
                           capture_output=True, text=True)
    return probe.returncode == 0


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory):
    if not _can_unshare():
        pytest.skip("cannot run a worker in a private mount namespace here (unshare --mount as root)")
    state = tmp_path_factory.mktemp("cluster")
    prefix = ["unshare", "--mount", "--propagation", "private", "sh", "-c", _isolation_script(), "sh"]
    try:
        c = cluster.start(state, workers=2, cores=1, memory="1g", worker_prefix={1: prefix})
    except Exception as exc:  # noqa: BLE001 - any failure to start Java/Spark
        pytest.skip(f"a Spark standalone cluster does not start here: {exc}")
    _SECRET[sparkauth.SECRET_ENV] = c.secret_file
    try:
        yield c
    finally:
        _SECRET.clear()
        cluster.stop(state)


_SECRET: dict[str, str] = {}  # the module cluster's secret file, for _env


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYSPARK_PYTHON": PY, **_SECRET, **extra}
    env["PATH"] = f"{Path(PY).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _why(proc) -> str:
    """A failed command's stderr without Java stack frames."""
    return "\n".join(ln for ln in proc.stderr.splitlines() if not ln.lstrip().startswith("at "))[-4000:]


def _sinks(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def _worker_sees(c: cluster.Cluster, path: Path) -> bool:
    """Can the isolated worker (its mount namespace) see ``path``?"""
    pid = c.procs[2].pid
    return subprocess.run(["nsenter", "-t", str(pid), "-m", "test", "-e", str(path)]).returncode == 0


def _descendants(pids: list[int]) -> dict[int, str]:
    """pid -> cmdline of every process below ``pids``."""
    parent, cmd = {}, {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parent[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
                cmd[int(d.name)] = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except (OSError, ValueError, IndexError):
                continue
    out, todo = {}, list(pids)
    while todo:
        p = todo.pop()
        for child, par in parent.items():
            if par == p and child not in out:
                out[child] = cmd.get(child, "")
                todo.append(child)
    return out


def _pes_of(c: cluster.Cluster) -> list[int]:
    return [p for p, cmd in _descendants([w.pid for w in c.procs[1:]]).items() if "spadeopt.runtime.pe_main" in cmd]


def test_chain_runs_on_two_isolated_hosts_with_outputs_back_on_the_driver(spark_cluster, tmp_path):
    ref = api.run("apps/chain.py", "none", dict(p.split("=") for p in CHAIN[1::2]),
                  build_dir=tmp_path / "b-local", options=RunOptions(out=tmp_path / "local", master="local[2]"))
    assert ref.tuples == 20000
    build, out = tmp_path / "b", tmp_path / "out"
    cmd = [PY, "-m", "spadeopt", "run", "apps/chain.py", "--fusion", "none", *CHAIN, "--nodes", "2", "--cores", "1",
           "--master", spark_cluster.master_url, "--build-dir", str(build), "--out", str(out),
           "--json", str(tmp_path / "r.json")]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=_env(), timeout=300)
    assert proc.returncode == 0, _why(proc)
    assert not _worker_sees(spark_cluster, build) and not _worker_sees(spark_cluster, ROOT / "apps")
    res = json.loads((tmp_path / "r.json").read_text())
    executors = {p["executor"] for p in res["per_pe"]}
    assert len(executors) == 2 and "driver" not in executors, res["per_pe"]
    assert res["nodes_used"] == 2
    assert _sinks(out) == _sinks(tmp_path / "local") and (out / "sink.jsonl").stat().st_size > 0
    # live metrics crossed from the workers' PEs to the driver: every PE's final counts came
    live = res["live"]
    assert live["status"] == "done" and {s["sink"]: s["tuples"] for s in live["sinks"]} == res["sinks"]
    assert all(p["done"] and p["cpu_seconds"] > 0 for p in live["pes"]), live["pes"]
    assert {p["node"] for p in live["pes"]} == {0, 1} and all(n["host"] for n in live["nodes"]), live["nodes"]


def test_ctrl_c_ends_a_live_run_on_two_isolated_hosts_like_its_sources_end(spark_cluster, tmp_path):
    """The PEs on the cluster cannot see the driver's stop file: the stop request reaches
    the agents through the driver's rendezvous, the one with the live source ends it, the
    run drains and commits its sinks (exit 0), as a local run does."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    build, out = tmp_path / "b", tmp_path / "out"
    proc = subprocess.Popen([PY, "-m", "spadeopt", "run", "tests/apps/tcp_relay.py", "-p", f"port={port}",
                             "--fusion", "none", "--nodes", "2", "--cores", "1", "--master", spark_cluster.master_url,
                             "--build-dir", str(build), "--out", str(out), "--json", str(tmp_path / "r.json")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=_env())
    try:
        deadline, conn = time.time() + 180, None
        while conn is None:  # the source's PE listens once the job runs on the cluster
            try:
                conn = socket.create_connection(("127.0.0.1", port), timeout=5)
            except OSError:
                assert proc.poll() is None and time.time() < deadline, "the live source never listened"
                time.sleep(0.5)
        with conn:
            conn.sendall(b"".join(b'{"seq": %d, "word": "w%d"}\n' % (i, i) for i in range(500)))
            time.sleep(4)  # read and through the pipeline well before the stop
            proc.send_signal(signal.SIGINT)
            stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, stderr[-4000:]
    assert "stop requested" in stderr and "Traceback" not in stderr
    rows = [json.loads(line) for line in (out / "out.jsonl").read_text().splitlines()]
    assert rows == [{"seq": i, "word": f"w{i}", "twice": 2 * i} for i in range(500)]
    assert json.loads((tmp_path / "r.json").read_text())["stopped_by"] == "request"


def test_profile_optimize_and_the_deploy_json_spark_submit_line(spark_cluster, tmp_path):
    """Profile bargain on the cluster (samples come back), refine there, optimize for 2 nodes,
    then run the build through deploy.json's spark-submit line with only the master changed.
    (No production probe: its three FALL runs test nothing of the cluster; tests/refine has it.)"""
    params = ["-p", "groups=3", "-p", "nodes=2"]
    run_dir = tmp_path / "run"
    prof = subprocess.run([PY, "-m", "spadeopt", "profile", "apps/bargain.py", "--fusion", "manual", *params,
                           "--nodes", "2", "--cores", "1", "--sample-rate", "0.05", "--master",
                           spark_cluster.master_url, "--no-production-probe", "-o", str(run_dir)],
                          capture_output=True, text=True, cwd=ROOT, env=_env(), timeout=300)
    assert prof.returncode == 0, _why(prof)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["pe_files"] and all((run_dir / f).stat().st_size > 0 for f in manifest["pe_files"])
    steps = [["refine", str(run_dir), "-o", str(tmp_path / "profile.json"), "--master", spark_cluster.master_url,
              # both "hosts" are 127.0.0.1 here, and Spark reads a same-host executor's shuffle
              # files straight from its disk, which worker 1's private /tmp hides
              "--conf", "spark.task.cpus=1", "--conf", "spark.shuffle.readHostLocalDisk=false"],
             ["optimize", "apps/bargain.py", "--profile", str(tmp_path / "profile.json"), "--nodes", "2",
              "--cores", "1", "-o", str(tmp_path / "fatm")]]
    for step in steps:
        p = subprocess.run([PY, "-m", "spadeopt", *step], capture_output=True, text=True, cwd=ROOT, env=_env(),
                           timeout=300)
        assert p.returncode == 0, _why(p)
    deploy = json.loads((tmp_path / "fatm" / "deploy.json").read_text())
    assert {p["node"] for p in deploy["pes"]} == {0, 1}, "the optimized build must use both nodes"
    api.run(str(tmp_path / "fatm"), options=RunOptions(master="local[2]", out=tmp_path / "local"))
    line = deploy["spark"]["submit"].replace(f"'{deploy['spark']['master']}'", spark_cluster.master_url)
    assert spark_cluster.master_url in line and "spark.dynamicAllocation.enabled=false" in line
    out = tmp_path / "out"
    sub = subprocess.run(["bash", "-c", f"{line} --out {shlex.quote(str(out))}"], capture_output=True, text=True,
                         cwd=tempfile.gettempdir(), env=_env(), timeout=300)
    assert sub.returncode == 0, _why(sub)
    assert f"master         {spark_cluster.master_url}" in sub.stdout
    assert "nodes used     2 of 2" in sub.stdout
    assert _sinks(out) == _sinks(tmp_path / "local") and any(_sinks(out).values())


def test_dynamic_allocation_on_is_named(spark_cluster, tmp_path):
    proc = subprocess.run([PY, "-m", "spadeopt", "run", "apps/chain.py", "-p", "n=1", "-p", "tuples=100",
                           "--nodes", "1", "--cores", "1", "--master", spark_cluster.master_url,
                           "--conf", "spark.dynamicAllocation.enabled=true", "--build-dir", str(tmp_path / "b")],
                          capture_output=True, text=True, cwd=ROOT, env=_env(), timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "dynamic allocation" in proc.stderr and "SPARK-24942" in proc.stderr
    assert "collectAndServe" not in proc.stderr


def test_executor_without_spadeopt_is_named(spark_cluster, tmp_path):
    """The executors' Python runs where the spadeopt package is hidden (an empty tmpfs)."""
    wrap_dir = Path(tempfile.mkdtemp(prefix="spo-py-", dir="/var/tmp"))  # /tmp is private on worker 1
    try:
        wrapper = wrap_dir / "python"
        hide = f"mount -t tmpfs spo-nopkg {shlex.quote(str(ROOT / 'spadeopt'))}; exec {shlex.quote(PY)} \"$@\""
        wrapper.write_text(f"#!/bin/sh\nexec unshare --mount --propagation private sh -c {shlex.quote(hide)} sh "
                           f"\"$@\"\n")
        wrapper.chmod(0o755)
        proc = subprocess.run([PY, "-m", "spadeopt", "run", "apps/chain.py", "-p", "n=1", "-p", "tuples=100",
                               "--nodes", "1", "--cores", "1", "--master", spark_cluster.master_url,
                               "--build-dir", str(tmp_path / "b")],
                              capture_output=True, text=True, cwd=ROOT, env=_env(PYSPARK_PYTHON=str(wrapper)),
                              timeout=300)
    finally:
        shutil.rmtree(wrap_dir, ignore_errors=True)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "spadeopt is not installed for the Python" in proc.stderr and str(wrapper) in proc.stderr
    assert "collectAndServe" not in proc.stderr


def _running(pid: int) -> bool:
    """The process exists and is not a zombie waiting to be reaped."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_kill_9_of_an_executor_fails_fast_names_it_and_leaves_nothing(spark_cluster, tmp_path):
    out = tmp_path / "out"
    cmd = [PY, "-m", "spadeopt", "run", "apps/chain.py", "--fusion", "none", "-p", "n=4", "-p", "tuples=5000000",
           "-p", "sink=file", "--nodes", "2", "--cores", "1", "--master", spark_cluster.master_url,
           "--build-dir", str(tmp_path / "b"), "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=_env())
    try:
        deadline = time.time() + 120
        while len(_pes_of(spark_cluster)) < 6 and time.time() < deadline and proc.poll() is None:
            time.sleep(0.5)
        pes = _pes_of(spark_cluster)
        assert len(pes) == 6, f"the PEs did not start: {proc.poll()}"
        time.sleep(1.0)
        worker0 = spark_cluster.procs[1].pid
        executor = next(p for p, c in _descendants([worker0]).items() if "CoarseGrainedExecutorBackend" in c)
        os.kill(executor, signal.SIGKILL)
        killed = time.time()
        _, err = proc.communicate(timeout=60)
        took = time.time() - killed
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err[-3000:]
    print(f"kill -9 of executor {executor} -> exit {proc.returncode} after {took:.1f} s")
    assert took < 10, f"took {took:.1f} s to report the lost executor"
    assert "lost executor" in err and "running node" in err and "PEs pe" in err, err[-2000:]
    assert "collectAndServe" not in err
    # the PEs die with their Python worker, which notices its JVM is gone: on a loaded
    # machine that chain can take more than a second, so wait for it (bounded)
    deadline = time.time() + 20
    while (alive := [p for p in pes if _running(p)]) and time.time() < deadline:
        time.sleep(0.25)
    assert not alive, f"PE processes were left running: {alive}"
    assert not (out.exists() and any(out.iterdir())), "a failed run left sink files (complete-looking or parts)"


PROBES = Path(__file__).resolve().parent / "probes"


def _secret_of(c: cluster.Cluster) -> str:
    return sparkauth.read_secret_file(Path(c.secret_file))


def test_the_cluster_secret_is_private_and_on_no_command_line(spark_cluster):
    path = Path(spark_cluster.secret_file)
    assert path.stat().st_mode & 0o777 == 0o600 and path.stat().st_uid == os.geteuid()
    assert Path(spark_cluster.state_dir).stat().st_mode & 0o077 == 0
    secret = _secret_of(spark_cluster).encode()
    seen = [d.name for d in Path("/proc").iterdir() if d.name.isdigit() and _cmdline_has(d, secret)]
    assert not seen, f"the cluster's secret is on the command line of pids {seen}"
    assert secret not in Path(spark_cluster.state_dir, cluster.STATE_FILE).read_bytes()


def _cmdline_has(proc_dir: Path, secret: bytes) -> bool:
    try:
        return secret in (proc_dir / "cmdline").read_bytes()
    except OSError:
        return False


def test_a_job_without_the_secret_is_refused_and_runs_nothing(spark_cluster, tmp_path, request):
    """A plain PySpark application and a spark-submit without the secret register nowhere
    and run nothing; the same application given the secret file runs (so the probe can fail)."""
    env = {k: v for k, v in _env().items() if k != sparkauth.SECRET_ENV}
    submit = Path(PY).with_name("spark-submit")
    shared = Path(tempfile.mkdtemp(prefix="spo-marker-", dir="/var/tmp"))  # /tmp is private on worker 1
    request.addfinalizer(lambda: shutil.rmtree(shared, ignore_errors=True))
    marker = shared / "marker"  # the job writes it if it runs, on whichever worker
    tries = {"pyspark": [PY, str(PROBES / "plain_job.py"), spark_cluster.master_url, str(marker)],
             "spark-submit": [str(submit), "--master", spark_cluster.master_url,
                              str(PROBES / "plain_job.py"), spark_cluster.master_url, str(marker)]}
    logs = {name: tmp_path / f"{name}.log" for name in tries}
    procs = {name: subprocess.Popen(cmd, stdout=logs[name].open("w"), stderr=subprocess.STDOUT, text=True, env=env,
                                    start_new_session=True)
             for name, cmd in tries.items()}  # side by side: each retries registration for a minute
    refused = ("Expected SaslMessage", "Failed to connect to master")
    deadline = time.time() + 60
    while time.time() < deadline and not all(any(r in logs[n].read_text() for r in refused) for n in tries):
        time.sleep(0.5)  # until both were refused at least once (a registered app would run the job)
    time.sleep(3)  # and a little longer: a job that got through anyway would write the marker
    for name, proc in procs.items():
        os.killpg(proc.pid, signal.SIGKILL)  # the launcher, its JVM and its Python
        proc.wait()
        out = logs[name].read_text()
        assert not marker.exists() and "JOB RAN" not in out, f"{name} ran a job without the secret"
        assert any(r in out for r in refused), out[-3000:]
    ok = subprocess.run([str(submit), "--master", spark_cluster.master_url, "--properties-file",
                         spark_cluster.secret_file, str(PROBES / "plain_job.py"), spark_cluster.master_url,
                         str(marker)], capture_output=True, text=True, env=env, timeout=180)
    assert ok.returncode == 0 and "JOB RAN" in ok.stdout and marker.exists(), _why(ok)


def test_the_rest_submission_server_is_off(spark_cluster):
    """Spark's REST server would run a job from one unauthenticated HTTP request."""
    import urllib.error
    import urllib.request

    body = json.dumps({"action": "CreateSubmissionRequest", "appResource": "file:/bin/true",
                       "mainClass": "x", "appArgs": [], "clientSparkVersion": "4.1.4",
                       "environmentVariables": {}, "sparkProperties": {}}).encode()
    req = urllib.request.Request("http://127.0.0.1:6066/v1/submissions/create", body,
                                 {"Content-Type": "application/json"})
    with pytest.raises(urllib.error.URLError) as err:
        urllib.request.urlopen(req, timeout=5)
    assert isinstance(err.value.reason, ConnectionRefusedError), err.value
    assert "REST server" not in Path(spark_cluster.procs[0].log).read_text()


@pytest.mark.spark
def test_kill_9_of_an_executor_with_checkpoints_restarts_and_gives_the_failure_free_sinks(spark_cluster, tmp_path,
                                                                                          monkeypatch):
    """Issue 29 on the cluster: after the first complete checkpoint the executor JVM on
    worker 0 is SIGKILLed; the standalone master starts a new one, ``deploy.checkpointed_run.run``
    restarts the barrier stage from the checkpoint, and the sinks are byte-identical to a
    failure-free run (no record lost, none twice). Recovery time is printed, not asserted."""
    from spadeopt.deploy.checkpointed_run import CheckpointOptions
    from spadeopt.deploy.spark_session import stop_spark
    from tests.checkpoint.test_spark_kill import REF, SINKS, _reference

    nodes = 2 if len(spark_cluster.procs) > 2 else 1
    params = {"n": 30_000, "spin_us": 10_000}  # ~7 s of source CPU in pe0; rb ends half-way
    ref = _reference(tmp_path, {"n": params["n"]})  # no Spark, FALL, no spin: the same records
    monkeypatch.setenv(sparkauth.SECRET_ENV, spark_cluster.secret_file)
    # the executors' Python as conf, not PYSPARK_PYTHON: an earlier local session of this
    # process set that variable itself, and drops it for a cluster master
    conf = {"spark.pyspark.python": PY}
    monkeypatch.setenv("PYSPARK_PYTHON", PY)  # which the session sets from that conf: restored after
    chk, out, build = tmp_path / "chk", tmp_path / "out", tmp_path / "b"
    kill: dict = {}
    stop = threading.Event()

    def killer() -> None:
        while not stop.wait(0.05) and not any(chk.glob("chk-*/MANIFEST.json")):
            pass
        if stop.is_set():
            return
        below = _descendants([spark_cluster.procs[1].pid])
        executor = next(p for p, c in below.items() if "CoarseGrainedExecutorBackend" in c)
        pes = {json.loads(c.split("spadeopt.runtime.pe_main ", 1)[1])["pe"]
               for p, c in _descendants([executor]).items() if "spadeopt.runtime.pe_main" in c}
        os.kill(executor, signal.SIGKILL)
        kill.update(t=time.time(), executor=executor, pes=sorted(pes))

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    try:
        res = api.run(REF, "manual", {k: str(v) for k, v in params.items()}, nodes=nodes, cores=1, build_dir=build,
                      options=RunOptions(master=spark_cluster.master_url, out=out, progress=print, conf=conf,
                                         checkpoints=CheckpointOptions(1.0, chk, restart_attempts=1, backoff=0.5)))
    finally:
        stop.set()
        thread.join(5)
        stop_spark()  # the next test's session starts afresh
    assert kill, "the executor was not killed (no complete checkpoint before the run ended)"
    restarts = res.checkpoints["restarts"]
    assert len(restarts) == 1 and restarts[0]["checkpoint"] is not None, restarts
    for name in SINKS:
        assert (out / f"{name}.jsonl").read_bytes() == (ref / f"{name}.jsonl").read_bytes(), name
    r = restarts[0]
    nodes_of = {p["pe"]: p["node"] for p in json.loads((build / "deploy.json").read_text())["pes"]}
    first = r["first_output_s"]
    print(f"kill -9 of executor {kill['executor']} (node(s) {sorted({nodes_of[p] for p in kill['pes']})}, "
          f"PEs {', '.join(kill['pes'])}) -> restart from checkpoint {r['checkpoint']}: failure seen "
          f"{r['failed_at'] - kill['t']:.1f} s after the kill; running again after {r['recovered_s']:.1f} s; "
          "first new output " + (f"{r['failed_at'] + first - kill['t']:.1f} s after the kill" if first is not None
                                 else "none"))


def test_an_adaptive_run_switches_across_two_isolated_hosts_with_a_plain_runs_answer(spark_cluster, tmp_path):
    """Issue 39 on a standalone cluster: phase 1 (FALL, one PE, instrumented) runs on a
    worker, its samples and checkpoints come back to the driver (the isolated worker
    cannot see the driver's directories), FATM for 2 nodes x 1 core widens the region led
    by the splittable source, and phase 2 resumes the checkpoint with a channel on each
    host. The sink is a plain local run's, byte for byte."""
    app = "apps/opaque_chain.py"  # 16 opaque calls a record, a splittable source: FATM finds the region
    params = ["-p", "tuples=300000", "-p", "work=40", "-p", "sink=file"]
    ref = api.run(app, "all", {p.split("=")[0]: p.split("=")[1] for p in params[1::2]},
                  build_dir=tmp_path / "b-local", options=RunOptions(out=tmp_path / "local", master="local[2]"))
    assert ref.tuples == 300_000
    work, out = tmp_path / "work", tmp_path / "out"
    cmd = [PY, "-m", "spadeopt", "run", app, "--adaptive", "--adapt-after", "1", "--checkpoint-interval", "0.5",
           *params, "--nodes", "2", "--cores", "1", "--master", spark_cluster.master_url, "--build-dir", str(work),
           "--out", str(out), "--json", str(tmp_path / "r.json"),
           # the switch's refinement is a Spark job on the cluster: as for `refine` above, both "hosts" are
           # 127.0.0.1, and Spark would read a same-host executor's shuffle files from worker 1's hidden /tmp
           "--conf", "spark.shuffle.readHostLocalDisk=false"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=_env(), timeout=400)
    assert proc.returncode == 0, _why(proc)
    assert not _worker_sees(spark_cluster, work) and not _worker_sees(spark_cluster, ROOT / "apps")
    doc = json.loads((tmp_path / "r.json").read_text())
    sw = doc["adaptive"]
    assert sw["switched"] and list(sw["after"]["widths"].values()) == [2], sw
    assert not sw["before"]["restarts"], sw["before"]["restarts"]
    assert {p["node"] for p in doc["per_pe"]} == {0, 1}, doc["per_pe"]
    assert len({p["executor"] for p in doc["per_pe"]} - {"driver"}) == 2, doc["per_pe"]
    assert (out / "sink.jsonl").read_bytes() == (tmp_path / "local" / "sink.jsonl").read_bytes()
