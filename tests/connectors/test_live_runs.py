"""Unbounded runs and latency (issue 28 items 5-6) against the real broker (``make broker``)
and real PEs: a live source's partial batch waits at most ``max_batch_delay``; a stop
request (SIGTERM) ends a live run with exit 0, every read tuple drained into its windows
and committed sinks, and no PE left; ``--duration`` ends one too; a slow feed is not held
for a full batch; the latency bench runs in its quick mode."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spadeopt.connectors.redis_streams import RedisStreamSource
from spadeopt.runtime.pe import PERuntime
from tests.cli.clitools import ROOT, cli, refused

ORDERS = ROOT / "apps" / "orders.py"


def _orders_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("_orders_app_live", ORDERS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _paid_orders(n: int, seed: int) -> list[dict]:
    """Orders that all pass the app's filter (amount > 0), so every one read is counted."""
    rows = _orders_module().make_orders(n, customers=30, seed=seed)
    return [dict(r, amount=round(abs(r["amount"]) + 1.0, 2)) for r in rows]


def _pe_pids(under: Path) -> list[int]:
    """Live PE processes (from /proc) whose command line names a path under ``under``."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            argv = (d / "cmdline").read_bytes()
            state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if b"spadeopt.runtime.pe_main" in argv and str(under).encode() in argv and state != "Z":
            found.append(int(d.name))
    return found


def _read_so_far(build: Path) -> int:
    total = 0
    for f in (build / "progress").glob("pe*.json"):
        try:
            total += sum(json.loads(f.read_text())["sources"].values())
        except (OSError, ValueError, KeyError):
            continue
    return total


def _wait(pred, timeout: float, what: str) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return
        time.sleep(0.1)
    raise AssertionError(f"{what} did not happen within {timeout:g} s")


def _spadeopt(*args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "spadeopt", *map(str, args)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


# ---- the batch delay, on the runtime's own loop (no Spark) -----------------------------


def _source(broker, key: str) -> RedisStreamSource:
    a = broker.address
    return RedisStreamSource(name="events", schema=[["seq", "int"]], keys=[key], host=a.host, port=a.port,
                             password_file=a.password_file)


def test_a_live_sources_partial_batch_waits_for_the_batch_delay_and_a_full_one_goes_at_once(
        broker, redis_client, keyspace):
    key = f"{keyspace}:in"
    for i in range(10):
        redis_client.xadd(key, {"value": json.dumps({"seq": i})})
    rt = PERuntime("pe0", (), __file__, batch_size=4, max_batch_delay=0.3)
    batches, t0 = rt.source_batches("events", _source(broker, key)), time.monotonic()
    got: list[tuple[float, list]] = []
    for batch in batches:
        if batch:
            got.append((time.monotonic() - t0, batch))
        if sum(len(b) for _, b in got) == 10:
            break
        time.sleep(0.001)
    rt.stop_sources = True
    list(batches)
    assert [len(b) for _, b in got] == [4, 4, 2]
    assert got[1][0] < 0.3  # full batches are not held
    assert got[2][0] >= 0.3  # the partial one waited for more, up to the delay
    assert [t[0] for _, b in got for t in b] == list(range(10))


def test_with_no_batch_delay_a_live_read_is_passed_on_as_read(broker, redis_client, keyspace):
    key = f"{keyspace}:in"
    for i in range(3):
        redis_client.xadd(key, {"value": json.dumps({"seq": i})})
    rt = PERuntime("pe0", (), __file__, batch_size=512, max_batch_delay=0.0)
    batches = rt.source_batches("events", _source(broker, key))
    first = next(b for b in batches if b)
    assert [t[0] for t in first] == [0, 1, 2]
    rt.stop_sources = True
    list(batches)
    assert rt.lags["events"] == 0  # sampled when the source closed


def test_a_stop_request_passes_on_what_a_live_source_holds(broker, redis_client, keyspace):
    key = f"{keyspace}:in"
    redis_client.xadd(key, {"value": json.dumps({"seq": 7})})
    rt = PERuntime("pe0", (), __file__, batch_size=512, max_batch_delay=60.0)
    batches = rt.source_batches("events", _source(broker, key))
    for _ in range(5):
        assert next(batches) == []  # held: the delay is a minute away
    rt._end_sources("request")
    assert [b for b in batches if b] == [[(7,)]]
    assert rt.stopped_by == "request"
    assert rt.unbounded() == ["events"]


@pytest.mark.parametrize("flag", [["--max-batch-delay", "-1"], ["--max-batch-delay", "70000"], ["--duration", "0"]])
def test_bad_run_options_are_refused_before_anything_is_written(tmp_path, flag):
    res = cli("run", "apps/orders.py", *flag, "--build-dir", tmp_path / "b", "--out", tmp_path / "o")
    refused(res, flag[0])
    assert not (tmp_path / "b").exists() and not (tmp_path / "o").exists()


# ---- whole runs on Spark -----------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.slow
def test_sigterm_mid_run_on_a_live_app_exits_0_with_sinks_flushed_and_no_pe_left(redis_client, keyspace, tmp_path):
    orders = _orders_module()
    prefix = f"{keyspace}:orders"
    first, more = _paid_orders(2000, seed=3), _paid_orders(700, seed=4)
    orders.feed(redis_client, first, keys=4, prefix=prefix)
    build, out = tmp_path / "build", tmp_path / "out"
    proc = _spadeopt("run", ORDERS, "-p", "until=", "-p", f"prefix={prefix}", "-p", "output=file",
                     "--fusion", "none", "--build-dir", build, "--out", out, "--json", tmp_path / "r.json")
    try:
        _wait(lambda: _read_so_far(build) >= 2000, 180, "the first orders being read")
        orders.feed(redis_client, more, keys=4, prefix=prefix)  # the feed goes on while it runs
        _wait(lambda: _read_so_far(build) >= 2700, 60, "the later orders being read")
        assert len(_pe_pids(build)) == 5
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, stderr
    assert "stop requested" in stderr and "Traceback" not in stderr
    assert "ended by" in stdout and "stop request" in stdout
    _wait(lambda: not _pe_pids(build), 10, "every PE exiting")
    rows = [json.loads(line) for line in (out / "out.jsonl").read_text().splitlines()]
    assert sum(r["orders"] for r in rows) == 2700  # every order read, windows closed at the stop (partial ones too)
    by_customer: dict[str, int] = {}
    for r in first + more:
        by_customer[r["customer"]] = by_customer.get(r["customer"], 0) + 1
    assert {c: sum(r["orders"] for r in rows if r["customer"] == c) for c in by_customer} == by_customer
    assert not list(out.glob(".*.part"))  # committed, nothing half-written
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["tuples"] == 2700 and result["stopped_by"] == "request"
    assert result["connectors"]["orders"]["lag"] == 0
    live_src = {s["source"]: s for s in result["live"]["sources"]}["orders"]  # the live view's source panel
    assert live_src["live"] and live_src["lag"] == 0 and live_src["tuples"] == 2700
    assert set(result["connectors"]["orders"]["position"]) == {f"{prefix}:{k}" for k in range(4)}


@pytest.mark.spark
def test_duration_ends_a_live_run(redis_client, keyspace, tmp_path):
    orders = _orders_module()
    prefix = f"{keyspace}:orders"
    orders.feed(redis_client, _paid_orders(500, seed=5), keys=4, prefix=prefix)
    res = cli("run", ORDERS, "-p", "until=", "-p", f"prefix={prefix}", "--fusion", "all", "--duration", "4",
              "--build-dir", tmp_path / "b", "--json", tmp_path / "r.json")
    assert res.returncode == 0, res.stderr
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["stopped_by"] == "duration" and result["tuples"] == 500
    totals = [json.loads(f[b"value"]) for _, f in redis_client.xrange(f"{prefix}:totals")]
    assert sum(t["orders"] for t in totals) == 500  # windows closed and the broker sink flushed
    assert not _pe_pids(tmp_path / "b")


@pytest.mark.spark
def test_profile_duration_samples_a_live_source(redis_client, keyspace, tmp_path):
    orders = _orders_module()
    prefix = f"{keyspace}:orders"
    orders.feed(redis_client, _paid_orders(3000, seed=6), keys=4, prefix=prefix)
    res = cli("profile", ORDERS, "-p", "until=", "-p", f"prefix={prefix}", "--fusion", "all", "--duration", "3",
              "--sample-rate", "0.05", "--no-production-probe", "-o", tmp_path / "run")
    assert res.returncode == 0, res.stderr
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["params"]["until"] == ""
    assert all((tmp_path / "run" / f).is_file() for f in manifest["pe_files"])  # every PE's samples
    assert "3,000" in res.stdout and "--duration" in res.stdout  # all read, then ended by the duration


@pytest.mark.spark
@pytest.mark.slow
def test_a_slow_feeds_tuples_reach_the_output_stream_before_the_next_is_sent(redis_client, keyspace, tmp_path):
    """One event every 200 ms through three PEs (source, functor, sink): each must come out
    before the next goes in; then Ctrl-C ends the run, exit 0. A source that held its batch until full (512) would pass
    nothing on for 100 s; one that held two events, 200 ms."""
    in_key, out_key = f"{keyspace}:in", f"{keyspace}:out"
    build = tmp_path / "b"
    proc = _spadeopt("run", "spadeopt.bench.latency_bench:relay", "-p", f"prefix={keyspace}", "--fusion", "none",
                     "--build-dir", build)
    try:
        deadline, k = time.time() + 180, 0
        while not redis_client.xlen(out_key):  # warm-up pings until the pipeline is up
            assert time.time() < deadline and proc.poll() is None, "the relay never came up"
            redis_client.xadd(in_key, {"value": json.dumps({"seq": -1 - k, "ts": time.time()})})
            k += 1
            time.sleep(0.1)
        time.sleep(0.5)
        for i in range(10):
            redis_client.xadd(in_key, {"value": json.dumps({"seq": i, "ts": time.time()})})
            time.sleep(0.2)
        _wait(lambda: sum(1 for _, f in redis_client.xrange(out_key) if json.loads(f[b"value"])["seq"] >= 0) == 10,
              30, "10 events coming out")
        proc.send_signal(signal.SIGINT)  # Ctrl-C: the same normal end as SIGTERM (Spark's own handler is off)
        proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0
    lat = [int(eid.split(b"-")[0]) - json.loads(f[b"value"])["ts"] * 1000
           for eid, f in redis_client.xrange(out_key) if json.loads(f[b"value"])["seq"] >= 0]
    assert len(lat) == 10
    assert max(lat) < 190, lat  # each out before the next event was sent (the default delay is 5 ms)
    assert not _pe_pids(build)


@pytest.mark.spark
@pytest.mark.slow
def test_the_latency_bench_runs_in_quick_mode(broker, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "spadeopt", "bench", "latency", "--quick", "--out", tmp_path],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((tmp_path / "latency.json").read_text())
    rows = doc["engines"]["spadeopt"]
    assert [r["rate"] for r in rows] == [500, 2000]
    for r in rows:
        assert r["received"] == r["sent"] > 0 and r["missing"] == 0
        assert 0 <= r["p50_ms"] <= r["p99_ms"] <= r["max_ms"]
    assert (doc["anchor"]["engine"] == "bytewax") == ("bytewax" in doc["engines"])
    assert (tmp_path / "latency.png").stat().st_size > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latency.json", "latency.png"]  # no scratch left
