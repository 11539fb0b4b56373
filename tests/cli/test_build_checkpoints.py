"""``spadeopt build/optimize --checkpoints``: a build that can run with checkpoints, made
ahead of the run (no Spark here)."""

from __future__ import annotations

import json

from tests.cli.clitools import cli

APP = "tests/apps/ckpt.py"


def test_build_with_checkpoints_records_it_and_a_plain_build_is_refused_naming_the_flag(tmp_path):
    assert cli("build", APP, "--fusion", "all", "-o", tmp_path / "ck", "--checkpoints").returncode == 0
    assert json.loads((tmp_path / "ck" / "deploy.json").read_text()).get("checkpoints") is True
    assert "rt.state(" in (tmp_path / "ck" / "pe0.py").read_text()  # the operators register their state
    assert cli("build", APP, "--fusion", "all", "-o", tmp_path / "plain").returncode == 0
    r = cli("run", tmp_path / "plain", "--checkpoint-interval", "1", "--checkpoint-dir", tmp_path / "chk")
    assert r.returncode == 2 and "spadeopt build --checkpoints" in r.stderr, r.stderr
    assert not (tmp_path / "chk").exists()


def test_an_operator_that_cannot_be_checkpointed_is_refused_when_building(tmp_path):
    r = cli("build", APP, "-p", "nosnap=1", "-o", tmp_path / "b", "--checkpoints")
    assert r.returncode == 2 and "snapshot()" in r.stderr, r.stderr
    assert not (tmp_path / "b").exists() or not any((tmp_path / "b").iterdir())
