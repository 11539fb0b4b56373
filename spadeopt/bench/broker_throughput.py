"""``spadeopt bench broker-throughput``: broker -> 16-functor chain -> broker against the
same app reading and writing files (issue 28: target >= 0.8x).

The app (``chain16`` below) has 5-attribute records ``(id, price, symbol, volume, ts)``
through 16 functors, each calling an opaque Python function (``step``: one call per
operator and record, kept as a call by the collapse), into a sink. Two variants of
the same graph:

* ``broker``: a bounded Redis Streams source (``until="end"``: the entries there at
  open) over ``keys`` stream keys loaded before the timed runs (each record's JSON
  object in field ``value``), a Redis Streams sink (JSON, one XADD per record);
* ``file``: a JSON-lines file of the same records (the same JSON text, one a line),
  the JSON-lines file sink.

Both run through the real launcher (``deploy.launcher.run_build``, Spark local mode,
``local[2]``, one Spark session for every run) under the same plan: FALL (one PE)
and FMAN (source, chain, sink: three PEs, so decoding, the chain and encoding each
have a process), broker and file alternating run by run (which goes first alternates
by round). Throughput is the run report's ``throughput``: records over the span from
the first source record to the end of the last PE, so the sink's flush (the last XADD
round trip, the file's close) is in it for both, Spark's job start is not. Before
each broker run the output stream is deleted; the input streams stay (the source
reads them from the beginning every run). Every run's output count is checked, and
the first round's outputs are compared record by record, broker against file.

Figures: ``OUT/broker_throughput.json``; one summary line on stderr.
"""

from __future__ import annotations

import json
import os
import platform
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from spadeopt import App, app
from spadeopt.connectors import redis_sink, redis_source
from spadeopt.optimize.strategies import label_of

SCHEMA = "id:int, price:float, symbol:str, volume:float, ts:int"
PREFIX = "spadeopt-bench:broker-throughput"
FUNCTORS = 16
TARGET = 0.8  # broker / file, issue 28
TS0 = 1_700_000_000_000
FUSIONS = ("all", "manual")


def step(price: float, volume: float) -> float:
    """One operator's opaque work: a Python call the collapse keeps (no foldable expression)."""
    return price + volume * 1e-6 if volume > 0.0 else price


@app
def chain16(source: str = "file", path: str = "", prefix: str = PREFIX, keys: int = 1, n: int = FUNCTORS) -> App:
    """``source="file"``: ``path`` (JSON lines) -> chain -> ``out.jsonl``; ``"broker"``:
    streams ``<prefix>:in:0..keys-1`` (until their ends at open) -> chain -> ``<prefix>:out``."""
    a = App("chain16")
    if source == "broker":
        s = a.source("src", SCHEMA, connector=redis_source([f"{prefix}:in:{k}" for k in range(keys)], until="end"))
    else:
        s = a.source("src", SCHEMA, file=path)
    ops = []
    for i in range(n):
        s = a.functor(f"f{i}", s, output={"id": "id", "price:float": "step(price, volume)", "symbol": "symbol",
                                          "volume": "volume", "ts": "ts"}, functions=[step])
        ops.append(f"f{i}")
    if source == "broker":
        a.sink("out", s, connector=redis_sink(f"{prefix}:out"))
    else:
        a.sink("out", s)
    if len(ops) > 1:
        a.fuse(*ops)  # FMAN: source | 16 functors | sink
    return a


app = chain16


def records(n: int, seed: int = 1, symbols: int = 100) -> list[bytes]:
    """``n`` seeded records as JSON objects (bytes), about 90 bytes each."""
    rand = random.Random(seed).random
    syms = [f"S{i:03d}" for i in range(symbols)]
    return [json.dumps({"id": i, "price": round(10.0 + 90.0 * rand(), 2), "symbol": syms[int(rand() * symbols)],
                        "volume": round(1.0 + 999.0 * rand(), 1), "ts": TS0 + i}).encode() for i in range(n)]


