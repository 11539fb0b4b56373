"""A cycle of PEs does not deadlock (runtime.pe_inputs.InputLoop.wait_to_send).

tests/apps/skewed_region.py sends every tuple to channel 1 of a keyed region. The plan
holds the split, channel 0 and the merge in one PE and channel 1 in another: the first
PE's one thread sends to the second and takes its results back. With 64-tuple batches
and 32-frame queues both queues filled and each PE blocked in a send to the other (the
run stalled at 80 k of 2 M tuples before the fix). Now the first PE keeps taking the
frames of its cyclic input while it waits, and the answer is FALL's, byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.clitools import cli

pytestmark = pytest.mark.spark

APP = "tests/apps/skewed_region.py"


def test_a_split_and_merge_in_one_pe_with_a_channel_elsewhere_runs_through(tmp_path: Path):
    ref = cli("run", APP, "--fusion", "all", "--out", tmp_path / "ref", "--build-dir", tmp_path / "ball")
    assert ref.returncode == 0, ref.stderr
    none = cli("build", APP, "--fusion", "none", "--width", "f=2", "-o", tmp_path / "bnone")
    assert none.returncode == 0, none.stderr
    plan = json.loads((tmp_path / "bnone" / "plan.json").read_text())
    plan["strategy"] = "cycle"
    plan["pes"] = [{"pe": "pe0", "node": 0, "operators": ["src"]},
                   {"pe": "pe1", "node": 0, "operators": ["f__split", "f__0", "g__0", "f__merge", "out"]},
                   {"pe": "pe2", "node": 0, "operators": ["f__1", "g__1"]}]
    for r in plan["regions"]:
        for k in ("channels", "merge", "split"):
            r.pop(k, None)
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    got = cli("run", APP, "--fusion", tmp_path / "plan.json", "--batch-size", "64", "--stall-timeout", "60",
              "--out", tmp_path / "out", "--build-dir", tmp_path / "bcycle", "--json", tmp_path / "r.json")
    assert got.returncode == 0, got.stderr
    deploy = json.loads((tmp_path / "bcycle" / "deploy.json").read_text())
    assert {ln["src_pe"] for ln in deploy["links"] if ln["dst_pe"] == "pe1"} >= {"pe0", "pe2"}  # a cycle
    assert (tmp_path / "out" / "out.jsonl").read_bytes() == (tmp_path / "ref" / "out.jsonl").read_bytes()
