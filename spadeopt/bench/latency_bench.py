"""``spadeopt bench latency``: event -> sink latency through broker -> app -> broker.

The pipeline: a producer XADDs events ``{"seq", "ts"}`` to a Redis stream at a fixed
rate, ``ts`` being the producer's clock when the event was sent; the ``relay`` app
(below: a live Redis source, one functor, a Redis sink; under ``--fusion none`` three
PEs, so every event crosses two ZeroMQ links) appends each to an output stream; after
the run the output stream is read back and each event's latency is its output entry's
ID time (the broker's clock, same host, milliseconds) minus its ``ts``. The ID has
millisecond resolution, so a latency is under-read by 0-1 ms (0.5 ms on average).

The same pipeline runs on one anchor in the same run: Bytewax (``pip install
bytewax``; the ``anchors`` extra), one worker, its source and sink built on the *same*
connector classes (``RedisStreamSource.read`` polled every millisecond when idle, as a
PE's sources are; ``RedisStreamSink.write``), so what differs is the engine. Without
Bytewax the anchor is skipped and the report says so.

Each rate: the output stream is cleared, the app is started (the Spark session is
reused between rates), a ping every 0.1 s until one comes out (warm-up, not measured),
then ``seconds`` of paced events, then a wait until every event is out, then a stop
request (the run drains and ends, exit as a live run's normal end).

Figures: ``OUT/latency.json`` (per engine and rate: p50 / p90 / p99 / max ms, events sent and
received, the rate achieved by the producer, the load average; for spadeopt also the run's
own latency markers, ``markers``, which ``spadeopt run`` and ``compare`` report: from the
input entry's ID time to the sinks, warm-up included) and ``OUT/latency.png``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from spadeopt import App, app
from spadeopt.connectors import redis_sink, redis_source

SCHEMA = "seq:int, ts:float"
PREFIX = "spadeopt-bench:latency"
RATES = (1_000, 10_000, 30_000, 100_000)
QUICK_RATES = (500, 2_000)
PING_EVERY = 0.1  # s
DRAIN_TIMEOUT = 60.0  # s to wait for the last events after the feed ends


@app
def relay(prefix: str = PREFIX) -> App:
    """A live Redis source, one functor, a Redis sink (three PEs under ``--fusion none``)."""
    a = App("relay")
    s = a.source("events", SCHEMA, connector=redis_source(f"{prefix}:in"))
    f = a.functor("work", s, output={"seq": "seq", "ts": "ts", "k:int": "seq % 7"})
    a.sink("out", f, connector=redis_sink(f"{prefix}:out"))
    return a


# ---- producer and consumer ----------------------------------------------------------------


class Producer:
    """XADDs to one stream key at a paced rate: commands packed here and sent on one
    connection (~200 k events/s on the development VM, where redis-py's pipeline
    manages ~20 k), every reply read before the next tick."""

    def __init__(self, client, key: str) -> None:
        self.client = client
        self.conn = client.connection_pool.get_connection()
        k = key.encode()
        self.head = b"*5\r\n$4\r\nXADD\r\n$%d\r\n%s\r\n$1\r\n*\r\n$5\r\nvalue\r\n" % (len(k), k)

    def send(self, seqs: range | list[int]) -> None:
        ts = time.time()
        parts = []
        for i in seqs:
            v = b'{"seq": %d, "ts": %.6f}' % (i, ts)
            parts.append(b"%s$%d\r\n%s\r\n" % (self.head, len(v), v))
        if not parts:
            return
        self.conn.send_packed_command([b"".join(parts)], check_health=False)
        for _ in parts:
            self.conn.read_response(disable_decoding=True)

    def paced(self, rate: float, seconds: float) -> tuple[int, float]:
        """Send ``rate`` events/s for ``seconds``; (events sent, seconds it took)."""
        sent, t0 = 0, time.perf_counter()
        end = t0 + seconds
        while True:
            now = time.perf_counter()
            if now >= end:
                break
            due = min(int(rate * (now - t0)), int(rate * seconds)) - sent
            if due > 0:
                due = min(due, 5000)
                self.send(range(sent, sent + due))
                sent += due
            time.sleep(0.0005)
        if sent < int(rate * seconds):  # the last tick's due events
            self.send(range(sent, int(rate * seconds)))
            sent = int(rate * seconds)
        return sent, time.perf_counter() - t0

    def close(self) -> None:
        self.client.connection_pool.release(self.conn)


def _out_entries(client, key: str) -> list[tuple[int, dict]]:
    """Every entry of ``key`` as (ID milliseconds, value), in order."""
    out, start = [], "-"
    while True:
        chunk = client.xrange(key, min=start, max="+", count=10_000)
        if not chunk:
            return out
        for eid, fields in chunk:
            out.append((int(eid.split(b"-")[0]), json.loads(fields[b"value"])))
        start = "(" + chunk[-1][0].decode()


def _drained(client, key: str, want: int, timeout: float) -> bool:
    """Wait until ``key`` holds ``want`` entries; False after ``timeout`` seconds without them."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if client.xlen(key) >= want:
            return True
        time.sleep(0.05)
    return False


