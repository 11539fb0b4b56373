"""One calibration point measured for real (``refine.calibrate.measure``): the calibration
app built by ``orchestrate.build_local.build_and_run`` (NONE, instrumented) and run on local
node agents, its PE and operator CPU read back, without Spark."""

from __future__ import annotations

import pytest

from spadeopt.refine.calibrate import FORWARDERS, measure


@pytest.mark.slow
def test_one_point_is_built_run_and_measured(tmp_path):
    p = measure(20_000, 96, 0.4, tmp_path / "p")
    assert p.forwarders == FORWARDERS and p.size == 96 and p.target_rate == 20_000
    assert p.tuples > 0 and p.rate > 0 and p.measured_size > 0
    assert p.pe_cpu_s > p.operator_cpu_s > 0
    assert set(p.pe_comm_s) == {"send", "forward", "receive"}
    assert (tmp_path / "p" / "build" / "deploy.json").exists()  # the build the runner ran
