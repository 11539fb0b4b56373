"""The Spark driver side: deploy a build as one barrier stage, one task per node.

``run_build`` starts (or reuses) a SparkSession, runs the node agent in a barrier
task per node, and turns the nodes' reports into a ``RunResult``. A PE failure on any
node aborts the stage; the driver extracts the agent's report and raises ``RunError``
naming the app, PE, operator and input port.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from spadeopt.control import (
    ControlError,
    JobSpec,
    NodeFailure,
    NodeReport,
    decode_line,
)
from spadeopt.deploy import live_metrics
from spadeopt.deploy.agent import ERROR_TAG, STOP_FILE, barrier_task, is_live_run
from spadeopt.deploy.masters import is_local
from spadeopt.deploy.options import RunOptions, SettingsChange
from spadeopt.deploy.procs import running
from spadeopt.deploy.spark_session import current_session, keep_shipped, spark_session
from spadeopt.errors import RunError
from spadeopt.plan.artefacts import load_deploy
from spadeopt.plan.deployment import Deployment, Sampling
from spadeopt.runtime import metrics
from spadeopt.runtime.latency import summary


@dataclass
class RunResult:
    app: str
    strategy: str
    master: str
    nodes: int
    pes: int
    throughput: float  # source tuples per second, all sources together
    wall_s: float  # from the common start to the last PE's end
    tuples: int
    per_pe: list[dict[str, Any]] = field(default_factory=list)
    sinks: dict[str, int] = field(default_factory=dict)
    nodes_used: int = 0
    build_dir: str = ""
    steady_throughput: float = 0.0  # aggregate source rate after the warm-up (see steady_rate)
    cpu_per_node: dict[str, float] = field(default_factory=dict)
    checkpoints: dict[str, Any] | None = None  # a checkpointing run's report (deploy.checkpointed_run)
    stopped_by: str | None = None  # "request" (Ctrl-C, SIGTERM) or "duration": the sources were ended
    connectors: dict[str, Any] = field(default_factory=dict)  # live source -> position, lag; sink -> report
    restarts_in_place: dict[str, int] = field(default_factory=dict)  # node -> its agent's in-place restarts
    latency: dict[str, Any] | None = None  # source -> sink latency markers: p50/p90/p99/max ms (runtime.latency)
    operators: dict[str, dict[str, int]] = field(default_factory=dict)  # operator -> counters ("late": dropped)
    warnings: list[str] = field(default_factory=list)  # what the PEs warned of, each once (runtime.metrics)
    live: dict[str, Any] | None = None  # the last live job state (deploy.live_state), when metrics were on

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def run_build(build_dir: Path, options: RunOptions | None = None, *, sampling: Sampling | None = None,
              settings: SettingsChange | None = None, submitted: bool = False,
              restart_in_place: Callable[[RunError], dict[str, Any] | None] | None = None) -> RunResult:
    """Deploy a build on Spark and wait for it to finish.

    ``options`` say where and how (master, conf, ``out``, progress lines about once a
    second) and override the build's run settings for this run only; ``sampling`` is
    where an instrumented build's samples go (``spadeopt profile``); ``settings``
    (``options.SettingsChange``) changes further run settings (batch size, HWM, max
    frame, the checkpoint channel, a source limit) for this run. ``submitted``: this process was started by
    spark-submit, whose master and conf win (deploy.json's master is then unused).

    The build and the app's source are shipped with the job (``spadeopt.deploy.ship``).
    Sinks are written as hidden part files and committed (renamed) only when every
    node succeeded; on a non-local master they come back to the driver in the task
    results and are written under ``out_dir`` here, as are profiling samples.

    ``restart_in_place(error)`` (``deploy.checkpointed_run.run``): a PE failure reported by
    its agent is given to it (as the ``RunError`` the stage's failure would have
    raised); it answers ``{"checkpoint": channel, "delay": s}`` to have every agent
    restart its PEs in this stage, or None to let the stage fail.
    """
    from spadeopt.deploy import ship
    from spadeopt.runtime import sinks

    options = options or RunOptions()
    say = options.say
    build_dir = Path(build_dir).resolve()
    deploy = load_deploy(build_dir)
    deploy = dataclasses.replace(deploy, settings=options.apply(deploy.settings).changed(
        profile=sampling, **(settings.changes() if settings else {})))
    nodes, cores = deploy.nodes, deploy.cores
    master = None if submitted else run_master(deploy, options)
    log_dir = build_dir / "logs"
    out_dir = None if options.out is None else options.out.resolve()
    sc = _session(master, cores, nodes, options, deploy.settings.insecure_links)
    master = sc.master
    local = is_local(master)
    say(f"running {len(deploy.pes)} PE(s) of '{deploy.app}' ({deploy.strategy}); "
        + (f"logs in {log_dir}" if local else "PE logs stay on the workers (their tails come back on failure)"))
    progress_dir = build_dir / "progress"
    shutil.rmtree(progress_dir, ignore_errors=True)
    bundle = _ship(build_dir, deploy, sc, say)
    meeting, job = _meeting_and_job(deploy, bundle, local, master, out_dir, log_dir, progress_dir,
                                    restart_in_place)
    live = live_metrics.start(deploy, local, build_dir, options)  # None: metrics off
    if live is not None:
        job = dataclasses.replace(job, metrics=live.channel())
    task = _task_fn(deploy, job)
    made = _make_out(out_dir)  # made only now: a run that fails to start leaves --out as it was
    t0 = time.time()
    done, box = _start_stage(sc, nodes, task)
    try:
        _wait(done, say, local, progress_dir, t0, deploy, sc, meeting)
        if "error" in box:
            raise _as_run_error(box["error"], deploy, master, log_dir, sc.pythonExec) from None
        reports = sorted((decode_line(r, NodeReport) for r in box["raw"]), key=lambda r: r.node)
        prof = sampling.run_dir if sampling else None
        for rep in reports:
            ship.write_outputs(rep.files or {}, out_dir, Path(prof) if prof else None)
        if out_dir is not None:
            sinks.commit(out_dir)
    except BaseException:
        _abandon(done, sc, local, progress_dir, out_dir, made, live)
        raise
    finally:
        if meeting is not None:
            meeting.close()
    result = _result(deploy, reports, master, time.time() - t0, str(build_dir))
    if live is not None:
        try:
            result.live = live.end("done")
        finally:
            live.close()
    return result


def _abandon(done: threading.Event, sc: Any, local: bool, progress_dir: Path, out_dir: Path | None,
             made: list[Path], live: Any) -> None:
    """A run that failed or was interrupted: its tasks (and so its PEs) ended first, its
    sinks discarded, ``--out`` left as it was, its live metrics saying "failed"."""
    from spadeopt.runtime import sinks

    if not done.is_set():  # interrupted (Ctrl-C, SIGTERM): end the tasks, and so the PEs, first
        sc.cancelAllJobs()
        done.wait(_CANCEL_WAIT_S)
        if local:
            _wait_until_gone(progress_dir, _CANCEL_WAIT_S)
    if out_dir is not None:
        sinks.discard(out_dir)
        for d in made:  # leave --out as it was: what this run made goes (deepest first), if empty
            with contextlib.suppress(OSError):
                d.rmdir()
    if live is not None:
        live.end("failed")
        live.close()


def run_master(deploy: Deployment, options: RunOptions) -> str:
    """The Spark master a run of ``deploy`` starts its session with (not under
    spark-submit): ``--master``, else the build's; with the build's cores it keys the
    session (``deploy.spark_session``), which ``run --adaptive``'s refinement reuses."""
    return options.master or deploy.spark.master


def _session(master: str | None, cores: int, nodes: int, options: RunOptions, insecure: bool) -> Any:
    """The SparkContext of the run's session; on a cluster, its slots checked (a fresh
    session) and the executors' Python said."""
    say = options.say
    say(f"starting Spark ({master or 'from spark-submit'}, {nodes} node(s) x {cores} core(s))")
    if insecure:
        say("WARNING: --insecure-links: links between PEs are NOT authenticated or encrypted; any process "
            "that reaches a PE endpoint can inject tuples. Use it only for measurements.")
    reused = current_session()
    spark = spark_session(master, cores, conf=options.conf)
    sc = spark.sparkContext
    local = is_local(sc.master)
    if not local:
        from spadeopt.deploy.slots import check_cluster_slots

        if spark is not reused:  # a fresh session: before anything is shipped or submitted
            check_cluster_slots(sc, nodes, cores, say)
        say(f"executors run Python '{sc.pythonExec}' (set PYSPARK_PYTHON or --conf spark.pyspark.python to "
            f"an interpreter with spadeopt installed on every worker)")
    return sc


def _ship(build_dir: Path, deploy: Deployment, sc: Any, say: Callable[[str], None]) -> Any:
    """The build and the app's source packed and added to the session (kept while it lives)."""
    from spadeopt.deploy import ship

    ship_dir = Path(tempfile.mkdtemp(prefix="spadeopt-ship-"))
    keep_shipped(ship_dir)  # kept while this session lives (spark_session._SHIPPED)
    bundle = ship.pack(build_dir, deploy.app_ref, ship_dir, say=say)
    sc.addFile(str(bundle.path))
    return bundle


def _make_out(out_dir: Path | None) -> list[Path]:
    """Make ``out_dir`` (parts a killed earlier run left there discarded); the directories
    this made, which a failed run removes."""
    from spadeopt.runtime import sinks

    if out_dir is None:
        return []
    made = [d for d in (out_dir, *out_dir.parents) if not d.exists()]
    out_dir.mkdir(parents=True, exist_ok=True)
    sinks.discard(out_dir)  # parts a killed earlier run left behind
    return made


def _start_stage(sc: Any, nodes: int, task: Callable) -> tuple[threading.Event, dict[str, Any]]:
    """Run the barrier stage (one task per node) on a thread: its ``done`` event and the
    box its node reports (``raw``) or its error (``error``) land in."""
    box: dict[str, Any] = {}
    done = threading.Event()  # not worker.is_alive(): a Ctrl-C inside join() makes CPython 3.11
    # report a running thread as finished, and the PEs would then outlive the driver

    def collect() -> None:
        try:
            box["raw"] = sc.parallelize(range(nodes), nodes).barrier().mapPartitions(task).collect()
        except Exception as exc:  # noqa: BLE001
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=collect, daemon=True).start()
    return done, box


