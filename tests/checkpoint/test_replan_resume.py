"""A run stopped at a checkpoint resumes under another plan of the same operators, exactly once.

The first half of re-planning a running job (issue 39): a checkpointing run under one
fusion is stopped (kill -9 of every PE) once checkpoints completed; the same app's
build under another fusion resumes from the last one, its state regrouped by operator
(``deploy.checkpoint_regroup``), and runs to the end. Its sinks must be a failure-free
run's, byte for byte. A plan whose operators differ (a region at another width) is
refused, naming the difference. Real PE processes on local node agents, no JVM.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import threading
from pathlib import Path

import pytest

from spadeopt.codegen.render import generate
from spadeopt.deploy.agent import PEFailed, run_node
from spadeopt.deploy.checkpoint_coordinator import Coordinator
from spadeopt.deploy.checkpoint_store import CheckpointMismatch, CheckpointStore, finish_sinks
from spadeopt.optimize.strategies import plan_for
from spadeopt.orchestrate.build_local import build_and_run
from spadeopt.runtime.checkpoint_codec import decode_state
from spadeopt.runtime.sinks import commit, discard
from tests.apps.ckpt import ckpt

REF = "tests/apps/ckpt.py"
SINKS = ("means", "counts", "runs")


def resumed(tmp_path, b, store: CheckpointStore, chk) -> Path:
    """Run build ``b`` from checkpoint ``chk`` of ``store`` to the end, as ``--resume``
    does (sinks rewound to the checkpoint, then committed); the sinks' directory."""
    store.rewind_sinks(chk)
    out = tmp_path / "out"
    coord = Coordinator(store, b.deploy, 0.3, chk)
    run_node(0, b.deploy.with_settings(checkpoint=coord.channel()), str(b.directory), str(out),
             str(tmp_path / "logs-b"), progress_dir=str(tmp_path / "progress-b"))
    commit(out)
    finish_sinks(store, out, coord.finish())
    return out


def _stopped_after_checkpoints(tmp_path, b, store: CheckpointStore, n: int) -> int:
    """Run ``b`` with checkpoints every 0.3 s; kill -9 every PE once ``n`` completed (a
    stop at a checkpoint, as a switch makes it). The last complete checkpoint's id."""
    out, progress = tmp_path / "out", tmp_path / "progress"
    coord = Coordinator(store, b.deploy, 0.3, None)
    stop = threading.Event()

    def killer():
        pes = [progress / f"{p.pe}.json" for p in b.deploy.pes]
        while not stop.wait(0.05):
            done = [i for i in store.ids() if (store.root / f"chk-{i:08d}" / "MANIFEST.json").exists()]
            if len(done) >= n and all(f.exists() for f in pes):  # a PE writes its pid after a second
                for f in pes:
                    try:
                        os.kill(json.loads(f.read_text())["pid"], signal.SIGKILL)
                    except (ProcessLookupError, ValueError, OSError):
                        pass
                return

    threading.Thread(target=killer, daemon=True).start()
    with pytest.raises(PEFailed):
        run_node(0, b.deploy.with_settings(checkpoint=coord.channel()), str(b.directory), str(out),
                 str(tmp_path / "logs-a"), progress_dir=str(progress))
    stop.set()
    coord.close()
    discard(out)
    return max(store.ids())


@pytest.mark.slow
@pytest.mark.parametrize("first,then,width", [("all", "none", 1), ("none", "manual", 2)])
def test_a_stopped_run_resumes_under_another_fusion_with_the_failure_free_answer(tmp_path, first, then, width):
    g = ckpt.build({"n": 60_000, "spin_us": 2000, "width": width})  # long enough to stop mid-way
    ref = build_and_run(g, plan_for(g, "all"), workdir=tmp_path / "ref", app_ref=REF).dir / "out"
    widths = {"wins": width} if width > 1 else {}  # both plans at the same width: the same operators
    a = generate(g, dataclasses.replace(plan_for(g, first, widths=widths), checkpoints=True), tmp_path / "a", REF)
    b = generate(g, dataclasses.replace(plan_for(g, then, widths=widths), checkpoints=True), tmp_path / "b", REF)
    assert {p.pe: p.operators for p in a.deploy.pes} != {p.pe: p.operators for p in b.deploy.pes}
    store = CheckpointStore(tmp_path / "chk", keep=2)
    _stopped_after_checkpoints(tmp_path, a, store, 1)
    chk = store.latest(b.deploy)  # regrouped by operator into b's PEs
    assert set(chk.parts) == {p.pe for p in b.deploy.pes}
    for pe in b.deploy.pes:
        doc = decode_state(chk.parts[pe.pe])
        assert doc["pe"] == pe.pe and set(doc["ops"]) <= set(pe.operators)
    out = resumed(tmp_path, b, store, chk)
    for name in SINKS:
        assert (out / f"{name}.jsonl").read_bytes() == (ref / f"{name}.jsonl").read_bytes(), name
    # the resumed run took up where the checkpoint was: it did not start from the beginning
    assert chk.id >= 1 and any(chk.manifest["sinks"].values()), chk.manifest


@pytest.mark.slow
def test_a_plan_with_other_operators_is_refused_naming_them(tmp_path):
    g = ckpt.build({"n": 60_000, "spin_us": 2000, "width": 2})  # declares the region; "all" runs it at width 1
    a = generate(g, dataclasses.replace(plan_for(g, "all"), checkpoints=True), tmp_path / "a", REF)
    wide = generate(g, dataclasses.replace(plan_for(g, "all", widths={"wins": 2}), checkpoints=True),
                    tmp_path / "w", REF)
    store = CheckpointStore(tmp_path / "chk", keep=2)
    _stopped_after_checkpoints(tmp_path, a, store, 1)
    with pytest.raises(CheckpointMismatch, match="operators differ .*only here: .*win"):
        store.latest(wide.deploy)
    assert store.latest(a.deploy).id == max(store.ids())
