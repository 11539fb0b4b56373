"""Issue 29: a PE that dies while its agent lives is restarted *in place*.

Real node agents (``deploy.agent.run_node``, one thread per node), their PEs (forked by
each agent's zygote) and ZeroMQ links, the driver's real rendezvous, coordinator, store
and restart logic (``deploy.checkpointed_run.Recovery``, what ``checkpoints.run`` uses), no
JVM: after each new complete checkpoint a PE is killed with SIGKILL; its agent reports
the failure on the rendezvous and every agent (on both nodes) stops its PEs and starts
them again from the checkpoint, in the same call of ``run_node`` (so in the same Spark
task: no new stage). The sinks must be byte-identical to a failure-free run. Refusals
and a restart that cannot start its PEs fail the node as before (the driver then
restarts the whole stage). Recovery times are printed, never asserted.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest

from spadeopt.codegen.render import generate
from spadeopt.deploy.agent import ERROR_TAG, PEFailed, run_node
from spadeopt.deploy.checkpoint_store import CheckpointStore, finish_sinks
from spadeopt.deploy.checkpointed_run import IN_PLACE, CheckpointOptions, CheckpointReport, Recovery
from spadeopt.deploy.launcher import _as_run_error
from spadeopt.deploy.procs import running
from spadeopt.deploy.rendezvous import Meeting, Rendezvous
from spadeopt.optimize.strategies import plan_for
from spadeopt.orchestrate.build_local import build_and_run
from spadeopt.runtime.sinks import commit
from tests.apps.ckpt import ckpt

REF = "tests/apps/ckpt.py"
SINKS = ("means", "counts", "runs")


_DRIVERS: list[Driver] = []


@pytest.fixture(autouse=True)
def _close_drivers():
    """Every driver's coordinator and rendezvous closed after each test, whatever it
    asserted: an open socket of the shared ZeroMQ context would hang a later test's
    ``Context.term()`` (a refused restart never closes the coordinator the way
    ``checkpoints.run`` would)."""
    yield
    while _DRIVERS:
        d = _DRIVERS.pop()
        d.rec.coord.close()
        d.rdv.close()


class Driver:
    """What ``run_build`` and ``checkpoints.run`` do on the driver, without Spark: a
    rendezvous whose failure reports go to ``Recovery.in_place``."""

    def __init__(self, tmp_path: Path, build, nodes: int, attempts: int) -> None:
        _DRIVERS.append(self)
        self.build = build
        self.store = CheckpointStore(tmp_path / "chk", keep=3)
        self.report = CheckpointReport()
        ck = CheckpointOptions(0.5, self.store.root, restart_attempts=attempts, backoff=0.2)
        self.rec = Recovery(self.store, build.deploy, ck, self.report, print, None)
        self.rdv = Rendezvous(nodes, local=True, on_failure=self._failed)
        self.out, self.progress, self.logs = tmp_path / "out", tmp_path / "progress", tmp_path / "logs"
        shutil.rmtree(self.progress, ignore_errors=True)

    def _failed(self, node: int, report: str):
        err = _as_run_error(RuntimeError(f"{ERROR_TAG}{report}{ERROR_TAG}"), self.build.deploy, "local[2]")
        return self.rec.in_place(err)

    def run(self, nodes: int) -> dict[int, object]:
        """Every node's agent on a thread of its own; node -> its result or exception."""
        deploy = self.build.deploy.with_settings(checkpoint=self.rec.coord.channel())
        got: dict[int, object] = {}

        def agent(node: int) -> None:
            m = Meeting(self.rdv.address(), node, timeout=60)
            try:
                got[node] = run_node(node, deploy, str(self.build.directory), str(self.out), str(self.logs),
                                     gather=m.gather, barrier=m.barrier, progress_dir=str(self.progress),
                                     control=m, in_place=True)
            except BaseException as exc:  # noqa: BLE001 - the test looks at it
                got[node] = exc
            finally:
                m.close()

        threads = [threading.Thread(target=agent, args=(n,), daemon=True) for n in range(nodes)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        self.rdv.close()
        return got

    def pid(self, pe: str) -> int | None:
        try:
            return json.loads((self.progress / f"{pe}.json").read_text())["pid"]
        except (OSError, ValueError, KeyError):
            return None


class Killer(threading.Thread):
    """After each new complete checkpoint, SIGKILL the next victim (its pid from its
    progress file, never one killed before); ``also(k)`` runs after the k-th kill. After
    a kill it waits for the restart (the victim running under a new pid), and then for a
    checkpoint newer than any complete at that moment: a checkpoint that completes just
    after a kill belongs to the run before it, and a kill then would land before the
    restart (two kills, one restart)."""

    def __init__(self, driver: Driver, victims: list[str], also=None) -> None:
        super().__init__(daemon=True)
        self.driver, self.victims, self.also = driver, victims, also
        self.kills: list[tuple[float, str]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        seen, killed, restarting = 0, set(), None
        store = self.driver.store
        while len(self.kills) < len(self.victims) and not self.stop.wait(0.05):
            done = [i for i in store.ids() if (store.root / f"chk-{i:08d}" / "MANIFEST.json").exists()]
            if restarting is not None:  # the last victim's restart: a new pid in its progress file
                now = self.driver.pid(restarting)
                if now is None or now in killed:
                    continue
                restarting, seen = None, max(done, default=seen)
                continue
            if not done or max(done) <= seen:
                continue
            victim = self.victims[len(self.kills)]
            pid = self.driver.pid(victim)
            if pid is None or pid in killed:
                continue
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            killed.add(pid)
            self.kills.append((time.time(), victim))
            restarting = victim
            if self.also is not None:
                self.also(len(self.kills))


def _build(tmp_path: Path, fusion: str, nodes: int, params: dict):
    g = ckpt.build(params)
    plan = dataclasses.replace(plan_for(g, fusion, nodes=nodes, cores=1), checkpoints=True)
    return generate(g, plan, tmp_path / "build", REF)


@pytest.mark.slow
def test_a_pe_killed_three_times_on_two_nodes_restarts_in_place_and_gives_the_failure_free_sinks(tmp_path):
    params = {"n": 60_000, "spin_us": 3000}
    g = ckpt.build(params)
    ref = build_and_run(g, plan_for(g, "all"), workdir=tmp_path / "ref", app_ref=REF).dir / "out"
    b = _build(tmp_path, "none", 2, params)
    node_of = b.deploy.node_of()
    # one PE of each node, then a PE holding a source (each kill a different kind of PE)
    by_node = {n: sorted(pe for pe, m in node_of.items() if m == n) for n in (0, 1)}
    victims = [by_node[1][-1], by_node[0][-1], by_node[0][0]]
    d = Driver(tmp_path, b, 2, attempts=3)
    killer = Killer(d, victims)
    killer.start()
    got = d.run(2)
    killer.stop.set()
    for node, res in got.items():
        assert isinstance(res, dict), f"node {node} failed: {res}"
    commit(d.out)
    finish_sinks(d.store, d.out, d.rec.finish())
    restarts = d.report.restarts
    assert len(killer.kills) == 3 and len(restarts) == 3, (killer.kills, restarts)
    assert all(r.how == IN_PLACE for r in restarts), restarts
    assert all(r.checkpoint is not None for r in restarts), restarts
    # the same agent (the same Spark task) restarted its PEs each time: no new stage
    for node, res in got.items():
        assert [r["gen"] for r in res["restarts_in_place"]] == [1, 2, 3], (node, res["restarts_in_place"])
    for (_, victim), r in zip(killer.kills, restarts, strict=True):
        assert f"PE {victim}" in r.cause, r.cause
    for name in SINKS:
        assert (d.out / f"{name}.jsonl").read_bytes() == (ref / f"{name}.jsonl").read_bytes(), name
    assert d.rdv.rejected == 0
    for (killed_at, pe), r in zip(killer.kills, restarts, strict=True):
        print(f"in place, 2 nodes: killed {pe}; failure seen {r.failed_at - killed_at:.2f} s after the kill; every PE "
              f"running again after {r.recovered_s:.2f} s; first new output "
              + (f"{r.failed_at + r.first_output_s - killed_at:.2f} s after the kill" if r.first_output_s else "none"))


def test_a_refused_restart_fails_the_node_naming_the_pe_and_leaves_no_process(tmp_path):
    """No attempt left: the driver refuses, the agent fails as without in-place restarts."""
    b = _build(tmp_path, "none", 1, {"n": 200_000, "spin_us": 500})
    d = Driver(tmp_path, b, 1, attempts=0)
    pes = sorted(p.pe for p in b.deploy.pes)
    killer = Killer(d, [pes[-1]])
    killer.start()
    got = d.run(1)
    killer.stop.set()
    assert killer.kills, "nothing was killed"
    exc = got[0]
    assert isinstance(exc, PEFailed), exc
    assert exc.report.pe == pes[-1] and "exited with code -9" in exc.report.message, exc.report
    assert not d.report.restarts
    assert not [pe for pe in pes if (pid := d.pid(pe)) and running(pid)]


def test_a_restart_in_place_that_cannot_start_its_pes_fails_the_node_for_a_new_stage(tmp_path):
    """The node's PE forker dies with the first kill: the restart in place cannot fork
    the PEs again, so the node fails (the driver then restarts the whole stage)."""
    b = _build(tmp_path, "none", 1, {"n": 200_000, "spin_us": 500})
    d = Driver(tmp_path, b, 1, attempts=3)
    pes = sorted(p.pe for p in b.deploy.pes)

    def kill_forker(_k: int) -> None:
        me = os.getpid()
        for p in Path("/proc").iterdir():
            try:
                if p.name.isdigit() and b"spadeopt.runtime.zygote" in (p / "cmdline").read_bytes() \
                        and int((p / "stat").read_text().rsplit(")", 1)[1].split()[1]) == me:
                    os.kill(int(p.name), signal.SIGKILL)
            except (OSError, ValueError):
                continue

    killer = Killer(d, [pes[-1]], also=kill_forker)
    killer.start()
    got = d.run(1)
    killer.stop.set()
    exc = got[0]
    assert isinstance(exc, PEFailed), exc
    assert exc.report.kind == "restart" and "the restart in place (generation 1) failed" in exc.report.message
    assert "forker" in exc.report.message, exc.report
    assert [r.how for r in d.report.restarts] == [IN_PLACE]
    assert not [pe for pe in pes if (pid := d.pid(pe)) and running(pid)]
