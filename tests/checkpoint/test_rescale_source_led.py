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


@pytest.mark.slow
@pytest.mark.parametrize("widths", [(2, 2), (3, 2)])
def test_two_regions_widen_from_one_with_a_key_exchange_between_them(tmp_path, widths):
    """``tests/apps/exchange.py`` (case ``source``): region ``prep`` led by the splittable
    source, region ``desk`` a count window of 4 per symbol. At width 1 they are a chain;
    wider, each ``prep`` channel sends to ``desk``'s channels by symbol (a key exchange).
    Both widen at once: the window's groups go to their symbols' channels, numbered below
    every number the exchange makes from the copies' positions, and the exchange's parts
    start empty."""
    from tests.apps.exchange import exchange

    g = exchange.build({"case": "source", "tuples": 40_000, "spin_us": 1500})
    ref = build_and_run(g, plan_for(g, "all", widths={"prep": 1, "desk": 1}), workdir=tmp_path / "ref",
                        app_ref="tests/apps/exchange.py").dir / "out"
    wprep, wdesk = widths
    a, b = (generate(g, dataclasses.replace(plan_for(g, fusion, widths=w), checkpoints=True), tmp_path / name,
                     "tests/apps/exchange.py")
            for name, fusion, w in (("a", "all", {"prep": 1, "desk": 1}), ("b", "none", {"prep": wprep, "desk": wdesk})))
    assert any(p.operators[0].startswith("desk__xmerge") for p in b.deploy.pes)  # a key exchange
    store = CheckpointStore(tmp_path / "chk", keep=2)
    _stopped_after_checkpoints(tmp_path, a, store, 2)
    chk = store.latest(b.deploy, load_facts(b.directory))
    groups = {}
    for pe in b.deploy.pes:
        groups |= {op: st[0] for op, st in decode_state(chk.parts[pe.pe])["ops"].items() if op.startswith("per_sym__")}
    assert sorted(groups) == [f"per_sym__{d}" for d in range(wdesk)] and any(groups.values()), groups
    out = resumed(tmp_path, b, store, chk)
    assert (out / "sink.jsonl").read_bytes() == (ref / "sink.jsonl").read_bytes()