def _warm_up(client, producer: Producer, out_key: str, timeout: float = 180.0) -> None:
    """Ping (negative seq) until a ping comes out: the pipeline is up end to end."""
    deadline, k = time.time() + timeout, 0
    while time.time() < deadline:
        producer.send([-1 - k])
        k += 1
        time.sleep(PING_EVERY)
        if client.xlen(out_key):
            return
    raise RuntimeError(f"latency bench: nothing came out of {out_key} within {timeout:g} s of warm-up")


def summarize(entries: list[tuple[int, dict]], sent: int) -> dict[str, Any]:
    import numpy as np

    lat = np.array([ms - v["ts"] * 1000.0 for ms, v in entries if v["seq"] >= 0])
    seqs = {v["seq"] for _, v in entries if v["seq"] >= 0}
    doc: dict[str, Any] = {"sent": sent, "received": len(lat), "missing": sent - len(seqs),
                           "duplicates": int(len(lat) - len(seqs))}
    if len(lat):
        doc.update({f"p{q}_ms": round(float(np.percentile(lat, q)), 2) for q in (50, 90, 99)})
        doc["max_ms"] = round(float(lat.max()), 2)
        doc["mean_ms"] = round(float(lat.mean()), 2)
    return doc


# ---- one measurement per engine -----------------------------------------------------------


def _measure(client, prefix: str, rate: float, seconds: float, start, stop, log) -> dict[str, Any]:
    """Clear the streams, start an engine (``start()``), warm up, feed, drain, ``stop()``."""
    in_key, out_key = f"{prefix}:in", f"{prefix}:out"
    client.delete(in_key, out_key)
    producer = Producer(client, in_key)
    handle = start()
    try:
        _warm_up(client, producer, out_key)
        pings = client.xlen(out_key)
        load = os.getloadavg()[0]
        sent, took = producer.paced(rate, seconds)
        drained = _drained(client, out_key, pings + sent, DRAIN_TIMEOUT)
        time.sleep(0.2)  # the last pings, if any
    finally:
        result = stop(handle)
        producer.close()
    doc = summarize(_out_entries(client, out_key), sent)
    if getattr(result, "latency", None):  # the run's own markers (runtime.latency), warm-up included
        doc["markers"] = result.latency
    doc["drained"] = drained  # False: events still missing DRAIN_TIMEOUT s after the feed ended (saturated)
    doc.update(rate=rate, achieved_rate=round(sent / took, 1), seconds=round(took, 2), load_average=round(load, 2))
    log(f"  {rate:>8,.0f}/s (achieved {doc['achieved_rate']:,.0f}/s): p50 {doc.get('p50_ms')} ms, "
        f"p99 {doc.get('p99_ms')} ms, max {doc.get('max_ms')} ms; {doc['received']:,} of {sent:,} out"
        + ("" if drained else f" ({DRAIN_TIMEOUT:g} s after the feed ended: saturated)"))
    client.delete(in_key, out_key)
    return doc


