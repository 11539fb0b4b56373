"""The node agent: spawns one node's PEs, wires them to the other nodes, waits for them.

Runs inside a Spark barrier task (one per node), or directly for a single node. The
PE endpoints of all nodes are exchanged on the driver's rendezvous
(``deploy.rendezvous``). If any PE fails, every PE of the node is killed and the task
fails with a message the driver turns into a clear error; Spark then kills the other
nodes' tasks, whose PEs exit when their agent's pipe closes. In a checkpointed run
that may restart in place, the agent reports the failure to the driver instead, and
every agent starts its PEs again from the last complete checkpoint when the driver
says so (``run_node``'s ``in_place``), without a new Spark stage.

Links are authenticated (``spadeopt.runtime.security``): each PE reports the public
keys it made with its endpoints; the agents exchange them with the endpoints and hand
each PE the server keys of its downstream ports and the client keys its input ports
admit. No secret key passes through the agent. While the PEs run, a node whose PEs
make no progress for ``stall_timeout`` seconds fails, naming the PEs still waiting
and on which ports (a stopped PE sends no heartbeat at all).
"""

from __future__ import annotations

import dataclasses
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from spadeopt import control as ctrl
from spadeopt.deploy.rendezvous import Restart
from spadeopt.deploy.spawn import Zygote, forking, start_pe
from spadeopt.plan.deployment import DeployedLink, Deployment

ERROR_TAG = "SPADEOPT-PE-FAILURE"
STARTUP_TIMEOUT_S = 120.0
DEFAULT_STALL_TIMEOUT_S = 300.0
STOP_FILE = "stop"  # in a local run's progress directory: its PEs' sources end (launcher.request_stop)
CONTROL_POLL_S = 0.05  # how often a running agent that may restart in place looks for the driver's restart


class PEFailed(RuntimeError):
    """Raised in the agent; its message carries the report (``control.NodeFailure``, one
    JSON line) between two ERROR_TAGs, which the driver reads back (``report``)."""

    def __init__(self, message: str, report: ctrl.NodeFailure) -> None:
        super().__init__(message)
        self.report = report


def _tagged(report: ctrl.NodeFailure) -> str:
    return f"{ERROR_TAG}{report.to_line()}{ERROR_TAG}"


def pe_env(pythonpath: str | None) -> dict[str, str]:
    """The environment of a node's PEs (and of the zygote that forks them)."""
    env = dict(os.environ)
    env.setdefault("PYTHONHASHSEED", "0")
    if pythonpath:  # the shipped app's source, appended to sys.path (runtime.loader)
        env["SPADEOPT_APP_PATH"] = pythonpath
    return env


