"""Issue 29 on real Spark: ``kill -9`` of a PE three times during ``api.run`` with
checkpoints every second; the sinks are byte-identical to a failure-free run.

The app is ``tests/apps/ckpt.py`` (two generator sources merged by time, a keyed
tumbling event-time window, a keyed count window, a stateful custom operator, three file
sinks). A killer thread watches the checkpoint directory and the PEs' progress files
(``BUILD/progress/<pe>.json`` holds each PE's pid): after each new complete checkpoint it
kills the next victim PE with SIGKILL, and ``deploy.checkpointed_run.run`` must restart every
PE from the last complete checkpoint *in place*: the node agent reports the failure and
starts its PEs again in the same Spark task, so the run is one Spark job (one barrier
stage) however many PEs are killed. Under NONE, FALL, FMAN, FATM (a plan from
``fuse_auto``) and with the windows in a width-2 region. (The whole-stage restart, for a
lost executor, is ``tests/e2e/test_cluster.py``'s executor kill.)

Recovery times are reported (printed, and in the run result's ``checkpoints.restarts``),
never asserted: the machine is shared.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import signal
import threading
import time
from pathlib import Path

import pytest

from spadeopt import api
from spadeopt.codegen.render import generate
from spadeopt.deploy.checkpointed_run import CheckpointOptions
from spadeopt.deploy.options import RunOptions
from spadeopt.optimize.fatm import OperatorProfile, fuse_auto
from spadeopt.optimize.problem import LinearCommModel
from spadeopt.optimize.strategies import plan_for
from spadeopt.orchestrate.build_local import build_and_run
from tests.apps.ckpt import ckpt

REF = "tests/apps/ckpt.py"
SINKS = ("means", "counts", "runs")
KILLS = 3
# spin_us keeps the sources busy long enough (~10 s of source CPU) for three kills and
# restarts, each after a new checkpoint; a checkpoint needs every PE clean, so the kills
# must land before the shorter source (rb, n // 2 records) ends
PARAMS = {"n": 60_000, "spin_us": 12_000}


class Killer(threading.Thread):
    """After each new complete checkpoint in ``chk``, SIGKILL the next victim PE
    (pids from the build's progress files), once the previous victim was restarted;
    ``kills`` records (time, PE, checkpoint)."""

    def __init__(self, build: Path, chk: Path, victims: list[str], n: int = KILLS) -> None:
        super().__init__(daemon=True)
        self.build, self.chk, self.victims, self.n = build, chk, victims, n
        self.kills: list[tuple[float, str, int]] = []
        self.done = threading.Event()

    def _complete(self) -> int:
        if not self.chk.is_dir():
            return 0
        return max((int(p.parent.name[4:]) for p in self.chk.glob("chk-*/MANIFEST.json")), default=0)

    def _pid(self, pe: str) -> int | None:
        try:
            return json.loads((self.build / "progress" / f"{pe}.json").read_text())["pid"]
        except (OSError, ValueError, KeyError):
            return None

    def run(self) -> None:
        seen, killed, after, restarting = 0, set(), None, None
        rng = random.Random(29)
        while len(self.kills) < self.n and not self.done.wait(0.05):
            newest = self._complete()
            if restarting is not None:
                # wait for the restart (the victim under a new pid), then for a checkpoint
                # newer than any complete now: one that completes just after a kill is the
                # run's before it, and a kill then would land before the restart
                now = self._pid(restarting)
                if now is None or now in killed:
                    continue
                restarting, seen = None, newest
                continue
            if newest <= seen:
                continue
            if after is None:  # a while after the checkpoint: the kill lands mid-epoch, with output to replay
                after = time.time() + rng.uniform(0.2, 0.7)
            if time.time() < after:
                continue
            victim = self.victims[len(self.kills) % len(self.victims)]
            pid = self._pid(victim)
            if pid is None or pid in killed:
                continue  # no file yet, or the killed attempt's, before the restart removed it
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            killed.add(pid)
            self.kills.append((time.time(), victim, newest))
            restarting, after = victim, None


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """The failure-free sinks, once for every case: fused, width 1 and without the spin
    (``spin_us`` only burns time; every width gives the width-1 answers, which the other
    tests check, so a wrong width-2 run still differs from this)."""
    return _reference(tmp_path_factory.mktemp("ref"), {**PARAMS, "spin_us": 0, "width": 1})


def _reference(tmp_path: Path, params: dict) -> Path:
    g = ckpt.build(params)
    return build_and_run(g, plan_for(g, "all"), workdir=tmp_path / "ref", app_ref=REF).dir / "out"


def _fatm_build(tmp_path: Path, params: dict) -> Path:
    """A FATM plan (``fuse_auto`` from a profile with uneven loads: the windows and the
    custom operator heavy), built with checkpoints."""
    g = ckpt.build(params)
    heavy = {"win": 0.3, "cnt": 0.2, "run": 0.25, "both": 0.1}
    prof = OperatorProfile(g.name, g.fingerprint, {op.name: heavy.get(op.name, 0.02) for op in g.operators},
                           tuple((s.src.op, s.dst.op, 10_000.0, 60.0) for s in g.streams), 10_000.0)
    auto = fuse_auto(g, prof, LinearCommModel(2e-6, 1e-9), nodes=1, cores=2, rate="max")
    plan = dataclasses.replace(auto.plan, checkpoints=True)
    return generate(g, plan, tmp_path / "build", REF).directory


def _spark_jobs() -> int:
    """Spark jobs the live session has run (0: no session yet)."""
    from spadeopt.deploy.spark_session import current_session

    session = current_session()
    if session is None:
        return 0
    return len(session.sparkContext.statusTracker().getJobIdsForGroup())


def _kill_run(tmp_path: Path, fusion: str, params: dict) -> tuple[Path, object, Killer, int]:
    chk = tmp_path / "chk"
    out = tmp_path / "out"
    if fusion == "fatm":
        build = _fatm_build(tmp_path, params)
        target = str(build)
    else:
        build = tmp_path / "build"
        target = REF
    ck = CheckpointOptions(1.0, chk, keep=3, restart_attempts=KILLS, backoff=0.5)
    options = RunOptions(out=out, checkpoints=ck, progress=print)

    victims: list[str] = []

    def start_killer() -> Killer:
        while not (build / "deploy.json").exists():
            time.sleep(0.05)
        pes = json.loads((build / "deploy.json").read_text())["pes"]
        # every PE in turn, the ones holding sources last (each kill hits a different kind of PE)
        victims.extend(p["pe"] for p in sorted(pes, key=lambda p: (bool({"ra", "rb"} & set(p["operators"])), p["pe"])))
        k = Killer(build, chk, victims)
        k.start()
        return k

    holder: dict = {}
    starter = threading.Thread(target=lambda: holder.update(k=start_killer()), daemon=True)
    starter.start()
    jobs = _spark_jobs()
    try:
        res = api.run(target, fusion if fusion != "fatm" else "none", {k: str(v) for k, v in params.items()}
                      if fusion != "fatm" else None, build_dir=None if fusion == "fatm" else build,
                      options=options)
    finally:
        starter.join(5)
        if "k" in holder:
            holder["k"].done.set()
    return out, res, holder["k"], _spark_jobs() - jobs


@pytest.mark.spark
@pytest.mark.slow
# FALL and FMAN at width 1 are killed three times without Spark (test_recovery.py, the same
# PEs, links and coordinator); here the plans whose restart paths differ most: many PEs,
# FATM's, and a width-2 region (8.5 min for all five under load; CI has 30 min in all)
@pytest.mark.parametrize("fusion,width", [("none", 1), ("fatm", 1), ("manual", 2)])
def test_kill_a_pe_three_times_on_spark_gives_the_failure_free_sinks(tmp_path, reference, fusion, width):
    params = {**PARAMS, "width": width}
    out, res, killer, jobs = _kill_run(tmp_path / "ck", fusion, params)
    report = res.checkpoints
    restarts = report["restarts"]
    assert len(killer.kills) == KILLS and len(restarts) == KILLS, (killer.kills, restarts)
    # every restart in place: one Spark job and stage, whose one agent restarted its PEs each time
    assert [r["how"] for r in restarts] == ["in place"] * KILLS, restarts
    assert report["stages"] == 1 and jobs == 1, (report["stages"], jobs)
    assert res.restarts_in_place == {"0": KILLS}, res.restarts_in_place
    assert all(r["checkpoint"] is not None for r in restarts), restarts  # never from the beginning
    assert [r["checkpoint"] for r in restarts] == sorted(r["checkpoint"] for r in restarts)
    for name in SINKS:
        assert (out / f"{name}.jsonl").read_bytes() == (reference / f"{name}.jsonl").read_bytes(), name
    assert report["checkpoints"] >= KILLS
    # every restart got every PE running again; the last one (not killed again) also output again
    # (an earlier one may have been killed before its first new output: then it has none)
    assert all(r["recovered_s"] is not None for r in restarts), restarts
    assert restarts[-1]["first_output_s"] is not None, restarts[-1]
    for (killed_at, pe, _), r in zip(killer.kills, restarts, strict=True):
        first = r["first_output_s"]
        print(f"{fusion} w{width} ({r['how']}): killed {pe}; failure seen {r['failed_at'] - killed_at:.1f} s after the kill; "
              f"running again after {r['recovered_s']:.1f} s; first new output "
              + (f"{first:.1f} s after the failure was seen ({r['failed_at'] + first - killed_at:.1f} s after "
                 f"the kill)" if first is not None else "none before the next kill"))
