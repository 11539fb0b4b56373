"""Fission on a real Spark: every width gives byte-identical sink files under every
strategy (local[2]); channels spread over both nodes of a local-cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spadeopt import api
from spadeopt.deploy.options import RunOptions
from spadeopt.errors import RunError

pytestmark = pytest.mark.spark


def _sink_bytes(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.glob("*.jsonl"))}


CASES = [
    # peer: the source leads the region (splittable, 100 records per split: 30 splits)
    ("apps/peer.py", "chain", {"tuples": "3000", "n": "4", "sink": "file", "split": "100"}, (1, 2, 3, 4)),
    # a source-led dynamic region: a filter that empties whole splits on some channels
    ("tests/apps/splits.py", "reg", {"tuples": "3000", "split": "64"}, (1, 3)),
    ("apps/bargain_logical.py", "symbols", {"tuples": "3000"}, (1, 2)),
    ("apps/chain.py", "ops", {"n": "4", "tuples": "3000", "sink": "file", "work": "2"}, (1, 3)),
]


@pytest.mark.parametrize("app,region,params,widths", CASES, ids=[c[0] for c in CASES])
def test_every_width_and_strategy_gives_identical_sink_files(app, region, params, widths, tmp_path):
    outputs = {}
    for fusion in ("none", "all", "manual"):
        for w in widths:
            tag = f"{fusion}-{w}"
            res = api.run(app, fusion, params, build_dir=tmp_path / f"b-{tag}",
                          widths={region: w}, options=RunOptions(out=tmp_path / tag))
            assert res.tuples == 3000
            plan = json.loads((tmp_path / f"b-{tag}" / "plan.json").read_text())
            assert plan["regions"][0]["width"] == w
            if w > 1:
                assert len(plan["regions"][0]["channels"]) == w
            outputs[tag] = _sink_bytes(tmp_path / tag)
    first = outputs["none-1"]
    assert first and all(first.values()), "sinks must write something"
    for tag, got in outputs.items():
        assert got == first, tag


def test_bargain_logical_gives_bargains_answers(tmp_path):
    """Same bargains, line for line, as the hand-built 22-group app; same hot rows."""
    api.run("apps/bargain.py", "all", {"tuples": "3000"}, build_dir=tmp_path / "bh", options=RunOptions(out=tmp_path / "hand"))
    api.run("apps/bargain_logical.py", "manual", {"tuples": "3000"},
            build_dir=tmp_path / "bl", options=RunOptions(out=tmp_path / "logical"))
    hand, logical = _sink_bytes(tmp_path / "hand"), _sink_bytes(tmp_path / "logical")
    assert hand["bargains.jsonl"] == logical["bargains.jsonl"] and hand["bargains.jsonl"]

    def rows(b: bytes) -> list[str]:
        return sorted(json.dumps(json.loads(x), sort_keys=True) for x in b.decode().splitlines())

    assert rows(hand["hot.jsonl"]) == rows(logical["hot_sink.jsonl"])


def test_a_splittable_source_that_breaks_its_contract_stops_the_job(tmp_path):
    """A short split that is not a copy's last would reorder the merge: the run fails naming
    the PE, the source copy and the broken contract, and leaves no sink file."""
    with pytest.raises(RunError) as exc:
        api.run("tests/apps/splits.py", "none", {"case": "liar", "tuples": "40"},
                build_dir=tmp_path / "b", widths={"reg": 2}, options=RunOptions(out=tmp_path / "o"))
    msg = str(exc.value)
    assert "src__1" in msg and "broke its contract" in msg and "split 0 of 1 of 2" in msg, msg
    assert not list((tmp_path / "o").glob("*.jsonl"))


def test_channels_on_both_nodes_of_a_local_cluster(tmp_path):
    params = {"tuples": "3000", "n": "4", "sink": "file", "split": "100"}
    api.run("apps/peer.py", "all", params, build_dir=tmp_path / "bref", options=RunOptions(out=tmp_path / "ref"))
    res = api.run("apps/peer.py", "manual", params, nodes=2, cores=1, build_dir=tmp_path / "btwo", widths={"chain": 2}, options=RunOptions(master="local-cluster[2,1,1024]", out=tmp_path / "two"))
    plan = json.loads((tmp_path / "btwo" / "plan.json").read_text())
    chans = plan["regions"][0]["channels"]
    assert {chans[0]["f0@0"]["node"], chans[1]["f0@1"]["node"]} == {0, 1}
    assert {chans[0]["src@0"]["node"], chans[1]["src@1"]["node"]} == {0, 1}  # each node reads its splits
    assert res.nodes == 2
    assert _sink_bytes(tmp_path / "two") == _sink_bytes(tmp_path / "ref")


@pytest.mark.parametrize("case", ["count", "count_split"])
def test_a_counting_sink_in_a_region_counts_what_width_one_counts(case, tmp_path):
    """A counting sink replicated with its region (no merge): the copies' counts add up to
    the width-1 count under every strategy, and fission pulses are not counted."""
    counts = {}
    for fusion, w in (("all", 1), ("none", 3), ("manual", 2), ("all", 3)):
        res = api.run("tests/apps/splits.py", fusion, {"case": case, "tuples": "3000", "split": "64"},
                      build_dir=tmp_path / f"b-{fusion}-{w}", widths={"reg": w})
        counts[(fusion, w)] = res.sinks
    assert counts[("all", 1)] == {"sink": 1600}  # the filter keeps 1600 of 3000 (see the app)
    assert all(c == counts[("all", 1)] for c in counts.values()), counts


def test_a_reused_cluster_session_serves_a_node_that_joins_later(tmp_path):
    """One session (same master, cores, conf) runs a 1-node build, then a 2-node one: the
    second executor, on its first task, fetches every bundle the context ever shipped, so
    earlier bundles must still be served (found by `compare` on local-cluster: the
    profile ran on one node, FATM's plan on two, and failed with "Stream ... was not found")."""
    params = {"tuples": "2000", "n": "2", "sink": "file", "split": "100"}
    master = "local-cluster[2,1,1024]"
    one = api.run("apps/peer.py", "all", params, nodes=1, cores=1,
                  build_dir=tmp_path / "b1", options=RunOptions(master=master, out=tmp_path / "one"))
    two = api.run("apps/peer.py", "manual", params, nodes=2, cores=1,
                  build_dir=tmp_path / "b2", widths={"chain": 2}, options=RunOptions(master=master, out=tmp_path / "two"))
    assert one.nodes_used == 1 and two.nodes_used == 2
    assert _sink_bytes(tmp_path / "one") == _sink_bytes(tmp_path / "two")


@pytest.mark.spark
def test_a_stopped_static_region_led_by_a_source_ends_with_a_prefix(tmp_path):
    """``--duration`` ends the sources of a static region's two copies at different splits:
    the merge, which takes their blocks back in turn, holds blocks past the first one a
    copy never read. They are dropped (an error before: "tuples left after every channel
    ended"), so the sink is a prefix of the whole stream's."""
    from tests.cli.clitools import cli

    params = ["-p", "case=static", "-p", "tuples=100000"]
    full = cli("run", "tests/apps/splits.py", "--fusion", "all", *params, "--out", tmp_path / "full",
               "--build-dir", tmp_path / "bf")
    assert full.returncode == 0, full.stderr
    got = cli("run", "tests/apps/splits.py", "--fusion", "all", "--width", "reg=2", *params, "-p", "spin_us=300",
              "--duration", "2", "--out", tmp_path / "cut", "--build-dir", tmp_path / "bc")
    assert got.returncode == 0, got.stderr
    cut, whole = (tmp_path / "cut" / "sink.jsonl").read_bytes(), (tmp_path / "full" / "sink.jsonl").read_bytes()
    assert 0 < len(cut) < len(whole) and whole.startswith(cut)