def _meeting_and_job(deploy: Deployment, bundle: Any, local: bool, master: str, out_dir: Path | None, log_dir: Path,
                     progress_dir: Path, restart_in_place: Callable[[RunError], dict[str, Any] | None] | None
                     ) -> tuple[Any, JobSpec]:
    """The driver's rendezvous (None: one local node that meets nobody) and the job spec
    each node agent gets. Several nodes meet on the driver; on a non-local master it is
    also how a stop request reaches the agents (one node there too), and in a run that may
    restart in place how a failure reaches the driver and the restart every agent."""
    from spadeopt.deploy import rendezvous

    nodes = deploy.nodes
    on_failure = None
    if restart_in_place is not None:
        def on_failure(node: int, report: str) -> dict[str, Any] | None:
            err = _as_run_error(RuntimeError(f"{ERROR_TAG}{report}{ERROR_TAG}"), deploy, master, log_dir)
            return restart_in_place(err)
    meeting = rendezvous.Rendezvous(nodes, local, on_failure) \
        if nodes > 1 or not local or restart_in_place is not None else None
    job = JobSpec(bundle=bundle.path.name, app_ref=bundle.app_ref, return_outputs=not local,
                  out_dir=str(out_dir) if out_dir else None, log_dir=str(log_dir),
                  progress_dir=str(progress_dir) if local else None,
                  rendezvous=meeting.address() if meeting else None, in_place=restart_in_place is not None)
    return meeting, job


