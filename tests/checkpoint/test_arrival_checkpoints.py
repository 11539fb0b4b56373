"""Issue 29: checkpoints of a parallel region led by a partitioned Redis Streams source
(ordering ``arrival``: each channel's copy of the source reads its own stream keys, the
merge passes the channels' batches on as they come, with no sequence numbers).

* A checkpointing build of such a region builds, and says what it guarantees: a restart
  replays each channel from its own position, so the interleaving across customers may
  differ from the failed run's; the exactly-once guarantee after the merge is per
  customer (the source's ``partitioned_by``). The merge holds no state.
* Each channel's source copy checkpoints the last entry ID it passed on for its own keys
  only (a partial batch it holds is not in it), and a restore resumes each copy after its
  own IDs: per customer, what was passed on before plus what comes after is exactly the
  customer's orders, in order. A copy given another channel's position is refused.
* End to end (slow, no JVM, ``test_recovery.run_with_kills``): orders on 4 stream keys,
  a width-2 or width-4 region with a partitioned custom operator and a count window per
  customer, checkpoints every 0.5 s, a PE killed with SIGKILL after each of three new
  checkpoints (channels' PEs, the merge's, the Redis sink's; under ``--fusion all`` the
  one PE whose sources thread runs all four copies): per customer, the file sink and the
  Redis sink hold exactly a failure-free run's rows in its order, and overall the same
  multiset. It fails when the snapshot drops the source positions (rows doubled) or
  when a PE does not align the barrier on all its inputs (rows lost).
* The product path (spark): ``spadeopt run --checkpoint-interval`` says the guarantee,
  and after a kill -9 of the merge's PE every customer gets exactly the failure-free rows.

The tests that run or resume talk to the project's broker (``make broker``); only the
last starts Spark.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import threading
import time
from collections import Counter
from types import SimpleNamespace

import pytest

from spadeopt import App, count_window
from spadeopt.codegen.render import checkpoint_notes, generate, render_build
from spadeopt.connectors import redis_source
from spadeopt.connectors.redis_streams import RedisStreamSource
from spadeopt.optimize.strategies import plan_for
from spadeopt.orchestrate.build_local import build_and_run
from spadeopt.runtime.barrier_alignment import Checkpointer
from spadeopt.runtime.checkpoint_codec import CheckpointError, decode_state
from tests.checkpoint.arrival_app import SCHEMA, arrivalck, feed, orders, partition
from tests.checkpoint.test_recovery import run_with_kills
from tests.cli.clitools import cli
from tests.rows import by_customer

REF = "tests/checkpoint/arrival_app.py"
KEYS = 4


def _multiset(rows: list[dict]) -> Counter:
    return Counter(json.dumps(r, sort_keys=True) for r in rows)


def test_a_checkpointing_build_of_an_arrival_region_builds_and_says_the_guarantee_is_per_customer(tmp_path):
    res = cli("build", REF, "--fusion", "manual", "--checkpoints", "-o", tmp_path / "b")
    assert res.returncode == 0, res.stderr
    assert ("checkpoints: parallel region 'live' merges its channels by arrival: after a restart from a "
            "checkpoint the interleaving across customer values may differ from the failed run's") in res.stdout
    assert "are exactly once per customer: each customer value gets exactly the rows a failure-free run gives " \
           "it, in the same order, none lost or doubled" in res.stdout
    g = arrivalck.build({"width": 2})
    files = render_build(g, dataclasses.replace(plan_for(g, "manual"), checkpoints=True), REF)
    merge_pe = next(text for text in files.values() if "live__merge (fission_merge)" in text)
    assert "rt.state(" not in merge_pe  # the arrival merge forwards each batch: no state
    for c in (0, 1):  # each channel registers its own partitioned state
        chan = next(text for text in files.values() if f"#   orders__{c} (source)" in text)
        assert f'rt.state("seen__{c}"' in chan and f'rt.state("totals__{c}"' in chan
    plain = cli("build", REF, "--fusion", "manual", "-o", tmp_path / "p")
    assert plain.returncode == 0 and "checkpoints:" not in plain.stdout
    assert "after the merge keep" not in res.stdout
    # an operator after the merge keeping state across customers is named: its rows follow the interleaving
    tail = cli("build", REF, "-p", "tail=5", "--fusion", "manual", "--checkpoints", "-o", tmp_path / "t")
    assert tail.returncode == 0, tail.stderr
    assert "exactly once per customer" in tail.stdout
    assert ("; 'tail' after the merge keeps state across customer values, so its rows depend on the interleaving "
            "and may differ from a failure-free run's after a restart") in tail.stdout


@pytest.mark.parametrize(("key", "named"), [("customer", ""), ("n", "'again__0', 'again__1' after the merge keep")])
def test_a_region_after_the_merge_is_judged_by_its_operators_not_its_split_and_merge(key, named):
    """A second region after the arrival merge gives its operators' width-1 rows in its
    input's order: keyed on customer it keeps the guarantee per customer; keyed on another
    attribute its operators mix customers, and the note names them."""
    a = App("t2")
    o = a.source("orders", "order_id:int, customer:str, amount:float", connector=redis_source(
        [f"o:{k}" for k in range(KEYS)], until="end", partitioned_by=["customer"]))
    w = a.aggregate("totals", a.functor("paid", o, filter="amount > 0"), window=count_window(3), by=["customer"],
                    output={"customer": "last(customer)", "n:int": "count()"})
    a.sink("out", a.aggregate("again", w, window=count_window(2), by=[key],
                              output={"customer": "last(customer)", "n:int": "sum(n)"}))
    a.parallel("orders", "paid", "totals", width=2, name="r1")
    a.parallel("again", width=2, name="r2")
    g = a.build()
    (note,) = checkpoint_notes(g, dataclasses.replace(plan_for(g, "manual"), checkpoints=True))
    assert note.startswith("parallel region 'r1' merges its channels by arrival") and "per customer" in note
    assert "split" not in note and "r2__merge" not in note
    assert (named in note) if named else "after the merge keep" not in note


def _copy(prefix: str, part: int, parts: int = 2) -> RedisStreamSource:
    """Channel ``part``'s copy of the partitioned source (keys part, part + parts, ...)."""
    args = dict(redis_source([f"{prefix}:{k}" for k in range(KEYS)], until="end", partitioned_by=["customer"]).args)
    schema = [[a.strip() for a in f.split(":")] for f in SCHEMA.split(",")]
    return RedisStreamSource(name="orders", schema=schema, **args, part=part, parts=parts)