def load_streams(client, prefix: str, values: list[bytes], keys: int, chunk: int = 5000) -> None:
    """XADD ``values`` round-robin over ``<prefix>:in:0..keys-1`` (packed commands, one
    round trip per ``chunk``); the keys are deleted first."""
    client.delete(*(f"{prefix}:in:{k}" for k in range(keys)))
    heads = []
    for k in range(keys):
        key = f"{prefix}:in:{k}".encode()
        heads.append(b"*5\r\n$4\r\nXADD\r\n$%d\r\n%s\r\n$1\r\n*\r\n$5\r\nvalue\r\n" % (len(key), key))
    conn = client.connection_pool.get_connection()
    try:
        for lo in range(0, len(values), chunk):
            part = values[lo:lo + chunk]
            conn.send_packed_command([b"".join(b"%s$%d\r\n%s\r\n" % (heads[(lo + j) % keys], len(v), v)
                                               for j, v in enumerate(part))], check_health=False)
            for _ in part:
                conn.read_response(disable_decoding=True)
    finally:
        client.connection_pool.release(conn)


def _out_stream(client, key: str) -> list[dict]:
    out, start = [], "-"
    while True:
        chunk = client.xrange(key, min=start, max="+", count=20_000)
        if not chunk:
            return out
        out.extend(json.loads(fields[b"value"]) for _, fields in chunk)
        start = "(" + chunk[-1][0].decode()


