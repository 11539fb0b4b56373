"""A run stopped at a checkpoint resumes with its parallel region at another width, exactly once.

Rescaling a running job (issue 39): a checkpointing run with region ``wins`` (a keyed
tumbling event-time window and a functor) at one width is stopped by kill -9 of every
PE once checkpoints completed; the app's build with the region at another width resumes
from the last one, the window copies' groups moved to the channels that own their keys
at the new width (``deploy.checkpoint_rescale``), and runs to the end. Its sinks must be
a failure-free run's, byte for byte (2 -> 3, 3 -> 2, 3 -> 1, 1 -> 2). A custom operator's
opaque snapshot in a region at another width is refused, naming it.
Real PE processes on local node agents, no JVM.
"""

from __future__ import annotations

import dataclasses

import pytest

from spadeopt.codegen.render import generate
from spadeopt.deploy.checkpoint_rescale import load_facts
from spadeopt.deploy.checkpoint_store import CheckpointMismatch, CheckpointStore
from spadeopt.optimize.strategies import plan_for
from spadeopt.orchestrate.build_local import build_and_run
from spadeopt.runtime.checkpoint_codec import decode_state
from tests.apps.ckpt import ckpt, ckregion
from tests.checkpoint.test_replan_resume import REF, SINKS, _stopped_after_checkpoints, resumed


def _build(g, tmp_path, name, fusion, width):
    return generate(g, dataclasses.replace(plan_for(g, fusion, widths={"wins": width}), checkpoints=True),
                    tmp_path / name, REF)


@pytest.mark.slow
@pytest.mark.parametrize("first,then,old,new", [("none", "manual", 2, 3), ("manual", "none", 3, 2),
                                                ("manual", "none", 3, 1), ("all", "none", 1, 2)])
def test_a_stopped_run_resumes_at_another_width_with_the_failure_free_answer(tmp_path, first, then, old, new):
    g = ckpt.build({"n": 60_000, "spin_us": 2000, "width": 2})
    ref = build_and_run(g, plan_for(g, "all"), workdir=tmp_path / "ref", app_ref=REF).dir / "out"
    a, b = _build(g, tmp_path, "a", first, old), _build(g, tmp_path, "b", then, new)
    store = CheckpointStore(tmp_path / "chk", keep=2)
    _stopped_after_checkpoints(tmp_path, a, store, 2)
    chk = store.latest(b.deploy, load_facts(b.directory))  # rescaled, then regrouped into b's PEs
    assert set(chk.parts) == {p.pe for p in b.deploy.pes}
    groups = {}
    for pe in b.deploy.pes:
        doc = decode_state(chk.parts[pe.pe])
        assert doc["pe"] == pe.pe and set(doc["ops"]) <= set(pe.operators)
        groups |= {op: st[0] for op, st in doc["ops"].items() if op.split("__")[0] == "win"}
    assert sorted(groups) == (["win"] if new == 1 else [f"win__{c}" for c in range(new)])
    assert sum(map(len, groups.values())) > 0, "the checkpoint was taken with no open window"
    out = resumed(tmp_path, b, store, chk)
    for name in SINKS:
        assert (out / f"{name}.jsonl").read_bytes() == (ref / f"{name}.jsonl").read_bytes(), name
    assert chk.id >= 2 and any(chk.manifest["sinks"].values()), chk.manifest


@pytest.mark.slow
@pytest.mark.parametrize("old,new", [(2, 3), (3, 1)])
def test_a_count_window_region_whose_merge_holds_tuples_rescales(tmp_path, old, new):
    """Region ``chans`` (a filter and a keyed count window of 4, whose groups also keep
    their last tuples in a copy). At an aligned checkpoint every channel passed the same
    pulse on, so the merge is empty here (a held row's move: test_rescale_units); were it
    not, narrowing to 1 is refused, said."""
    g = ckregion.build({"n": 60_000, "spin_us": 2000, "width": 2})
    ref = build_and_run(g, plan_for(g, "all"), workdir=tmp_path / "ref", app_ref=REF).dir / "out"
    a, b = (generate(g, dataclasses.replace(plan_for(g, "none", widths={"chans": w}), checkpoints=True),
                     tmp_path / name, REF) for name, w in (("a", old), ("b", new)))
    store = CheckpointStore(tmp_path / "chk", keep=2)
    _stopped_after_checkpoints(tmp_path, a, store, 2)
    try:
        chk = store.latest(b.deploy, load_facts(b.directory))
    except CheckpointMismatch as exc:  # narrowing to 1 while the merge held rows: refused, said
        assert new == 1 and "chans__merge' of region 'chans' cannot move to width 1" in str(exc), exc
        return
    out = resumed(tmp_path, b, store, chk)
    for name in ("means", "counts"):
        assert (out / f"{name}.jsonl").read_bytes() == (ref / f"{name}.jsonl").read_bytes(), name


@pytest.mark.slow
def test_a_custom_operators_region_at_another_width_is_refused_naming_it(tmp_path):
    g = ckpt.build({"n": 60_000, "spin_us": 2000, "width": 2, "keyed": 1})
    a, b = (generate(g, dataclasses.replace(plan_for(g, "none", widths={"wins": w, "runs": w}), checkpoints=True),
                     tmp_path / name, REF) for name, w in (("a", 2), ("b", 3)))
    store = CheckpointStore(tmp_path / "chk", keep=2)
    _stopped_after_checkpoints(tmp_path, a, store, 1)
    with pytest.raises(CheckpointMismatch, match="its state cannot move to this plan's widths: operator 'run' of "
                                                 "region 'runs': a custom operator's snapshot.*keep the region's "
                                                 "width 2"):
        store.latest(b.deploy, load_facts(b.directory))
    assert store.latest(a.deploy).id == max(store.ids())  # at its own widths it resumes