def _wait(done: threading.Event, say: Callable[[str], None], local: bool, progress_dir: Path, t0: float,
          deploy: Deployment, sc: Any, meeting: Any) -> None:
    """Wait until the stage is done, saying progress about once a second. A silent agent
    cancels the run (``RunError``); Ctrl-C asks a live run to stop (its sources end, the
    rest drains), and a second one (or one on a bounded run) is raised."""
    stopping = False
    with _interrupts_only():
        while True:
            try:
                if done.wait(1.0):
                    break
                say(_progress_line(progress_dir, t0, deploy, stopping) if local
                    else f"\r{time.time() - t0:6.1f} s  running")
                silent = _silent_agent(progress_dir, deploy) if local else None
                if silent is not None:
                    sc.cancelAllJobs()
                    done.wait(10.0)
                    raise RunError(f"app '{deploy.app}' failed: the node agent of node {silent} stopped "
                                   f"reporting for more than {_stall_timeout(deploy):g} s (--stall-timeout); "
                                   f"the job was cancelled")
            except KeyboardInterrupt:
                # a live app's normal end: its sources stop, the rest drains; else (or a
                # second time) the run is cancelled below and its sinks discarded. On a
                # non-local master the agents are asked through the rendezvous (they see
                # their own PEs' progress files; the driver sees none)
                if stopping:
                    raise
                if local:
                    if not is_live_run(progress_dir):
                        raise
                    request_stop(progress_dir)
                elif meeting is None or not meeting.request_stop():
                    raise
                stopping = True
                say("stop requested: the sources end, in-flight tuples drain, windows close as at the end "
                    "of their input, sinks flush (Ctrl-C again to cancel and discard the sinks)")


