"""Record 037's gap, found by ``run --adaptive`` (record 069) and fixed: a PE that holds a
source *and* input links did not restore exactly once. ``tests/apps/ckpt.py`` under the
plan ``ra | rb both win ...`` (the plan FATM chose once on this machine), stopped by
kill -9 of every PE after a checkpoint and resumed under the same plan, gave other sinks
than a failure-free run in 2 of 3 tries: as many lines, other values (the ordered merge
``both`` interleaved ``ra`` and ``rb`` otherwise after the restore; ``win`` dropped late tuples);
the same with ``ra | rb | rest`` was byte-identical. The cause: when the PE's sources
thread ended an alignment while its main thread waited for the lock with a frame that
came after the held ones, that frame reached the operators before them
(``Checkpointer.intercept`` now releases the held frames first). It failed 2 of 3 runs
before the fix and passed 5 of 5 after. Real PE processes, no JVM."""

from __future__ import annotations

import dataclasses

import pytest

from spadeopt.codegen.render import generate
from spadeopt.deploy.checkpoint_store import CheckpointStore
from spadeopt.optimize.strategies import plan_for
from spadeopt.orchestrate.build_local import build_and_run
from spadeopt.plan.plan import make_plan
from tests.apps.ckpt import ckpt
from tests.checkpoint.test_replan_resume import REF, SINKS, _stopped_after_checkpoints, resumed

REST = ["both", "win", "avg", "means", "cnt", "counts", "run", "runs"]


@pytest.mark.slow
def test_a_pe_with_a_source_and_input_links_resumes_with_the_failure_free_answer(tmp_path):
    g = ckpt.build({"n": 120_000, "spin_us": 2000})
    ref = build_and_run(g, plan_for(g, "all"), workdir=tmp_path / "ref", app_ref=REF).dir / "out"
    plan = dataclasses.replace(make_plan(g, "all", [["ra"], ["rb", *REST]], [0, 0], 1, 2, honours=frozenset()),
                               checkpoints=True)
    a = generate(g, plan, tmp_path / "a", REF)
    b = generate(g, plan, tmp_path / "b", REF)
    store = CheckpointStore(tmp_path / "chk", keep=2)
    _stopped_after_checkpoints(tmp_path, a, store, 1)
    chk = store.latest(b.deploy)
    out = resumed(tmp_path, b, store, chk)
    differ = [n for n in SINKS if (out / f"{n}.jsonl").read_bytes() != (ref / f"{n}.jsonl").read_bytes()]
    assert not differ, f"checkpoint {chk.id}: sinks {differ} differ from the failure-free run's"
