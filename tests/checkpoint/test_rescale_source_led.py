"""A width-1 run stopped at a checkpoint resumes with its source-led region wider, exactly once.

An adaptive run (issue 39) measures under FALL, where every region has width 1, and
switches to FATM's widths at a checkpoint. A region led by a splittable source reads
records ``[0, n)`` by then; each new copy passes over the records of its own splits
below ``n`` and a static merge starts its round at split ``n // size``
(``deploy.checkpoint_rescale``). Stopped by kill -9 of every PE once checkpoints
completed, the build at width 2 or 3 resumes from the last one; its sinks must be a
failure-free run's, byte for byte, for a static region (functors: blocks back in turn)
and a dynamic one (a filter: stamped numbers, sequence-number merge). Split size 7 does
not divide the checkpoint's position in general, so a split is cut. Real PE processes on
local node agents, no JVM.
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
from tests.apps.splits import splits
from tests.checkpoint.test_replan_resume import _stopped_after_checkpoints, resumed

REF = "tests/apps/splits.py"


@pytest.mark.slow
@pytest.mark.parametrize("case,first,then,new", [("static", "all", "none", 3), ("dynamic", "all", "manual", 2)])
def test_a_source_led_region_widens_from_one_at_a_checkpoint_with_the_failure_free_answer(tmp_path, case, first,
                                                                                           then, new):
    g = splits.build({"case": case, "tuples": 60_000, "spin_us": 300, "width": 2})
    ref = build_and_run(g, plan_for(g, "all", widths={"reg": 1}), workdir=tmp_path / "ref", app_ref=REF).dir / "out"
    a, b = (generate(g, dataclasses.replace(plan_for(g, fusion, widths={"reg": w}), checkpoints=True),
                     tmp_path / name, REF) for name, fusion, w in (("a", first, 1), ("b", then, new)))
    store = CheckpointStore(tmp_path / "chk", keep=2)
    _stopped_after_checkpoints(tmp_path, a, store, 2)
    chk = store.latest(b.deploy, load_facts(b.directory))  # rescaled from width 1, regrouped into b's PEs
    positions = {}
    for pe in b.deploy.pes:
        positions |= decode_state(chk.parts[pe.pe])["sources"]
    assert sorted(positions) == [f"src__{c}" for c in range(new)]
    assert 0 < sum(positions.values()) < 60_000, positions  # the checkpoint was taken mid-stream
    out = resumed(tmp_path, b, store, chk)
    assert (out / "sink.jsonl").read_bytes() == (ref / "sink.jsonl").read_bytes()