def request_stop(progress_dir: Path) -> None:
    """Ask the PEs of the local run whose progress directory is ``progress_dir`` (a
    build's ``progress/``) to end their sources now, as ``--duration`` does when it is
    up: each PE's stop watcher sees the file within ``runtime.pe.STOP_POLL`` seconds.
    The run then drains and ends as its sources' end would (sinks committed)."""
    progress_dir = Path(progress_dir)
    progress_dir.mkdir(parents=True, exist_ok=True)
    (progress_dir / STOP_FILE).write_text(f"{time.time()}\n")


@contextlib.contextmanager
def _interrupts_only():
    """While a run is waited for, SIGINT only raises ``KeyboardInterrupt`` here (PySpark's
    own handler would cancel every job first, so a live run could not drain); the
    handler before is restored after. Off the main thread nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.getsignal(signal.SIGINT)

    def interrupt(_signum, _frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def _wait_until_gone(progress_dir: Path, timeout: float) -> None:
    """Wait (up to ``timeout``) until every PE of this run has exited; then kill any left.

    Local masters only: the PEs run on this host. A run's PEs are the processes of this
    user running ``spadeopt.runtime.pe_main`` whose command line names this run's
    progress directory (each PE's config carries its progress file), found in /proc, so
    a PE that had not yet written its progress file is waited for too. A cancelled
    task's PEs die with its Python worker, asynchronously; one that outlives the wait
    (its parent died before it could ask to die with it) is killed here."""
    deadline = time.time() + timeout
    while (pids := _run_pes(progress_dir)) and time.time() < deadline:
        time.sleep(0.1)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _run_pes(progress_dir: Path) -> list[int]:
    """Live PE processes (not zombies) of this user whose command line names ``progress_dir``."""
    marker, me, found = json.dumps(str(progress_dir))[1:-1].encode(), os.getuid(), []  # as in the PE's config
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if d.stat().st_uid != me:
                continue
            argv = (d / "cmdline").read_bytes()
        except OSError:
            continue
        if b"spadeopt.runtime.pe_main" in argv and marker in argv and running(int(d.name)):
            found.append(int(d.name))
    return found


_CANCEL_WAIT_S = 30.0
"""How long an interrupted run waits for Spark to end its tasks. A cancelled task's
Python worker exits, and its PEs with it (they die with their parent: PR_SET_PDEATHSIG),
so a driver that returns after this leaves no PE behind; without the wait, Spark's stop
and the PEs' deaths raced the driver's exit on a loaded machine."""


def _progress_line(progress_dir: Path, t0: float, deploy: Deployment, stopping: bool = False) -> str:
    """One status line from the PEs' progress files (written every second): PEs up, each
    live source's tuples read and lag (entries behind its feed's end), each sink's count."""
    tuples, pes = 0, 0
    sinks: dict[str, int] = {}
    lags: dict[str, int | None] = {}
    for f in progress_dir.glob("*.json"):
        try:
            doc = json.loads(f.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        pes += 1
        tuples += sum(doc["sources"].values())
        for name, n in doc["sinks"].items():
            sinks[name] = sinks.get(name, 0) + n
        lags.update(doc.get("lag") or {})
    elapsed = time.time() - t0
    line = f"\r{elapsed:6.1f} s  {pes}/{len(deploy.pes)} PEs up  {tuples:,} source tuples"
    if lags:
        line += "  lag " + ", ".join(f"{n} {'?' if v is None else f'{v:,}'}" for n, v in sorted(lags.items()))
    if sinks:
        line += "  sinks " + ", ".join(f"{n} {v:,}" for n, v in sorted(sinks.items()))
    if stopping:
        line += "  (stopping: draining)"
    elif (duration := deploy.settings.duration):
        line += f"  ({min(100, 100 * elapsed / duration):.0f}% of {duration:g} s)"
    return line


def _stall_timeout(deploy: Deployment) -> float:
    from spadeopt.deploy.agent import DEFAULT_STALL_TIMEOUT_S

    return deploy.settings.stall_timeout or DEFAULT_STALL_TIMEOUT_S


def _silent_agent(progress_dir: Path, deploy: Deployment) -> int | None:
    """A node whose agent's heartbeat file (when this driver can see it) is older than
    the stall timeout: the agent is stopped or hung."""
    now, limit = time.time(), _stall_timeout(deploy)
    for f in progress_dir.glob("agent-*.beat"):
        try:
            if now - f.stat().st_mtime > limit:
                return int(f.stem.split("-", 1)[1])
        except (OSError, ValueError):
            continue
    return None


def _task_fn(deploy, job):
    def task(iterator):
        return barrier_task(deploy, job, iterator)

    return task


def _as_run_error(exc: Exception, deploy: Deployment, master: str, log_dir: Path | None = None,
                  python: str | None = None) -> Exception:
    text = str(exc)
    m = re.search(re.escape(ERROR_TAG) + r"(.*?)" + re.escape(ERROR_TAG), text, re.S)
    if not m:
        from spadeopt.deploy.spark_errors import explain

        line = explain(text, deploy, master, python)
        if log_dir is not None:
            try:
                log_dir.mkdir(parents=True, exist_ok=True)
                (log_dir / "spark-error.log").write_text(text)
                line += f" (Spark's full error: {log_dir / 'spark-error.log'})"
            except OSError:
                pass
        return RunError(line)
    try:
        rep = decode_line(m.group(1), NodeFailure)
    except ControlError:
        return RunError(f"app '{deploy.app}' failed: {m.group(1)[:2000]}")
    if rep.kind in ("link", "stall", "restart"):  # the message names PE, port and link itself
        err = RunError(f"app '{deploy.app}' failed on node {rep.node}: {rep.message}"
                       + (f"\nPE log (last lines):\n{rep.log}" if rep.kind == "stall" and rep.log else ""))
        err.report = rep  # type: ignore[attr-defined]
        return err
    where = f"operator '{rep.op}'" if rep.op else "the PE"
    port = f", input port '{rep.op}.{rep.port}'" if rep.port else ""
    lines = [f"app '{deploy.app}' failed: {where} in PE {rep.pe} (node {rep.node}{port}) raised {rep.message}"]
    if rep.traceback:  # the user's frames only; spadeopt's are in the PE log
        lines.append(rep.traceback.rstrip())
    if rep.op and log_dir is not None and is_local(master):
        lines.append(f"(full traceback in {log_dir / (str(rep.pe) + '.log')})")
    elif not rep.op and rep.log:  # the PE failed outside any operator
        lines.append("PE log (last lines):\n" + rep.log)
    err = RunError("\n".join(lines))
    err.report = rep  # type: ignore[attr-defined]
    return err


def _result(deploy: Deployment, reports: list[NodeReport], master: str, wall: float, build_dir: str) -> RunResult:
    per_pe, sinks = [], {}
    firsts, ends, tuples = [], [], 0
    node_of = deploy.node_of()
    for rep in reports:
        for st in rep.pes:
            per_pe.append({"pe": st["pe"], "node": node_of[st["pe"]], "cpu_s": st["cpu_s"], "wall_s": st["wall_s"],
                           "host": st.get("where", {}).get("host", rep.host),
                           "executor": rep.executor or "?", "executor_pid": rep.executor_pid,
                           "sources": st["sources"],
                           "where": st.get("where", {}), "refused": st.get("refused", {})})
            for name, count in st["sinks"].items():  # a counting sink's channel copies add up
                sinks[name] = sinks.get(name, 0) + count
            ends.append(st["t_end"])
            for count, first, _last, _timeline in st["sources"].values():
                tuples += count
                if first is not None:
                    firsts.append(first)
    # End to end: from the first source tuple to the moment the last PE finished.
    span = (max(ends) - min(firsts)) if firsts else 0.0
    thr = tuples / span if span > 0 else 0.0
    used = len({(p["host"], p["executor"]) for p in per_pe})  # measured: where PEs ran, not the plan
    timelines = [tl for st in (s for r in reports for s in r.pes) for _, _, _, tl in st["sources"].values() if tl]
    cpu_node: dict[str, float] = {}
    for p in per_pe:
        cpu_node[str(p["node"])] = cpu_node.get(str(p["node"]), 0.0) + p["cpu_s"]
    for p in per_pe:
        p["sources"] = {k: v[:3] for k, v in p["sources"].items()}
    stopped = sorted({st.get("stopped_by") for r in reports for st in r.pes} - {None})
    connectors = {name: rep for r in reports for st in r.pes for name, rep in st.get("connectors", {}).items()}
    latency = summary(ms for r in reports for st in r.pes for ms in st.get("latency_ms") or ())
    operators, warnings = metrics.merge(st.get("metrics") for r in reports for st in r.pes)
    return RunResult(deploy.app, deploy.strategy, master, deploy.nodes, len(deploy.pes), thr,
                     wall, tuples, sorted(per_pe, key=lambda p: p["pe"]), dict(sorted(sinks.items())), used,
                     build_dir, steady_rate(timelines) or thr, cpu_node,
                     stopped_by="request" if "request" in stopped else (stopped[0] if stopped else None),
                     connectors=dict(sorted(connectors.items())), latency=latency, operators=operators,
                     warnings=warnings,
                     restarts_in_place={str(r.node): len(r.restarts_in_place) for r in reports})


def steady_rate(timelines: list[list[tuple[float, int]]], warmup: float = 0.2) -> float:
    """Aggregate source rate in the steady state, tuples/s.

    The window starts after ``warmup`` of the sources' common span and ends when the
    first source ends (so every source is still running); each source's count is
    interpolated from its timeline at both ends. 0 when the run is too short to tell.
    """
    import numpy as np

    if not timelines:
        return 0.0
    start = min(tl[0][0] for tl in timelines)
    end = min(tl[-1][0] for tl in timelines)
    t0 = start + warmup * (end - start)
    if end - t0 < 0.2:
        return 0.0
    total = 0.0
    for tl in timelines:
        ts = np.array([t for t, _ in tl])
        cs = np.array([c for _, c in tl], dtype=float)
        total += float(np.interp(end, ts, cs) - np.interp(t0, ts, cs))
    return total / (end - t0)
