"""deploy.json's schema is one list (``plan.deployment.DEPLOY_FIELDS``): writing, reading
and checking all follow it."""

from __future__ import annotations

import dataclasses

import pytest

from spadeopt.errors import ArtefactError
from spadeopt.plan.artefacts import DEPLOY_RULES, check_deploy
from spadeopt.plan.deployment import (
    DEPLOY_FIELDS,
    DeployedPE,
    Deployment,
    RunSettings,
    SparkSettings,
)

PER_RUN = {"checkpoint", "source_limit"}  # set per run, never in a file, never checked from one


def _deployment(**settings) -> Deployment:
    return Deployment("a", "apps/a.py", "ab", "fused-all", 1, 2,
                      (DeployedPE("pe0", "pe0.py", 0, ("src", "sink"), {}, {}),), (),
                      SparkSettings("local[2]", {}, "spark-submit ..."), params={"n": 3},
                      streams=(("src.out", "sink.in"),), settings=RunSettings(**settings))


def test_every_field_of_the_record_is_in_the_one_list_and_every_rule_is_checked():
    keys = {f.key for f in DEPLOY_FIELDS}
    record = {f.name for f in dataclasses.fields(Deployment)} - {"settings"}
    settings = {f.name for f in dataclasses.fields(RunSettings)} - PER_RUN
    assert keys == record | settings
    assert {f.rule for f in DEPLOY_FIELDS} <= set(DEPLOY_RULES)


def test_what_is_written_is_read_back_and_passes_the_check():
    d = _deployment(hwm=8, duration=2.5)
    doc = d.to_json()
    assert doc["hwm"] == 8 and doc["duration"] == 2.5 and "batch_size" not in doc and "profile" not in doc
    assert "checkpoints" not in doc and dataclasses.replace(d, checkpoints=True).to_json()["checkpoints"] is True
    assert Deployment.from_json(check_deploy(doc, "x/deploy.json")) == d


def test_the_check_names_every_bad_field_it_reads():
    doc = _deployment().to_json()
    doc.update(hwm=0, params=[1], profile={"run_dir": "/tmp"})
    doc["pes"][0]["node"] = 5
    with pytest.raises(ArtefactError) as err:
        check_deploy(doc, "x/deploy.json")
    text = str(err.value)
    for field in ("hwm = 0", "params = [1]", "profile = ", "pes[0].node = 5"):
        assert field in text, text