def _read_all(src) -> list[tuple]:
    got = []
    while (batch := src.read(16)) is not None:
        got += batch
    return got


def test_each_channel_copy_checkpoints_its_own_keys_and_resumes_after_them(redis_client, keyspace):
    records = orders(400)
    feed(redis_client, keyspace, records, KEYS)
    ids = {k: [eid.decode() for eid, _ in redis_client.xrange(f"{keyspace}:{k}")] for k in range(KEYS)}
    assert all(len(v) > 40 for v in ids.values())
    names = ("orders__0", "orders__1")  # both copies in one PE, as under --fusion all
    rt = SimpleNamespace(pe_id="pe0", sources=dict.fromkeys(names), sinks={}, states={})
    ck = Checkpointer(rt, None)
    copies = [ck.track(n, _copy(keyspace, c)) for c, n in enumerate(names)]
    for s in copies:
        s.open()
    passed = {n: [] for n in names}
    for _ in range(2):  # two batches passed on by each copy: 10 entries of each of its keys per batch
        for n, s in zip(names, copies, strict=True):
            batch = s.read(20)
            assert len(batch) == 20
            passed[n] += batch
            ck.emitted(n, len(batch))
    assert len(copies[0].read(20)) == 20  # read, held (a partial batch): not passed on
    doc = decode_state(ck.take(1)[0])["sources"]
    for c, n in enumerate(names):  # its own keys only, at the 20th entry of each: the last passed on
        own = (c, c + 2)
        assert doc[n]["ids"] == {f"{keyspace}:{k}": ids[k][19] for k in own}, n
        assert doc[n]["read"] == 40 and set(doc[n]["end"]) == {f"{keyspace}:{k}" for k in own}
    for s in copies:
        s.close()

    # a restart: each copy resumes after its own IDs; per customer, passed on + the rest = all, in order
    ck2 = Checkpointer(SimpleNamespace(pe_id="pe0", sources=dict.fromkeys(names), sinks={}, states={}), None)
    ck2.rewind = dict(doc)
    again = [ck2.track(n, _copy(keyspace, c)) for c, n in enumerate(names)]
    for s in again:
        s.open()
    rest = {n: _read_all(s) for n, s in zip(names, again, strict=True)}
    for c, n in enumerate(names):
        mine = [tuple(r.values()) for r in records if partition(r["customer"], KEYS) in (c, c + 2)]
        got = passed[n] + rest[n]
        assert sorted(got) == sorted(mine), n  # none lost (the held batch comes again), none twice
        for cust in {r[1] for r in mine}:
            assert [r for r in got if r[1] == cust] == [r for r in mine if r[1] == cust], (n, cust)

    # a copy restored from another channel's position: refused, naming the keys
    ck3 = Checkpointer(SimpleNamespace(pe_id="pe0", sources={"orders__1": None}, sinks={}, states={}), None)
    ck3.rewind = {"orders__1": doc["orders__0"]}
    with pytest.raises(CheckpointError, match=rf"PE pe0: source 'orders': .* is not a position of stream\(s\) "
                                              rf"{keyspace}:1, {keyspace}:3"):
        ck3.track("orders__1", _copy(keyspace, 1)).open()