class _Proc:
    def __init__(self, pe: str, cfg: ctrl.PEConfig, log: Path, events: queue.Queue, zygote: Zygote | None) -> None:
        self.pe = pe
        self.log = log
        self.popen = start_pe(cfg, pe_env(cfg.pythonpath), log, zygote)
        threading.Thread(target=self._read, args=(events,), daemon=True).start()

    def _read(self, events: queue.Queue) -> None:
        """The PE's events (``control.PE_EVENTS``) onto ``events``; a line that is not one
        is refused (logged, dropped); ``control.Exited`` when the process ended."""
        for line in self.popen.stdout:
            try:
                events.put((self.pe, ctrl.decode_line(line, *ctrl.PE_EVENTS)))
            except ctrl.ControlError as exc:
                print(f"spadeopt: agent: refused a line from PE {self.pe}: {exc}", file=sys.stderr, flush=True)
        self.popen.wait()
        events.put((self.pe, ctrl.Exited(self.popen.returncode)))

    def send(self, cmd: ctrl.Record) -> None:
        self.popen.stdin.write(cmd.to_line() + "\n")
        self.popen.stdin.flush()

    def kill(self) -> None:
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.popen.wait()

    def log_tail(self, n: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


def run_node(node: int, deploy: Deployment, build_dir: str, out_dir: str | None,
             log_dir: str, gather=None, barrier=None, host: str | None = None,
             progress_dir: str | None = None, pythonpath: str | None = None,
             control=None, in_place: bool = False, live: dict[str, str] | None = None) -> dict[str, Any]:
    """Run this node's PEs to completion; return their stats.

    ``gather(str) -> list[str]`` exchanges endpoint tables between nodes (allGather);
    ``barrier()`` synchronises the start. Both default to single-node no-ops.
    ``control`` (a ``rendezvous.Meeting``) carries the driver's stop requests while the
    PEs run: with one, a node whose PEs read a live, unbounded source ends them as a
    local run's stop file does (``progress_dir`` is then this node's own).

    ``in_place`` (a checkpointed run, with ``control``): a PE that fails once every PE
    of the node has started is reported to the driver instead of failing the task; the
    driver restarts every agent's PEs from the last complete checkpoint (a new
    coordinator channel) or refuses, and then the task fails as without. A restart that
    fails before the PEs run again fails the task too (the driver restarts the stage).

    ``live``: the driver's live-metrics channel (``control.LIVE``), given to every PE.
    """
    gather = gather or (lambda msg: [msg])
    barrier = barrier or (lambda: None)
    pes = deploy.pes_on(node)
    ipc_root = tempfile.mkdtemp(prefix="spo-")
    zygote: Zygote | None = None
    Path(log_dir).mkdir(parents=True, exist_ok=True)
    if progress_dir:
        Path(progress_dir).mkdir(parents=True, exist_ok=True)
    if out_dir:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
    in_place = in_place and control is not None and deploy.settings.checkpoint is not None
    channel = deploy.settings.checkpoint.to_json() if deploy.settings.checkpoint else None
    procs: dict[str, _Proc] = {}
    restarts: list[dict[str, Any]] = []
    gen = 0
    try:
        if len(pes) > 1 and forking():  # one PE: an exec costs what the forker's start does
            zygote = Zygote(pe_env(pythonpath), Path(log_dir, f"forker-{node}.log"))
        while True:
            ipc_dir = str(Path(ipc_root, f"g{gen}"))
            Path(ipc_dir).mkdir(mode=0o700)  # private, as mkdtemp made the root
            started: list[bool] = []  # set once every PE of this generation took "start"
            try:
                result = _generation(node, deploy, build_dir, out_dir, log_dir, gather, barrier, host,
                                     progress_dir, pythonpath, control, ipc_dir, zygote, channel, procs, started,
                                     in_place, live)
                result["restarts_in_place"] = restarts
                return result
            except Restart as asked:  # another node's PE failed: stop ours, start again
                _stop_all(procs)
                restart, cause = asked, None
            except PEFailed as exc:
                _stop_all(procs)
                if not (in_place and started):
                    raise
                restart = control.report_failure(exc.report.to_line())
                if restart is None:
                    raise
                cause = exc.report
            except (OSError, TimeoutError, ValueError) as exc:  # the forker, a meeting, the driver's message
                if gen == 0 or started:
                    raise
                _stop_all(procs)  # a restart in place that failed: the driver restarts the stage
                report = ctrl.NodeFailure(None, node, None, None, kind="restart", message=(
                    f"the restart in place (generation {gen}) failed: {type(exc).__name__}: {exc}"))
                raise PEFailed(_tagged(report), report) from None
            t = time.time()
            control.restarted(restart)
            restarts.append({"gen": restart.gen, "at": t, "cause": None if cause is None else cause.pe})
            if restart.delay:
                time.sleep(restart.delay)
            channel, gen = restart.checkpoint, restart.gen  # the PEs' file sinks start their part files afresh
    finally:
        _stop_all(procs)
        if zygote is not None:
            zygote.close()
        shutil.rmtree(ipc_root, ignore_errors=True)


def _generation(node: int, deploy: Deployment, build_dir: str, out_dir: str | None, log_dir: str, gather, barrier,
                host: str | None, progress_dir: str | None, pythonpath: str | None, control, ipc_dir: str,
                zygote: Zygote | None, channel: dict | None, procs: dict[str, _Proc], started: list[bool],
                in_place: bool, live: dict[str, str] | None = None) -> dict[str, Any]:
    """One start of this node's PEs (the first, or a restart in place): spawn, wire,
    start, wait until done, meet the other nodes at the end. ``procs`` is filled with
    the PEs as they start (the caller stops them); ``started`` gets an entry once every
    PE was told to start."""
    pes = deploy.pes_on(node)
    links = deploy.links
    my_pes = {p.pe for p in pes}
    needs_tcp = any(ln.transport == "tcp" and ln.dst_pe in my_pes for ln in links)
    run = deploy.settings
    host = host or "127.0.0.1"
    events: queue.Queue = queue.Queue()  # this generation's: a stopped PE's exit is not news
    procs.clear()
    for pe in pes:
        cfg = _pe_config(pe.pe, deploy, build_dir, out_dir, ipc_dir, host if needs_tcp else None, progress_dir,
                         pythonpath)
        procs[pe.pe] = _Proc(pe.pe, cfg, Path(log_dir, f"{pe.pe}.log"), events, zygote)
    bound = _collect(events, procs, ctrl.Bound, node)
    endpoints: dict[str, dict[str, dict[str, str]]] = {}
    keys: dict[str, dict[str, Any]] = {}  # public keys only
    for msg in gather(json.dumps({pe: {"endpoints": ev.endpoints, "keys": ev.keys or {}}
                                  for pe, ev in bound.items()})):
        for pe_id, got in json.loads(msg).items():
            endpoints[pe_id], keys[pe_id] = got["endpoints"], got["keys"]
    for pe in pes:
        procs[pe.pe].send(ctrl.Connect(**_wiring(pe.pe, links, endpoints, keys),  # tokens: on stdin
                                          checkpoint=channel, metrics=live))
    _collect(events, procs, ctrl.Ready, node)
    barrier()
    t0 = time.time()
    for p in procs.values():
        p.send(ctrl.Start())
    started.append(True)
    stall = run.stall_timeout or DEFAULT_STALL_TIMEOUT_S
    beat_file = Path(progress_dir, f"agent-{node}.beat") if progress_dir else None
    on_tick = None
    if control is not None and (progress_dir or in_place):
        def on_tick() -> None:
            if control.stop_requested() and progress_dir:  # raises Restart when the driver restarts in place
                live = is_live_run(Path(progress_dir))
                if live:
                    Path(progress_dir, STOP_FILE).write_text(f"{time.time()}\n")
                control.answer_stop(live)
    done = _collect(events, procs, ctrl.Done, node, timeout=None, stall=stall, beat_file=beat_file,
                    on_tick=on_tick, tick=CONTROL_POLL_S if in_place else 1.0)
    if beat_file is not None:  # waiting for the other nodes below is not a silent agent
        beat_file.unlink(missing_ok=True)
    barrier()  # every node's PEs are done, so every tuple has been received
    for p in procs.values():
        p.send(ctrl.Exit())
    for p in procs.values():
        try:
            p.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
    return {"node": node, "host": socket.gethostname(), "executor_pid": os.getpid(),
            "started": t0, "pes": [done[p].stats for p in sorted(done)]}


def _pe_config(pe: str, deploy: Deployment, build_dir: str, out_dir: str | None, ipc_dir: str, host: str | None,
               progress_dir: str | None, pythonpath: str | None) -> ctrl.PEConfig:
    """PE ``pe``'s config (its command line): its module, where it writes, its run settings,
    its output links and the schemas of its input ports."""
    run, links = deploy.settings, deploy.links
    mod = next(p.module for p in deploy.pes if p.pe == pe)
    return ctrl.PEConfig(
        pe=pe, module=str(Path(build_dir, mod).resolve()), app_ref=deploy.app_ref, out_dir=out_dir,
        ipc_dir=ipc_dir, host=host, batch_size=run.batch_size, hwm=run.hwm,
        profile=run.profile.to_json() if run.profile else None, duration=run.duration,
        progress_file=str(Path(progress_dir, f"{pe}.json")) if progress_dir else None,
        insecure_links=run.insecure_links, max_frame=run.max_frame, max_batch_delay=run.max_batch_delay,
        source_limit=run.source_limit, stop_file=str(Path(progress_dir, STOP_FILE)) if progress_dir else None,
        out_links=[ln.id for ln in links if ln.src_pe == pe],
        schemas={ln.dst: None if ln.schema is None else [list(a) for a in ln.schema]
                 for ln in links if ln.dst_pe == pe},
        pythonpath=pythonpath, cyclic_inputs=deploy.cyclic_inputs(pe))


def _stop_all(procs: dict[str, _Proc]) -> None:
    for p in procs.values():
        p.kill()


def _wiring(pe: str, links: tuple[DeployedLink, ...], endpoints: dict, keys: dict) -> dict[str, Any]:
    """The "connect" command of ``pe``: where each outgoing link goes (with the server
    key it must see) and which link keys each of its input ports admits."""
    out: dict[str, list[dict[str, Any]]] = {}
    upstream: dict[str, dict[str, dict[str, Any]]] = {}
    for ln in links:
        if ln.src_pe == pe:
            out.setdefault(ln.src, []).append({
                "link": ln.id, "endpoint": endpoints[ln.dst_pe][ln.dst][ln.transport],
                "server_key": keys[ln.dst_pe].get("server")})
        if ln.dst_pe == pe:
            upstream.setdefault(ln.dst, {})[ln.id] = {
                "key": keys[ln.src_pe].get("links", {}).get(ln.id),
                "from": f"PE {ln.src_pe} ({ln.src})"}
    return {"links": out, "upstream": upstream}


def _collect(events: queue.Queue, procs: dict[str, _Proc], want: type[ctrl.Record], node: int,
             timeout: float | None = STARTUP_TIMEOUT_S, stall: float | None = None,
             beat_file: Path | None = None, on_tick=None, tick: float = 1.0) -> dict[str, Any]:
    """Wait until every PE reported ``want``; fail on an error, an exit, ``timeout``,
    or (``stall``) when no PE of the node advanced for that many seconds. ``on_tick()``
    is called at least every ``tick`` seconds while waiting (with ``stall``)."""
    got: dict[str, Any] = {}
    deadline = None if timeout is None else time.time() + timeout
    watch = _StallWatch(procs, stall) if stall else None
    touched = 0.0
    while len(got) < len(procs):
        try:
            wait = None if deadline is None else max(0.0, deadline - time.time())
            if on_tick is not None:
                on_tick()
            if watch is not None:
                wait = tick if wait is None else min(wait, tick)
                if beat_file is not None and time.time() - touched >= 1.0:
                    _touch(beat_file)
                    touched = time.time()
                stalled = watch.stalled(got)
                if stalled:
                    _fail({"node": node, "op": None, "port": None, "kind": "stall", **stalled}, procs)
            pe, ev = events.get(timeout=wait)
        except queue.Empty:
            if deadline is None or time.time() < deadline:
                continue
            missing = sorted(set(procs) - set(got))
            _fail({"pe": missing[0], "node": node, "op": None, "port": None,
                   "message": f"PE(s) {', '.join(missing)} did not report '{want.KIND}' within {timeout:.0f} s",
                   "log": procs[missing[0]].log_tail()}, procs)
        if isinstance(ev, ctrl.Beat):
            if watch is not None:
                watch.beat(pe, ev)
        elif isinstance(ev, want):
            got[pe] = ev
        elif isinstance(ev, ctrl.Failed):
            _fail({"pe": pe, "node": node, "op": ev.op, "port": ev.port, "kind": ev.kind,
                   "thread": ev.thread, "message": ev.message,
                   "traceback": ev.traceback, "log": procs[pe].log_tail()}, procs)
        elif isinstance(ev, ctrl.Exited) and pe not in got:
            _fail({"pe": pe, "node": node, "op": None, "port": None,
                   "message": f"PE process exited with code {ev.code} before reporting '{want.KIND}'",
                   "log": procs[pe].log_tail()}, procs)
    return got


class _StallWatch:
    """Tracks each PE's heartbeat and progress counter; the node is stalled when no PE
    still running advanced for ``limit`` seconds."""

    def __init__(self, procs: dict[str, _Proc], limit: float) -> None:
        now = time.time()
        self.limit = limit
        self.procs = procs
        self.last_beat = {pe: now for pe in procs}
        self.progress: dict[str, int] = {}
        self.waiting: dict[str, dict[str, list[str]]] = {}
        self.advanced = now

    def beat(self, pe: str, ev: ctrl.Beat) -> None:
        now = time.time()
        self.last_beat[pe] = now
        n = ev.progress
        if n != self.progress.get(pe):
            self.progress[pe] = n
            self.advanced = now
        self.waiting[pe] = ev.waiting or {}

    def stalled(self, done: dict) -> dict[str, Any] | None:
        now = time.time()
        if now - self.advanced < self.limit:
            return None
        silent, parts = [], []
        for pe in sorted(set(self.procs) - set(done)):
            if now - self.last_beat[pe] >= min(self.limit, 5.0):
                silent.append(pe)
                parts.append(f"PE {pe} stopped reporting ({now - self.last_beat[pe]:.0f} s without a "
                             f"heartbeat: stopped or hung)")
            elif self.waiting.get(pe):
                ports = "; ".join(f"{ref} (links {', '.join(ls)})" for ref, ls in sorted(self.waiting[pe].items()))
                parts.append(f"PE {pe} waits on {ports}")
            else:
                parts.append(f"PE {pe} makes no progress (blocked sending or in an operator)")
        first = (silent or sorted(set(self.procs) - set(done)) or [None])[0]
        msg = f"no progress for {now - self.advanced:.0f} s (--stall-timeout {self.limit:g} s): " + "; ".join(parts)
        return {"pe": first, "message": msg, "log": self.procs[first].log_tail() if first else ""}


def is_live_run(progress_dir: Path) -> bool:
    """Does a PE whose progress file is in ``progress_dir`` read a source without an end
    of its own (``runtime.pe``'s progress file says ``unbounded``)?"""
    for f in progress_dir.glob("*.json"):
        try:
            if json.loads(f.read_text()).get("unbounded"):
                return True
        except (OSError, json.JSONDecodeError, AttributeError):
            continue
    return False


def _touch(path: Path) -> None:
    """The agent's own heartbeat, for a driver that can see the progress directory."""
    try:
        path.write_text(f"{time.time()}\n")
    except OSError:
        pass


def _fail(fields: dict[str, Any], procs: dict[str, _Proc]) -> None:
    """Kill the node's PEs and fail with a ``control.NodeFailure`` of ``fields``."""
    for p in procs.values():
        p.kill()
    report = ctrl.NodeFailure(**fields)
    raise PEFailed(_tagged(report), report)


def barrier_task(deploy: Deployment, job: ctrl.JobSpec, iterator):
    """The function each Spark barrier task runs (one task = one node).

    ``job`` (made by the launcher) says where the code is and where outputs go:
    ``bundle`` names the shipped zip (``SparkFiles``), extracted into a private work
    directory; with ``return_outputs`` (a non-local master) the PEs write sinks,
    logs and profile samples under that work directory and the node returns the
    sink parts and sample files in its result, so nothing is left on the worker's disk
    and nothing assumes a path shared with the driver. Otherwise (local modes) the
    driver's ``out_dir``, ``log_dir`` and ``progress_dir`` are used directly.
    """
    from pyspark import BarrierTaskContext, SparkFiles

    from spadeopt.deploy import rendezvous, ship

    ctx = BarrierTaskContext.get()
    node = ctx.partitionId()
    infos = ctx.getTaskInfos()
    host = infos[node].address.rsplit(":", 1)[0] if infos else None
    if host in (None, "", "localhost") or len({i.address.rsplit(":", 1)[0] for i in infos}) == 1:
        host = "127.0.0.1"  # every node on this host: tcp links stay on loopback
    work = tempfile.mkdtemp(prefix=f"spadeopt-node{node}-")
    try:
        local = ship.unpack(SparkFiles.get(job.bundle), str(Path(work, "job")), job.app_ref)
        deploy = dataclasses.replace(deploy, app_ref=local.app_ref)
        out_dir, log_dir, progress_dir = job.out_dir, job.log_dir, job.progress_dir
        if job.return_outputs:
            out_dir = str(Path(work, "out")) if out_dir else None
            # the node's own progress files: its PEs' stop file and whether they are live
            log_dir, progress_dir = str(Path(work, "logs")), str(Path(work, "progress"))
            if deploy.settings.profile:
                deploy = deploy.with_settings(profile=dataclasses.replace(deploy.settings.profile,
                                                                          run_dir=str(Path(work, "profile"))))
        # the nodes meet on the driver (deploy.rendezvous), not through Spark's barrier
        # calls (a late reply costs them a whole second); one local node meets nobody,
        # unless its checkpointed run may restart in place (the driver's way to the agents)
        meeting = rendezvous.meet(job.rendezvous, node, STARTUP_TIMEOUT_S)
        sync = {} if meeting is None else {"gather": meeting.gather, "barrier": meeting.barrier}
        in_place = job.in_place and meeting is not None
        try:
            result = run_node(node, deploy, local.build_dir, out_dir, log_dir, host=host,
                              progress_dir=progress_dir, pythonpath=local.pythonpath,
                              control=meeting if job.return_outputs or in_place else None,
                              in_place=in_place, live=job.metrics, **sync)
        finally:
            if meeting is not None:
                meeting.close()
        result["executor"] = ship.executor_id()
        if job.return_outputs:
            prof = deploy.settings.profile
            result["files"] = ship.collect_outputs(out_dir, prof.run_dir if prof else None)
        yield ctrl.NodeReport(**result).to_line()
    finally:
        shutil.rmtree(work, ignore_errors=True)
