"""Issue 29 item 4: checkpointed runs are exactly once end to end on the real broker.

* A broker source's checkpointed position is the last entry ID it passed on per stream
  key, and a restore reopens it just after those IDs: right also when the source started
  at the stream's end (``start="end"``) or when entries before it were trimmed, where a
  replay by count is wrong.
* The Redis sink of a checkpointing run appends each checkpoint's records and a marker
  of the checkpoint id in one MULTI/EXEC once the checkpoint is complete; a checkpoint id
  already marked is skipped, so a replay after a restart never appends twice.
* End to end: a keyed app from a broker stream to two broker streams, checkpoints every
  second, three PEs killed with SIGKILL in turn (``test_recovery.run_with_kills``, no
  JVM): the output streams hold exactly a failure-free run's records.

Every test talks to the project's broker (``make broker``); none starts Spark.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from types import SimpleNamespace

import pytest

from spadeopt.codegen.render import generate
from spadeopt.connectors import redis_sink, redis_source
from spadeopt.connectors.redis_stream_sink import MARKER_SUFFIX, RedisStreamSink
from spadeopt.connectors.redis_streams import RedisStreamSource
from spadeopt.optimize.strategies import plan_for
from spadeopt.orchestrate.build_local import build_and_run
from spadeopt.runtime.barrier_alignment import Checkpointer
from spadeopt.runtime.checkpoint_codec import decode_state
from tests.checkpoint.broker_app import brokerck, feed, readings
from tests.checkpoint.test_recovery import run_with_kills

REF = "tests/checkpoint/broker_app.py"


def _sink(key: str) -> RedisStreamSink:
    s = RedisStreamSink(name="out", names=["i"], types=["int"], **dict(redis_sink(key).args))
    s.open()
    return s


def _values(client, key: str) -> list:
    return [json.loads(f[b"value"]) for _, f in client.xrange(key)]


def _staged(key: str, lineage: str = "L1", run: str = "R1") -> RedisStreamSink:
    s = _sink(key)
    s.stage("pe0/out", lineage, run)
    return s


def _replay(key: str, *, lineage: str = "L1") -> None:
    """A run that commits checkpoint 1, dies, and is restored from checkpoint 1 (whose
    part holds epoch 1: its completion may not have reached the PE) by another attempt,
    which commits checkpoint 2 and ends."""
    first = _staged(key, lineage)
    first.write([(0,), (1,)])
    part = first.prepare(1)  # what checkpoint 1's part holds
    first.commit(1)
    first.write([(2,)])  # epoch 2 is never committed: the PE dies
    del first
    again = _staged(key, lineage)  # the restarted PE
    again.recover(part)
    again.commit(1)  # the restored checkpoint is complete: committed (again) at once
    again.write([(2,), (3,)])
    again.prepare(2)
    again.commit(2)
    again.write([(4,)])
    again.close()  # the run's tail


def test_a_replayed_checkpoint_id_is_not_appended_twice(redis_client, keyspace):
    key = f"{keyspace}:out"
    _replay(key)
    assert _values(redis_client, key) == [{"i": i} for i in range(5)]
    marker = json.loads(redis_client.hget(key + MARKER_SUFFIX, "pe0/out"))
    assert marker["id"] == 2 and marker["end"] is True and marker["lineage"] == "L1"

    # a restart of the same run after its output ended appends nothing
    late = _staged(key)
    late.recover([[2, [late._entry((2,)), late._entry((3,))]]])
    late.commit(2)
    late.write([(4,)])
    late.close()
    assert _values(redis_client, key) == [{"i": i} for i in range(5)]
    assert late.report()["skipped"] == 1

    # a new checkpoint lineage (a fresh run into the same stream) is not held back
    _replay(key, lineage="L2")
    assert _values(redis_client, key) == [{"i": i} for i in range(5)] * 2


def test_the_replay_test_fails_without_the_marker(redis_client, keyspace, monkeypatch):
    """The check above can fail: with the marker ignored, the replay appends twice."""
    monkeypatch.setattr(RedisStreamSink, "_marker", lambda self, raw: {"id": 0, "run": None, "end": False})
    key = f"{keyspace}:out"
    _replay(key)
    assert _values(redis_client, key) != [{"i": i} for i in range(5)]
    assert _values(redis_client, key)[:4] == [{"i": 0}, {"i": 1}, {"i": 0}, {"i": 1}]


def test_a_transaction_writes_entries_and_marker_together(redis_client, keyspace):
    """A commit whose entries the server refuses (the key is not a stream) raises; the
    sink does not write anything without the marker or the other way round unnoticed."""
    key = f"{keyspace}:out"
    redis_client.set(key, "not a stream")
    s = _staged(key)
    s.write([(1,)])
    s.prepare(1)
    with pytest.raises(Exception, match="refused checkpoint 1|WRONGTYPE"):
        s.commit(1)


def test_without_checkpoints_the_sink_writes_at_once(redis_client, keyspace):
    key = f"{keyspace}:out"
    s = _sink(key)
    s.write([(7,), (8,)])
    assert _values(redis_client, key) == [{"i": 7}, {"i": 8}]  # before any close
    s.close()
    assert not redis_client.exists(key + MARKER_SUFFIX)


def _source(key: str, **kw) -> RedisStreamSource:
    return RedisStreamSource(name="events", schema=[["i", "int"]], **dict(redis_source(key, **kw).args))


def test_a_source_resumes_after_its_last_entry_id_from_the_streams_end_and_after_trimming(redis_client, keyspace):
    key = f"{keyspace}:in"
    for i in range(5):  # before the source opens: start="end" never reads them
        redis_client.xadd(key, {"value": json.dumps({"i": -i})})
    src = _source(key, start="end", count=8)
    src.open()
    for i in range(6):
        redis_client.xadd(key, {"value": json.dumps({"i": i})})
    assert src.read(4) == [(0,), (1,), (2,), (3,)]
    state = src.resume_state()
    assert state["read"] == 4 and state["ids"][key] == redis_client.xrange(key)[8][0].decode()
    src.close()
    redis_client.xtrim(key, minid=state["ids"][key])  # consumed entries trimmed away
    for i in range(6, 10):
        redis_client.xadd(key, {"value": json.dumps({"i": i})})
    again = _source(key, start="end", count=8)
    again.resume(json.loads(json.dumps(state)))  # as a checkpoint stores it
    again.open()
    got = []
    while (batch := again.read(3)) is not None:
        got += batch
    assert got == [(4,), (5,), (6,), (7,)]  # after the last ID; count=8 counts the 4 before
    again.close()
    with pytest.raises(ValueError, match="not a position"):
        _source(key).resume({"ids": {"other": "1-0"}, "read": 0})


def test_the_checkpointed_position_is_the_last_entry_passed_on_not_the_last_read(redis_client, keyspace):
    """A live source holds a partial batch (``--max-batch-delay``): a barrier while it
    holds one records the entry ID of the last record *passed on*; a restore reads the
    held records again (they reach the operators once)."""
    key = f"{keyspace}:in"
    for i in range(8):
        redis_client.xadd(key, {"value": json.dumps({"i": i})})
    ids = [eid.decode() for eid, _ in redis_client.xrange(key)]
    rt = SimpleNamespace(pe_id="pe0", sources={"events": None}, sinks={}, states={})
    ck = Checkpointer(rt, None)
    src = ck.track("events", _source(key))
    src.open()
    assert src.read(3) == [(0,), (1,), (2,)]
    ck.emitted("events", 3)  # passed on
    assert src.read(2) == [(3,), (4,)]  # held: no operator has seen them
    doc = decode_state(ck.take(1)[0])
    assert doc["sources"]["events"] == {"ids": {key: ids[2]}, "read": 3}
    ck.emitted("events", 2)
    assert decode_state(ck.take(2)[0])["sources"]["events"]["ids"] == {key: ids[4]}
    src.close()

    # restored from checkpoint 1: the held records come again
    ck2 = Checkpointer(SimpleNamespace(pe_id="pe0", sources={"events": None}, sinks={}, states={}), None)
    ck2.rewind = {"events": doc["sources"]["events"]}
    assert decode_state(ck2.take(2)[0])["sources"]["events"] == doc["sources"]["events"]  # not reopened yet
    again = ck2.track("events", _source(key))
    again.open()
    assert again.read(10) == [(i,) for i in range(3, 8)]
    again.close()


def test_a_consumer_group_source_resumes_by_setting_the_groups_id(redis_client, keyspace):
    key = f"{keyspace}:in"
    for i in range(6):
        redis_client.xadd(key, {"value": json.dumps({"i": i})})
    src = _source(key, group="g", consumer="c1")
    src.open()
    assert src.read(2) == [(0,), (1,)]
    state = src.resume_state()
    assert src.read(2) == [(2,), (3,)]  # read (delivered to the group) after the checkpoint: lost with the PE
    src.close()
    again = _source(key, group="g", consumer="c1")
    again.resume(state)
    again.open()
    assert again.read(10) == [(i,) for i in range(2, 6)]
    again.close()


# ---- end to end: kill -9 during a broker -> app -> broker run -------------------------------

N = 3000


def _streams(client, prefix: str) -> dict[str, list]:
    return {s: _values(client, f"{prefix}:{s}") for s in ("means", "runs")}


@pytest.mark.slow
def test_kill_three_times_the_broker_streams_equal_a_failure_free_run(redis_client, keyspace, tmp_path):
    records = readings(N)
    # the failure-free answer: the same records, read from the beginning, no checkpoints
    feed(redis_client, f"{keyspace}:ref-in", records)
    g = brokerck.build({"input": f"{keyspace}:ref-in", "out": f"{keyspace}:ref", "count": N})
    build_and_run(g, plan_for(g, "all"), workdir=tmp_path / "ref", app_ref=REF)
    want = _streams(redis_client, f"{keyspace}:ref")
    per_key: dict[str, int] = {}
    for r in records:
        per_key[r["k"]] = per_key.get(r["k"], 0) + 1
    assert len(want["means"]) == 75 and len(want["runs"]) == sum(c // 20 for c in per_key.values())

    # the checkpointed run reads a live feed from the stream's end ('$'): only entries
    # added after it opened, so a restore must seek by entry ID (a replay by count
    # would start at the end again and lose them)
    key = f"{keyspace}:in"
    g = brokerck.build({"input": key, "out": f"{keyspace}:ck", "count": N, "start": "end", "spin_us": 1500})
    b = generate(g, dataclasses.replace(plan_for(g, "manual"), checkpoints=True), tmp_path / "build", REF)
    assert len(b.deploy.pes) == 3
    kills = threading.Semaphore(0)
    stop = threading.Event()

    def feeder():
        # the source opens once its PE runs (its lag is reported): feed from then on,
        # 80 % paced, the rest once the three kills have landed
        progress = tmp_path / "ck" / "progress" / "pe0.json"
        while not stop.is_set():
            try:
                if "events" in json.loads(progress.read_text()).get("lag", {}):
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.05)
        head = N * 8 // 10
        for i in range(0, head, 50):
            if stop.is_set():
                return
            feed(redis_client, key, records[i:i + 50])
            time.sleep(0.1)
        deadline = time.time() + 40
        for _ in range(3):
            kills.acquire(timeout=max(0.0, deadline - time.time()))
        feed(redis_client, key, records[head:])

    t = threading.Thread(target=feeder, daemon=True)
    t.start()
    try:
        _, restarts, times = run_with_kills(tmp_path / "ck", b, 3, 1.0, settings={"stall_timeout": 60},
                                            killed_hook=lambda k: kills.release())  # lost entries: a stall
    finally:
        stop.set()
        t.join(5)
    assert len(restarts) == 3 and all(r is not None for r in restarts), restarts
    got = _streams(redis_client, f"{keyspace}:ck")
    for s in ("means", "runs"):
        assert len(got[s]) == len(want[s]), (s, len(got[s]), len(want[s]))  # none lost, none twice
        assert got[s] == want[s], s
    markers = {k.decode(): json.loads(v) for k, v in redis_client.hgetall(f"{keyspace}:ck:runs{MARKER_SUFFIX}").items()}
    assert list(markers) == ["pe2/runs"] and markers["pe2/runs"]["end"] is True
    recovery = [(round(x["running"] - x["killed"], 2), round(x["output"] - x["killed"], 2) if x["output"] else None)
                for x in times]
    print(f"\nrestored checkpoints {restarts}; kill -> every PE up, kill -> first new output (s): {recovery}")