N = 6000


def _stream(client, key: str) -> list[dict]:
    return [json.loads(f[b"value"]) for _, f in client.xrange(key)]


@pytest.mark.slow
@pytest.mark.parametrize(("fusion", "width", "victims"), [
    ("manual", 2, ["orders__0", "live__merge", "bus"]),  # a channel's PE, the merge's, the Redis sink's
    ("manual", 4, ["live__merge", "orders__1", "orders__3"]),  # the merge's (aligning four channels), two channels'
    ("all", 4, ["orders__0"] * 3),  # one PE: its sources thread takes the barrier between two batches of any copy
])
def test_kill_three_times_each_customer_gets_exactly_the_failure_free_rows(redis_client, keyspace, tmp_path,
                                                                           fusion, width, victims):
    """``victims``: the operators whose PEs are killed, in turn."""
    records = orders(N)
    feed(redis_client, f"{keyspace}:in", records, KEYS)
    # the failure-free answer: the same region over the same streams, no checkpoints, no kills
    g = arrivalck.build({"prefix": f"{keyspace}:in", "width": width, "bus": f"{keyspace}:ref"})
    widths = {"live": width}  # --fusion all alone makes the region width 1 (one PE)
    want = build_and_run(g, plan_for(g, fusion, widths=widths), workdir=tmp_path / "ref", app_ref=REF).sinks["out"]
    want_bus = _stream(redis_client, f"{keyspace}:ref")
    assert len(want) > 1500 and _multiset(want_bus) == _multiset(want)
    customers = by_customer(want)
    assert len(customers) == 30 and len({partition(c, KEYS) for c in customers}) == KEYS

    g = arrivalck.build({"prefix": f"{keyspace}:in", "width": width, "bus": f"{keyspace}:ck",
                         "spin_us": 30_000})
    b = generate(g, dataclasses.replace(plan_for(g, fusion, widths=widths), checkpoints=True), tmp_path / "build", REF)
    assert [(r.ordering, r.width) for r in b.plan.regions] == [("arrival", width)]
    pe_of = {op: pe.pe for pe in b.deploy.pes for op in pe.operators}
    victims = [pe_of[op] for op in victims]
    assert len(set(victims)) == min(3, len(b.deploy.pes)), victims
    assert b.notes and "exactly once per customer" in b.notes[0]
    out, restarts, times = run_with_kills(tmp_path / "ck", b, 3, 0.5, settings={"batch_size": 64, "stall_timeout": 60},
                                          victims=victims)
    assert len(restarts) == 3 and all(r is not None for r in restarts), restarts
    assert [t["victim"] for t in times] == victims
    got = [json.loads(line) for line in (out / "out.jsonl").read_text().splitlines()]
    got_bus = _stream(redis_client, f"{keyspace}:ck")
    for name, rows in (("out", got), ("bus", got_bus)):
        assert len(rows) == len(want), (name, len(rows), len(want))  # none lost, none twice
        assert _multiset(rows) == _multiset(want), name
        by = by_customer(rows)
        assert sorted(by) == sorted(customers), name
        for cust, expected in customers.items():  # each customer: the failure-free rows, in their order
            assert by[cust] == expected, (name, cust)
    print(f"\nwidth {width}: restored checkpoints {restarts}; outputs interleaved as the failure-free run: "
          f"{got == want}")