def _spadeopt_engine(build_dir: Path, options):
    from spadeopt.deploy.launcher import request_stop, run_build

    def start():
        box: dict[str, Any] = {}

        def target():
            try:
                box["result"] = run_build(build_dir, options)
            except BaseException as exc:  # noqa: BLE001 - reported by stop()
                box["error"] = exc

        t = threading.Thread(target=target, daemon=True, name="latency-run")
        t.start()
        box["thread"] = t
        return box

    def stop(box):
        request_stop(build_dir / "progress")
        box["thread"].join(120)
        if box["thread"].is_alive():
            raise RuntimeError("latency bench: the spadeopt run did not end within 120 s of its stop request")
        if "error" in box:
            raise box["error"]
        return box.get("result")

    return start, stop


def _bytewax_engine(prefix: str, log_path: Path):
    def start():
        log = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
        p = subprocess.Popen([sys.executable, "-c", f"from spadeopt.bench.latency_bench import bytewax_main; "
                              f"bytewax_main({prefix!r})"], stdout=log, stderr=log, start_new_session=True)
        return p, log

    def stop(handle):
        p, log = handle
        p.terminate()
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        log.close()

    return start, stop


def bytewax_available() -> str | None:
    try:
        from importlib.metadata import version

        import bytewax.dataflow  # noqa: F401

        return version("bytewax")
    except Exception:  # noqa: BLE001 - not installed, or broken
        return None


def bytewax_flow(prefix: str = PREFIX):
    """The relay on Bytewax: the same source and sink connector classes, the same functor."""
    from datetime import UTC, datetime, timedelta

    import bytewax.operators as op
    from bytewax.dataflow import Dataflow
    from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition
    from bytewax.outputs import DynamicSink, StatelessSinkPartition

    from spadeopt.connectors.redis_conn import project_broker
    from spadeopt.connectors.redis_stream_sink import RedisStreamSink
    from spadeopt.connectors.redis_streams import RedisStreamSource

    b = project_broker()
    where = {"host": b.host, "port": b.port, "password_file": b.password_file}

    class Part(StatefulSourcePartition):
        def __init__(self) -> None:
            self.src = RedisStreamSource(name="events", schema=[["seq", "int"], ["ts", "float"]],
                                         keys=[f"{prefix}:in"], **where)
            self.src.open()
            self.idle = False

        def next_batch(self):
            got = self.src.read(512) or []
            self.idle = not got
            return got

        def next_awake(self):  # poll again in 1 ms when the stream had nothing (as a PE's sources)
            return datetime.now(UTC) + timedelta(milliseconds=1) if self.idle else None

        def snapshot(self):
            return None

        def close(self) -> None:
            self.src.close()

    class Source(FixedPartitionedSource):
        def list_parts(self):
            return ["0"]

        def build_part(self, step_id, for_part, resume_state):
            return Part()

    class SinkPart(StatelessSinkPartition):
        def __init__(self) -> None:
            self.sink = RedisStreamSink(name="out", names=["seq", "ts", "k"], types=["int", "float", "int"],
                                        key=f"{prefix}:out", **where)
            self.sink.open()

        def write_batch(self, items) -> None:
            self.sink.write(list(items))

        def close(self) -> None:
            self.sink.close()

    class Sink(DynamicSink):
        def build(self, step_id, worker_index, worker_count):
            return SinkPart()

    flow = Dataflow("relay")
    s = op.input("events", flow, Source())
    w = op.map("work", s, lambda t: (t[0], t[1], t[0] % 7))
    op.output("out", w, Sink())
    return flow


def bytewax_main(prefix: str) -> None:
    from bytewax.testing import run_main

    run_main(bytewax_flow(prefix))


# ---- the benchmark ------------------------------------------------------------------------


