"""``spadeopt optimize --checkpoints`` plans no cycle of PEs (record 074): on bargain_logical
FATM's plan without the flag has one (pe0 -> pe1 -> pe0, refused by a run with
checkpoints); with it, the build runs with ``--checkpoint-interval`` and takes checkpoints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spadeopt.deploy.checkpointed_run import pe_cycle
from spadeopt.plan.artefacts import load_deploy
from tests.cli.clitools import cli

APP = "apps/bargain_logical.py"
PROFILE = Path("tests/optimize/data/bargain_logical_profile.json")
CALIBRATION = Path("profiles/calibration/vm.json")


def _optimize(out: Path, *extra: str):
    score = json.loads(CALIBRATION.read_text())["cpu_score"]["value"]  # no MIPS scaling: the same plan anywhere
    r = cli("optimize", APP, "--profile", PROFILE, "--calibration", CALIBRATION, "--cpu-score", str(score),
            "-p", "tuples=200000", "-o", out, *extra)
    assert r.returncode == 0, r.stderr
    return load_deploy(out)


@pytest.mark.spark
def test_optimize_with_checkpoints_gives_a_build_that_checkpoints(tmp_path):
    plain = _optimize(tmp_path / "plain")
    assert pe_cycle(plain) is not None  # what the flag is for (tests/checkpoint/test_cycle.py: such a run is refused)

    deploy = _optimize(tmp_path / "ck", "--checkpoints")
    assert deploy.checkpoints and pe_cycle(deploy) is None and len(deploy.pes) >= 2
    explain = json.loads((tmp_path / "ck" / "explain.json").read_text())
    assert explain["acyclic"] is True and explain["inputs"]["checkpoints"] is True
    r = cli("run", tmp_path / "ck", "--checkpoint-interval", "0.2", "--checkpoint-dir", tmp_path / "chk",
            "--json", tmp_path / "res.json")
    assert r.returncode == 0, r.stderr
    res = json.loads((tmp_path / "res.json").read_text())
    assert res["tuples"] == 200000 and res["checkpoints"]["checkpoints"] >= 1, res.get("checkpoints")
    assert res["sinks"] == {"bargains": 20015, "hot_sink": 2934}  # the app's, under every plan
