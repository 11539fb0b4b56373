"""Sliding windows and windows with an allowed lateness move to another width at a checkpoint.

A checkpointing run of ``ckslide`` (region ``swins``: a keyed sliding event-time window,
or a tumbling one with an allowed lateness, and a functor; region ``scnts``: a keyed
sliding count window) over readings that go out of order (some late) is stopped by
kill -9 of every PE once checkpoints completed; the app's build with the regions at other
widths resumes from the last one (``deploy.checkpoint_rescale``: the copies' groups,
their opening numbers, the clock and the late counter moved by key) and runs to the end.
Its sinks must be a run's that never stopped or switched, byte for byte. Real PE
processes on local node agents, no JVM.
"""

from __future__ import annotations

import dataclasses

import pytest

from spadeopt.codegen.render import generate
from spadeopt.deploy.checkpoint_rescale import load_facts
from spadeopt.deploy.checkpoint_store import CheckpointStore
from spadeopt.optimize.strategies import plan_for
from spadeopt.orchestrate.build_local import build_and_run
from spadeopt.runtime.checkpoint_codec import decode_state
from tests.apps.ckpt import ckslide
from tests.checkpoint.test_replan_resume import REF, _stopped_after_checkpoints, resumed


@pytest.mark.slow
@pytest.mark.parametrize("lateness,slide,old,new", [
    (0.0, 0.5, (2, 1), (3, 2)),  # sliding; the count window widens from 1
    (0.3, 0.5, (1, 3), (2, 1)),  # sliding with a lateness widens from 1; the count window narrows to 1
    (0.3, 1.0, (3, 2), (1, 3)),  # tumbling with a lateness (the sliding code) narrows to 1
    (0.2, 0.25, (3, 3), (2, 2)),
])
def test_a_sliding_window_region_resumes_at_another_width_with_the_answer_of_a_run_that_never_switched(
        tmp_path, lateness, slide, old, new):
    g = ckslide.build({"n": 40_000, "spin_us": 2000, "lateness": lateness, "slide": slide})

    def build(name, fusion, widths):
        plan = plan_for(g, fusion, widths={"swins": widths[0], "scnts": widths[1]})
        return generate(g, dataclasses.replace(plan, checkpoints=True), tmp_path / name, REF)

    ref = build_and_run(g, plan_for(g, "all", widths={"swins": 1, "scnts": 1}), workdir=tmp_path / "ref",
                        app_ref=REF).dir / "out"
    a, b = build("a", "none", old), build("b", "manual", new)
    store = CheckpointStore(tmp_path / "chk", keep=2)
    _stopped_after_checkpoints(tmp_path, a, store, 2)
    chk = store.latest(b.deploy, load_facts(b.directory))  # rescaled, then regrouped into b's PEs
    states = {}
    for pe in b.deploy.pes:
        states |= {op: st for op, st in decode_state(chk.parts[pe.pe])["ops"].items()
                   if op.split("__")[0] in ("win", "cnt")}
    wins = sorted(op for op in states if op.startswith("win"))
    assert wins == (["win"] if new[0] == 1 else [f"win__{c}" for c in range(new[0])])
    assert sum(len(states[op][0]) for op in wins) > 0, "the checkpoint was taken with no open window"
    assert sum(states[op][-1][0] for op in wins) > 0, "no tuple was late before the checkpoint"
    if new[0] > 1:  # each copy's opening numbers are its groups'
        assert all(set(states[op][2]) == set(states[op][0]) for op in wins)
    out = resumed(tmp_path, b, store, chk)
    for name in ("means", "counts"):
        assert (out / f"{name}.jsonl").read_bytes() == (ref / f"{name}.jsonl").read_bytes(), name
    assert chk.id >= 2 and any(chk.manifest["sinks"].values()), chk.manifest
