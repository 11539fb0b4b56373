"""``spadeopt run APP --adaptive`` on a live feed that steps (issue 39's first check).

A Redis feed runs at a rate one PE handles, then steps to one it cannot. Phase 1 (the
app's FALL plan, the region at width 1) keeps up at first: its lag stays flat and its PE
well under MaxFrac, so no switch. After the step its lag climbs and its PE saturates; the
driver sees it in the live metrics (``adaptive.lag.LagWatch`` or ``SaturatedWatch``),
stops at the next checkpoint, re-plans with FATM and resumes with the region wider, each
channel's source copy after its own stream keys' entry IDs (record 068). The run must switch after the step, not before, and read every entry: per
key, its sink holds exactly the rows of a static run over the same entries, in order.
Real broker, real Spark in local mode, real PEs.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from spadeopt.bench.stepfeed import feed
from tests.cli.clitools import cli
from tests.rows import by_key

APP = "spadeopt.bench.stepfeed:stepfeed"
LOW, LOW_S, HIGH, HIGH_S = 150, 10.0, 1500, 12.0  # records/s and seconds of each step
SPIN_US = 1000  # CPU per record: one PE handles under 1,000 a second, two (after the switch) under 2,000


def _as_a_static_run(tmp_path, params, total: int) -> None:
    """The adaptive run's sink holds every one of the ``total`` entries, per key exactly the
    rows of a static ``--fusion all`` run over the same entries (``bounded=1``)."""
    ref = cli("run", APP, "--fusion", "all", *params, "-p", "bounded=1", "--out", tmp_path / "ref",
              "--build-dir", tmp_path / "rb")
    assert ref.returncode == 0, ref.stderr
    rows = [json.loads(line) for line in (tmp_path / "out" / "out.jsonl").read_text().splitlines()]
    want = [json.loads(line) for line in (tmp_path / "ref" / "out.jsonl").read_text().splitlines()]
    assert len(want) == total and len(rows) == total, (len(rows), len(want), total)
    assert by_key(rows, "k") == by_key(want, "k")


@pytest.mark.spark
def test_a_feed_that_steps_is_replanned_after_the_step_with_every_answer(redis_client, keyspace, tmp_path):
    params = ["-p", f"prefix={keyspace}", "-p", f"spin_us={SPIN_US}"]
    steps: dict[str, float] = {}
    up = tmp_path / "work" / "phase1" / "build" / "progress"

    def feeder() -> None:  # LOW until phase 1 runs and LOW_S more (past --adapt-after), then HIGH
        n, give_up = 0, time.time() + 120
        while not any(up.glob("pe*.json")) and time.time() < give_up:
            n = feed(redis_client, keyspace, n, LOW // 5, LOW)
        n = feed(redis_client, keyspace, n, int(LOW * LOW_S), LOW)
        steps["t_step"] = time.time()
        steps["total"] = feed(redis_client, keyspace, n, int(HIGH * HIGH_S), HIGH)

    th = threading.Thread(target=feeder, daemon=True)
    th.start()
    got = cli("run", APP, "--adaptive", "--adapt-after", "2", "--checkpoint-interval", "0.5", "--duration", "70",
              *params, "--out", tmp_path / "out", "--json", tmp_path / "r.json", "--build-dir", tmp_path / "work")
    th.join(timeout=60)
    assert got.returncode == 0, got.stderr
    total = steps["total"]
    sw = json.loads((tmp_path / "r.json").read_text())["adaptive"]
    assert sw["switched"] and sw["trigger"], (sw, got.stdout[-3000:])
    assert sw["trigger"]["at"] > steps["t_step"], (sw["trigger"], steps)  # not while phase 1 kept up
    assert sw["after"]["widths"].get("live", 1) > 1, sw
    if sw["trigger"]["rule"] == "lag":  # the step shows first as a growing lag or as a PE above MaxFrac
        assert sw["trigger"]["grew_by"] >= 500 and "trigger: the live sources' lag grew by" in got.stdout, sw
    else:
        assert sw["trigger"]["rule"] == "max_frac" and sw["trigger"]["busiest_cpu"] >= 0.5, sw
        assert f"trigger: {sw['trigger']['busiest_pe']} used at least" in got.stdout, got.stdout[-3000:]
    _as_a_static_run(tmp_path, params, total)


def _narrow_phase_runs(work) -> bool:
    """A phase after the first switch runs with every region at width 1 (a switch scaled down)."""
    for build in work.glob("phase*/build"):
        k = int(build.parent.name.removeprefix("phase"))
        plan = build / "plan.json"
        if k >= 3 and plan.exists() and any((build / "progress").glob("pe*.json")):
            if all(r["width"] == 1 for r in json.loads(plan.read_text())["regions"]):
                return True
    return False


@pytest.mark.spark
def test_a_feed_that_steps_up_down_and_up_is_scaled_up_down_and_up_with_every_answer(redis_client, keyspace,
                                                                                      tmp_path):
    """Continuous monitoring (record 073): after the first switch every phase keeps watching.
    When the feed drops back, the wide plan idles and the run scales down to a 1-core plan
    (the region at width 1, each stream key's entry ID moved from the copy that read it);
    when the feed steps up again, it widens again. Every entry is read once, in order per key."""
    params = ["-p", f"prefix={keyspace}", "-p", f"spin_us={SPIN_US}"]
    steps: dict[str, float] = {}
    work = tmp_path / "work"
    up = work / "phase1" / "build" / "progress"

    def feeder() -> None:
        n, give_up = 0, time.time() + 120
        while not any(up.glob("pe*.json")) and time.time() < give_up:
            n = feed(redis_client, keyspace, n, LOW // 5, LOW)
        n = feed(redis_client, keyspace, n, int(LOW * LOW_S), LOW)
        n = feed(redis_client, keyspace, n, int(HIGH * HIGH_S), HIGH)  # up
        give_up = time.time() + 90
        while not _narrow_phase_runs(work) and time.time() < give_up:  # low until the run scaled down
            n = feed(redis_client, keyspace, n, LOW // 5, LOW)
        n = feed(redis_client, keyspace, n, int(LOW * 4), LOW)
        steps["t_second_step"] = time.time()
        steps["total"] = feed(redis_client, keyspace, n, int(HIGH * HIGH_S), HIGH)  # up again

    th = threading.Thread(target=feeder, daemon=True)
    th.start()
    got = cli("run", APP, "--adaptive", "--adapt-after", "2", "--checkpoint-interval", "0.5", "--duration", "150",
              "--max-switches", "5", *params, "--out", tmp_path / "out", "--json", tmp_path / "r.json",
              "--build-dir", work)
    th.join(timeout=60)
    assert got.returncode == 0, got.stderr
    sw = json.loads((tmp_path / "r.json").read_text())["adaptive"]
    every = [sw, *sw.get("later", [])]
    moved = [(s["direction"], s["after"]["widths"].get("live", 1)) for s in every
             if s["switched"] and s["predicted"].get("chosen") != "start"]
    assert [d for d, _ in moved[:3]] == ["up", "down", "up"], (moved, got.stdout[-4000:])
    assert moved[0][1] > 1 and moved[1][1] == 1 and moved[2][1] > 1, moved
    down = next(s for s in every if s["direction"] == "down")
    assert down["trigger"]["busiest_cpu"] < 0.4 and down["after"]["cores"] < down["before"]["cores"], down
    assert "scaling down" in down["reason"] and "(scaling down)" in got.stdout
    third = [s for s in every if s["switched"] and s["predicted"].get("chosen") != "start"][2]
    assert third["trigger"]["at"] > steps["t_second_step"], (third["trigger"], steps)
    total = steps["total"]
    _as_a_static_run(tmp_path, params, total)