def run(out_dir: Path, quick: bool = False, rates: tuple[float, ...] | None = None,
        seconds: float | None = None, anchor: bool = True, log=print) -> dict[str, Any]:
    from spadeopt import api
    from spadeopt.atomic import write_atomic
    from spadeopt.connectors.redis_conn import connect, project_broker
    from spadeopt.deploy.options import RunOptions
    from spadeopt.plan.deployment import RunSettings

    rates = tuple(rates or (QUICK_RATES if quick else RATES))
    seconds = seconds or (3.0 if quick else 10.0)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="spadeopt-latency-"))  # builds, logs: scratch, removed at the end
    prefix = f"{PREFIX}:{os.getpid()}"
    client = connect(project_broker(), "spadeopt bench latency")
    ref = "spadeopt.bench.latency_bench:relay"
    build = api.build(ref, "none", {"prefix": prefix}, 1, 2, work / "build-none", force=True)
    fused = api.build(ref, "all", {"prefix": f"{prefix}:1pe"}, 1, 2, work / "build-all", force=True)
    options = RunOptions()
    doc: dict[str, Any] = {
        "kind": "spadeopt-bench-latency",
        "what": "event -> sink latency, broker -> app -> broker: producer XADD (ts) -> relay (live Redis source, "
                "functor, Redis sink) -> output entry ID time; ms, the ID's resolution is 1 ms",
        "command": "spadeopt bench latency" + (" --quick" if quick else "") + f" --out {out_dir}",
        "engines_what": {"spadeopt": f"--fusion none ({len(build.plan.pes)} PEs), default --max-batch-delay",
                         "spadeopt-delay0": "the same, --max-batch-delay 0",
                         "spadeopt-1pe": "--fusion all (1 PE), default --max-batch-delay",
                         "bytewax": "Bytewax, 1 worker (1 process), same connector classes"},
        "pipeline": {"app": ref, "fusion": "none", "pes": len(build.plan.pes),
                     "max_batch_delay_ms": options.apply(RunSettings()).max_batch_delay * 1000},
        "seconds_per_rate": seconds, "cpus": os.cpu_count(), "engines": {}}
    # spadeopt: the 3-PE pipeline at the default batch delay; full runs add the same at
    # --max-batch-delay 0 (every read passed on at once) and FALL (one PE, as Bytewax's one worker)
    engines: list[tuple[str, str, Any, Any]] = [("spadeopt", prefix, *_spadeopt_engine(build.directory, options))]
    if not quick:
        engines.append(("spadeopt-delay0", prefix, *_spadeopt_engine(build.directory,
                                                                     RunOptions(max_batch_delay=0.0))))
        engines.append(("spadeopt-1pe", f"{prefix}:1pe", *_spadeopt_engine(fused.directory, options)))
    bw = bytewax_available() if anchor else None
    if bw:
        engines.append(("bytewax", f"{prefix}:bw", *_bytewax_engine(f"{prefix}:bw", work / "bytewax.log")))
        doc["anchor"] = {"engine": "bytewax", "version": bw, "workers": 1,
                         "why": "installs from PyPI; same source/sink connector classes, so the engine is what differs"}
    else:
        doc["anchor"] = {"engine": None, "why": "bytewax is not installed (pip install bytewax, or the "
                         "project's 'anchors' extra)" if anchor else "--no-anchor"}
    try:
        for rate in rates:  # engines side by side at each rate, so both see the same machine
            for name, keys, start, stop in engines:
                log(f"latency: {name} at {rate:,.0f} events/s for {seconds:g} s")
                doc["engines"].setdefault(name, []).append(_measure(client, keys, rate, seconds, start, stop, log))
    finally:
        for key in client.scan_iter(match=f"{prefix}*"):
            client.delete(key)
        client.close()
        shutil.rmtree(work, ignore_errors=True)
    write_atomic(out_dir / "latency.json", json.dumps(doc, indent=2) + "\n")
    _plot(doc, out_dir / "latency.png")
    return doc


def _plot(doc: dict[str, Any], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for (name, rows), color in zip(doc["engines"].items(), ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"),
                                      strict=False):
        rows = [r for r in rows if "p50_ms" in r]
        xs = [r["achieved_rate"] for r in rows]
        ax.plot(xs, [r["p50_ms"] for r in rows], "o-", color=color, label=f"{name} p50")
        ax.plot(xs, [r["p99_ms"] for r in rows], "s--", color=color, label=f"{name} p99")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("input rate achieved (events/s)")
    ax.set_ylabel("event -> sink latency (ms)")
    ax.set_title("event -> sink latency: broker -> relay app -> broker (one run, shared machine)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