@pytest.mark.spark
@pytest.mark.slow
def test_spadeopt_run_on_spark_says_the_guarantee_and_a_killed_merge_pe_restarts_exactly_per_customer(
        redis_client, keyspace, tmp_path):
    """The product path: ``spadeopt run --checkpoint-interval`` on local Spark says the
    per-customer guarantee when it builds; the merge's PE is killed with SIGKILL after the
    first complete checkpoint, ``deploy.checkpointed_run.run`` restarts the barrier stage, and
    every customer's rows in the file sink are exactly the failure-free run's."""
    records = orders(4000)
    feed(redis_client, f"{keyspace}:in", records, KEYS)
    g = arrivalck.build({"prefix": f"{keyspace}:in"})
    want = by_customer(build_and_run(g, plan_for(g, "manual"), workdir=tmp_path / "ref", app_ref=REF).sinks["out"])
    build, chk, out = tmp_path / "build", tmp_path / "chk", tmp_path / "out"
    killed: list[int] = []
    done = threading.Event()

    def killer():  # the merge's PE, once, after the first complete checkpoint
        while not done.wait(0.05):
            try:
                pes = json.loads((build / "deploy.json").read_text())["pes"]
                pe = next(p["pe"] for p in pes if "live__merge" in p["operators"])
                if any(chk.glob("chk-*/MANIFEST.json")):
                    os.kill(json.loads((build / "progress" / f"{pe}.json").read_text())["pid"], signal.SIGKILL)
                    killed.append(1)
                    return
            except (OSError, ValueError, KeyError, StopIteration):
                continue

    k = threading.Thread(target=killer, daemon=True)
    k.start()
    t0 = time.time()
    try:
        res = cli("run", REF, "-p", f"prefix={keyspace}:in", "-p", "spin_us=30000", "--fusion", "manual",
                  "--checkpoint-interval", "0.5", "--checkpoint-dir", chk, "--build-dir", build, "--out", out)
    finally:
        done.set()
        k.join(5)
    text = res.stdout + res.stderr
    assert res.returncode == 0, text[-3000:]
    assert "checkpoints: parallel region 'live' merges its channels by arrival" in text
    assert killed and "RESTART 1/" in text, text[-3000:]
    got = [json.loads(line) for line in (out / "out.jsonl").read_text().splitlines()]
    assert by_customer(got) == want
    print(f"\nspadeopt run with one kill of the merge's PE: {time.time() - t0:.1f} s")