def _out_file(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _same(broker: list[dict], file: list[dict], keys: int) -> bool:
    """The two outputs hold the same records (in the same order with one key; several
    keys interleave by arrival, so then as sets)."""
    if keys == 1:
        return broker == file
    key = lambda r: r["id"]  # noqa: E731
    return sorted(broker, key=key) == sorted(file, key=key)


def _run_once(client: Any, build: Path, sinks: Path, prefix: str, source: str, fusion: str, tuples: int
              ) -> dict[str, Any]:
    """One run of a build reading from ``source``; its figures. Every record must be read
    and written (``RuntimeError`` otherwise)."""
    from spadeopt.deploy.launcher import run_build
    from spadeopt.deploy.options import RunOptions

    shutil.rmtree(sinks, ignore_errors=True)
    client.delete(f"{prefix}:out")
    res = run_build(build, RunOptions(out=sinks))
    if source == "broker":
        written = client.xlen(f"{prefix}:out")
    else:
        written = sum(1 for _ in open(sinks / "out.jsonl", "rb"))  # noqa: SIM115
    if res.tuples != tuples or written != tuples:
        raise RuntimeError(f"broker-throughput: {source} run ({label_of(fusion)}) read {res.tuples:,} "
                           f"and wrote {written:,} of {tuples:,} records")
    return {"tuples_per_s": round(res.throughput, 1), "steady_tuples_per_s": round(res.steady_throughput, 1),
            "wall_s": round(res.wall_s, 3), "pes": res.pes, "cpu_s": round(sum(p["cpu_s"] for p in res.per_pe), 3)}


def _report(runs: dict, checks: dict[str, bool], fusions: tuple[str, ...], loads: list[float], quick: bool,
            out_dir: Path, ref: str, tuples: int, keys: int, repeat: int) -> dict[str, Any]:
    """The benchmark's JSON document: per plan, medians and ratios, and how it was run."""
    plans: dict[str, Any] = {}
    for fusion in fusions:
        med = {s: statistics.median(x["tuples_per_s"] for x in runs[fusion][s]) for s in ("broker", "file")}
        plans[label_of(fusion)] = {
            "pes": runs[fusion]["broker"][0]["pes"],
            "median_tuples_per_s": med, "ratio_broker_over_file": round(med["broker"] / med["file"], 3),
            "per_round_ratio": [round(b["tuples_per_s"] / f["tuples_per_s"], 3)
                                for b, f in zip(runs[fusion]["broker"], runs[fusion]["file"], strict=True)],
            "meets_target": med["broker"] / med["file"] >= TARGET,
            "outputs_identical": checks.get(fusion), "runs": runs[fusion]}
    doc = {"benchmark": "broker-throughput", "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
           "what": f"broker (Redis Streams source until='end' -> {FUNCTORS} functors, each calling a Python function "
                   "-> Redis Streams sink) against the same app reading a JSON-lines file and writing a JSON-lines "
                   "file sink, same records, same plan",
           "throughput": "run report's throughput: records / (end of the last PE - first source record); the "
                         "sink's flush is in it, Spark's job start is not",
           "command": "spadeopt bench broker-throughput" + (" --quick" if quick else "") + f" --out {out_dir}",
           "app": ref, "schema": SCHEMA, "functors": FUNCTORS, "records": tuples, "stream_keys": keys,
           "master": "local[2]", "repeat": repeat, "target_ratio": TARGET, "plans": plans,
           "load_avg_1min": loads, "machine": {"host": platform.node(), "cpus": os.cpu_count(),
                                               "python": platform.python_version(),
                                               "platform": platform.platform()},
           "note": "shared 2-core machine: noisy; broker and file runs alternate, so the ratio is side by side"}
    return doc


def run(out_dir: Path, quick: bool = False, repeat: int | None = None, tuples: int | None = None,
        keys: int = 1, fusions: tuple[str, ...] | None = None, log=print) -> dict[str, Any]:
    from spadeopt import api
    from spadeopt.atomic import write_atomic
    from spadeopt.connectors.redis_conn import connect, project_broker
    from spadeopt.deploy.spark_session import stop_spark

    tuples = tuples or (20_000 if quick else 300_000)
    repeat = repeat or (1 if quick else 3)
    fusions = tuple(fusions or FUSIONS)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="spadeopt-broker-tp-"))  # builds, input file, sinks: removed at the end
    prefix = f"{PREFIX}:{os.getpid()}"
    client = connect(project_broker(), "spadeopt bench broker-throughput")
    ref = "spadeopt.bench.broker_throughput:chain16"
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {f: {"broker": [], "file": []} for f in fusions}
    checks: dict[str, bool] = {}
    loads: list[float] = []
    try:
        values = records(tuples)
        data = work / "records.jsonl"
        data.write_bytes(b"\n".join(values) + b"\n")
        t = time.perf_counter()
        load_streams(client, prefix, values, keys)
        log(f"broker-throughput: {tuples:,} records ({data.stat().st_size / tuples:.0f} bytes each) in "
            f"{data.name} and in {keys} stream key(s) (loaded in {time.perf_counter() - t:.1f} s)")
        del values
        builds = {}
        for fusion in fusions:
            for source in ("broker", "file"):
                params = {"source": source, "path": str(data), "prefix": prefix, "keys": str(keys)}
                b = api.build(ref, fusion, params, 1, 2, work / f"build-{fusion}-{source}", force=True)
                builds[fusion, source] = b.directory
        for r in range(repeat):
            loads.append(round(os.getloadavg()[0], 2))
            for fusion in fusions:
                order = ("broker", "file") if r % 2 == 0 else ("file", "broker")
                outs: dict[str, list[dict]] = {}
                for source in order:
                    sinks = work / "sinks"
                    runs[fusion][source].append(_run_once(client, builds[fusion, source], sinks, prefix, source,
                                                          fusion, tuples))
                    if r == 0:
                        outs[source] = (_out_stream(client, f"{prefix}:out") if source == "broker"
                                        else _out_file(sinks / "out.jsonl"))
                if r == 0:
                    checks[fusion] = _same(outs["broker"], outs["file"], keys)
                    del outs
                b_, f_ = runs[fusion]["broker"][-1], runs[fusion]["file"][-1]
                log(f"  round {r + 1}/{repeat} {label_of(fusion)} (load {loads[-1]}): broker {b_['tuples_per_s']:,.0f}/s, "
                    f"file {f_['tuples_per_s']:,.0f}/s: {b_['tuples_per_s'] / f_['tuples_per_s']:.2f}x")
    finally:
        stop_spark()
        for key in client.scan_iter(match=f"{prefix}*"):
            client.delete(key)
        client.close()
        shutil.rmtree(work, ignore_errors=True)
    doc = _report(runs, checks, fusions, loads, quick, out_dir, ref, tuples, keys, repeat)
    write_atomic(out_dir / "broker_throughput.json", json.dumps(doc, indent=2) + "\n")
    plans = doc["plans"]
    log("broker-throughput: " + "; ".join(
        f"{p} broker/file {v['ratio_broker_over_file']:.2f}x ({v['median_tuples_per_s']['broker']:,.0f} vs "
        f"{v['median_tuples_per_s']['file']:,.0f} records/s)" for p, v in plans.items())
        + f"; {tuples:,} records, target {TARGET}x, load {min(loads)}-{max(loads)}")
    return doc
