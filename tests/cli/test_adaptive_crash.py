"""``spadeopt run APP --adaptive`` with PEs killed around the switch (issue 39's crash check).

Phase 1's PE is killed (SIGKILL) while one of its checkpoints is being taken (its
directory has no manifest yet), after the first one completed and before the
measurement window ends: phase 1 restarts in place from the last complete checkpoint
(it is a checkpointed run, ``--restart-attempts``) and switches later. Then a PE of phase
2 is killed as soon as it runs, just after the switch restored it: phase 2 restarts
from the checkpoint it resumed. Nothing may be lost or doubled: the sinks are a plain
``--fusion all`` run's, byte for byte. Real Spark in local mode. (Which checkpoint the
first kill lands in is not steered: the window is long enough that it is an earlier
one than the switch's, under the load of the suite's second worker too.)
"""

from __future__ import annotations

import json
import os
import signal
import threading

import pytest

from tests.cli.clitools import cli

APP = "tests/apps/ckpt.py"
SINKS = ("means", "counts", "runs")
ADAPT_AFTER = 3.0


def _pid(path) -> int | None:
    try:
        return int(json.loads(path.read_text())["pid"])
    except (OSError, ValueError, KeyError):
        return None


def _kill(pid: int) -> bool:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.spark
def test_pes_killed_at_the_stopping_checkpoint_and_after_the_switch_lose_and_double_nothing(tmp_path):
    params = ["-p", "n=240000", "-p", "spin_us=2000", "-p", "width=2"]
    ref = cli("run", APP, "--fusion", "all", *params, "--out", tmp_path / "ref", "--build-dir", tmp_path / "rb")
    assert ref.returncode == 0, ref.stderr
    work, killed = tmp_path / "work", {}
    stop = threading.Event()

    def killer() -> None:
        pe0 = work / "phase1" / "build" / "progress" / "pe0.json"
        while not stop.wait(0.05) and _pid(pe0) is None:
            pass
        while not stop.wait(0.005):  # kill while a checkpoint is taken, once one has completed
            chks = list((work / "checkpoints").glob("chk-*"))
            taking = [d.name for d in chks if not (d / "MANIFEST.json").exists()]
            if taking and len(taking) < len(chks) and (pid := _pid(pe0)) is not None and _kill(pid):
                killed["phase1"] = (taking, pid)
                break
        while not stop.wait(0.05):
            for f in sorted(work.glob("*/progress/pe*.json")):
                if f.parent.parent.name != "phase1" and (pid := _pid(f)) is not None and _kill(pid):
                    killed["phase2"] = (f.parent.parent.name, pid)
                    return

    th = threading.Thread(target=killer, daemon=True)
    th.start()
    got = cli("run", APP, "--adaptive", "--adapt-after", str(ADAPT_AFTER), "--checkpoint-interval", "0.5", *params,
              "--out", tmp_path / "out", "--json", tmp_path / "r.json", "--build-dir", work)
    stop.set()
    th.join(timeout=10)
    assert got.returncode == 0, got.stderr
    assert "phase1" in killed and "phase2" in killed, (killed, got.stdout[-2000:])
    for name in SINKS:
        assert (tmp_path / "out" / f"{name}.jsonl").read_bytes() == (tmp_path / "ref" / f"{name}.jsonl").read_bytes(), name
    doc = json.loads((tmp_path / "r.json").read_text())
    sw = doc["adaptive"]
    assert sw["switched"] and sw["before"]["restarts"], sw  # phase 1 restarted, then switched
    assert doc["checkpoints"]["restarts"], doc["checkpoints"]  # and so did phase 2
