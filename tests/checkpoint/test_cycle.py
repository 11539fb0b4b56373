"""Issue 29: a plan whose PEs form a cycle cannot take aligned checkpoints (each PE on
the cycle would wait for the other's barrier: bargain under FMAN stalled until the stall
timeout before this check). ``spadeopt run --checkpoint-interval`` refuses it before
Spark starts, naming the cycle; acyclic plans of the same app pass the check."""

from __future__ import annotations

import dataclasses

import pytest

from spadeopt.api import load_graph
from spadeopt.codegen.render import generate
from spadeopt.deploy import checkpointed_run as checkpoints
from spadeopt.deploy.checkpointed_run import CheckpointOptions, pe_cycle
from spadeopt.deploy.options import RunOptions
from spadeopt.errors import UsageError
from spadeopt.optimize.strategies import plan_for


def test_a_cycle_of_pes_is_refused_before_spark_starts(tmp_path):
    g, ref = load_graph("apps/bargain.py", {})
    b = generate(g, dataclasses.replace(plan_for(g, "manual"), checkpoints=True), tmp_path / "b", ref)
    cycle = pe_cycle(b.deploy)
    assert cycle and cycle[0] == cycle[-1] and len(cycle) >= 3, cycle
    with pytest.raises(UsageError, match=r"PEs form a cycle \(pe\d+ -> pe\d+ .*-> pe\d+\)"):
        checkpoints.run(b.directory, RunOptions(), CheckpointOptions(1.0, tmp_path / "chk"))
    assert not (tmp_path / "chk").exists()
    assert pe_cycle(generate(g, plan_for(g, "all"), tmp_path / "all", ref).deploy) is None
