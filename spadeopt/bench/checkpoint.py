"""Benchmark ``checkpoint`` (issue 29): what consistent checkpoints cost.

For each workload, the same build runs with checkpoints every ``interval`` seconds
(1 s) and without, alternating, ``repeat`` times, in one invocation; the figures are the
median source throughput of each and their ratio (target >= 0.9), the checkpoints taken
per run, the size of a checkpoint (every PE's state part, and the sink lines it
committed) and the time per checkpoint (trigger -> every part stored, which includes
the barrier's alignment through the PE graph). Both runs' sink files are compared
(a checkpointing run must write the same bytes).

Workloads: ``apps/bargain.py`` under FALL (its FMAN plan has a cycle of PEs: refused), and a keyed-window workload defined here
(``keyed``: readings of ``keys`` keys, a keyed tumbling event-time window and a keyed
sliding count window, file sinks) under FALL and NONE. PEs are real processes on real
ZeroMQ links, started by the real node agent with the driver's real coordinator and
store; Spark is not in the measured path (the coordinator is the one ``spadeopt run``
uses; the Spark launch around it is the same with and without checkpoints). The machine
is shared with other work: the figures are noisy, compare the side-by-side ratios.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from spadeopt import App, app, count_window, time_window


def readings(n: int, keys: int, seed: int = 1):
    """``n`` readings ``(k, ts, v)`` over ``keys`` keys, 100 per event-time second."""
    x = seed
    for i in range(n):
        x = (x * 1103515245 + 12345) % (1 << 31)
        yield (f"k{x % keys}", i * 0.01, x % 1000)


@app
def keyed(n: int = 400_000, keys: int = 2000, window: float = 20.0, count: int = 25) -> App:
    """The keyed-window workload: per key, a tumbling ``window``-second window (count,
    sum, max) and a sliding window over the last ``count`` readings (mean)."""
    a = App("keyed")
    s = a.source("readings", "k:str, ts:float, v:int", generator=readings, args={"n": n, "keys": keys})
    w = a.aggregate("tumble", s, window=time_window("ts", window), by=["k"],
                    output={"k": "k", "n": "count()", "tot:int": "sum(v)", "hi": "max(v)", "end": "wend()"})
    a.sink("windows", a.functor("share", w, output={"k": "k", "end": "end", "mean:float": "tot / n", "hi": "hi"}))
    c = a.aggregate("slide", s, window=count_window(count, count), by=["k"],
                    output={"k": "k", "m:float": "avg(v)"})
    a.sink("slides", c)
    return a


def _rate(report: dict[str, Any]) -> float:
    pes = report["pes"]
    starts = [v[1] for pe in pes for v in pe["sources"].values() if v[1] is not None]
    n = sum(v[0] for pe in pes for v in pe["sources"].values())
    return n / (max(pe["t_end"] for pe in pes) - min(starts))


def _once(build, work: Path, interval: float | None) -> dict[str, Any]:
    from spadeopt.deploy.agent import run_node
    from spadeopt.deploy.checkpoint_coordinator import Coordinator
    from spadeopt.deploy.checkpoint_store import CheckpointStore, finish_sinks
    from spadeopt.runtime.sinks import commit

    out = work / "out"
    deploy, coord, store = build.deploy, None, None
    if interval is not None:
        store = CheckpointStore(work / "chk", keep=2)
        coord = Coordinator(store, deploy, interval, None)
        deploy = deploy.with_settings(checkpoint=coord.channel())
    report = run_node(0, deploy, str(build.directory), str(out), str(work / "logs"))
    commit(out)
    pes = report["pes"]
    doc: dict[str, Any] = {"tuples_per_s": _rate(report),
                           "sources_cpu_s": sum(pe.get("sources_cpu_s") or 0.0 for pe in pes),
                           "pe_cpu_s": sum(pe["cpu_s"] for pe in pes)}
    snaps = [pe["checkpoints"] for pe in pes if pe.get("checkpoints")]
    if snaps:  # the aligning threads' CPU spent taking parts (snapshot, sink lines), per checkpoint
        doc["snapshot_cpu_s"] = sum(s["snapshot_cpu_s"] for s in snaps) / max(1, max(s["snapshots"] for s in snaps))
    if coord is not None:
        finish_sinks(store, out, coord.finish())
        committed = sum(p.stat().st_size for p in store.sinks.glob("*.jsonl")) if store.sinks.is_dir() else 0
        doc.update(checkpoints=len(coord.completed), state_bytes=coord.sizes, checkpoint_s=coord.align_s,
                   committed_sink_bytes=committed)
    doc["sinks"] = {p.name: p.read_bytes() for p in sorted(out.glob("*.jsonl"))}
    return doc


def _case(name: str, graph, fusion: str, ref: str, interval: float, repeat: int, log) -> dict[str, Any]:
    import dataclasses

    from spadeopt.codegen.render import generate
    from spadeopt.optimize.strategies import plan_for

    plain, ckpt, loads = [], [], []
    same = True
    with tempfile.TemporaryDirectory(prefix="spo-bench-ckpt-") as tmp:
        root = Path(tmp)
        p = plan_for(graph, fusion)
        b_plain = generate(graph, p, root / "b-plain", ref)
        b_ck = generate(graph, dataclasses.replace(p, checkpoints=True), root / "b-ck", ref)
        plain_docs = []
        pair = (("plain", b_plain, None), ("ck", b_ck, interval))
        for i in range(repeat):
            # alternate which runs first: no order effect (a warm cache, the other's writeback)
            got = {tag: _once(b, root / f"{tag}{i}", iv) for tag, b, iv in (pair if i % 2 == 0 else pair[::-1])}
            a, c = got["plain"], got["ck"]
            same = same and a["sinks"] == c["sinks"]
            plain.append(a["tuples_per_s"])
            plain_docs.append(a)
            ckpt.append(c)
            loads.append(round(os.getloadavg()[0], 2))
            log(f"  {name} [{i + 1}/{repeat}]: without {a['tuples_per_s']:,.0f}/s, with checkpoints every "
                f"{interval:g} s {c['tuples_per_s']:,.0f}/s ({c['checkpoints']} checkpoints, sources thread CPU "
                f"{a['sources_cpu_s']:.2f} / {c['sources_cpu_s']:.2f} s, load average {os.getloadavg()[0]:.1f})")
    rates = [c["tuples_per_s"] for c in ckpt]
    sizes = [s for c in ckpt for s in c["state_bytes"]]
    times = [t for c in ckpt for t in c["checkpoint_s"]]
    mp, mc = statistics.median(plain), statistics.median(rates)
    cpu_p = statistics.median(a["sources_cpu_s"] for a in plain_docs)
    cpu_c = statistics.median(c["sources_cpu_s"] for c in ckpt)
    snap_cpu = [c["snapshot_cpu_s"] for c in ckpt if "snapshot_cpu_s" in c]
    return {"case": name, "fusion": fusion, "pes": len(p.pes), "interval_s": interval,
            "without_tuples_per_s": mp, "with_tuples_per_s": mc, "ratio": mc / mp, "target_ratio": 0.9,
            "meets_target": mc / mp >= 0.9, "same_sink_bytes": same,
            "checkpoints_per_run": [c["checkpoints"] for c in ckpt],
            "state_bytes_median": statistics.median(sizes) if sizes else None,
            "state_bytes_max": max(sizes) if sizes else None,
            "sink_bytes_total": statistics.median(c["committed_sink_bytes"] for c in ckpt),  # the whole output
            "checkpoint_s_median": statistics.median(times) if times else None,
            "checkpoint_s_max": max(times) if times else None,
            # CPU of the PEs' sources threads (with one PE, all the work): less noisy than rates on a
            # shared machine; without / with checkpoints (medians), and the snapshot's share per checkpoint
            "sources_cpu_s": {"without": cpu_p, "with": cpu_c, "ratio": cpu_c / cpu_p if cpu_p else None,
                              "samples_without": [a["sources_cpu_s"] for a in plain_docs],
                              "samples_with": [c["sources_cpu_s"] for c in ckpt]},
            # CPU of the PE processes, every thread (the checkpoint thread, ZeroMQ's CURVE of the parts)
            "pe_cpu_s": {"samples_without": [a["pe_cpu_s"] for a in plain_docs],
                         "samples_with": [c["pe_cpu_s"] for c in ckpt]},
            "snapshot_cpu_s_per_checkpoint_median": statistics.median(snap_cpu) if snap_cpu else None,
            "samples": {"without": plain, "with": rates},
            "load_average": loads}  # the 1-minute load average after each pair (others' work on the cores)


def run(out_dir: Path, quick: bool = False, repeat: int = 3, interval: float = 1.0, log=print) -> dict[str, Any]:
    from spadeopt.api import load_graph

    repeat = 1 if quick else repeat
    bargain_tuples = 60_000 if quick else 600_000
    keyed_n = 100_000 if quick else 1_500_000
    cases = []
    load_at_start = round(os.getloadavg()[0], 2)
    graph, ref = load_graph("apps/bargain.py", {"tuples": str(bargain_tuples)})
    # FALL: bargain's FMAN plan fuses the source with the final merges, a cycle of PEs that
    # aligned barriers cannot cross (refused by deploy.checkpointed_run.run;
    # docs/decisions/037-aligned-barrier-checkpoints-with-the-pe-as-unit.md)
    cases.append(_case(f"bargain ({bargain_tuples:,} tuples)", graph, "all", ref, interval, repeat, log))
    kg = keyed.build({"n": keyed_n})
    for fusion in ("all", "none"):
        cases.append(_case(f"keyed windows ({keyed_n:,} readings, 2000 keys)", kg, fusion, __name__, interval,
                           repeat, log))
    doc = {"benchmark": "checkpoint",
           "command": "spadeopt bench checkpoint" + (" --quick" if quick else "") + f" --out {out_dir}",
           "when": time.strftime("%Y-%m-%dT%H:%M:%S"), "host": platform.node(),
           "python": platform.python_version(), "cpus": os.cpu_count(), "repeat": repeat,
           "interval_s": interval, "load_average": {"start": load_at_start, "end": round(os.getloadavg()[0], 2)},
           "cases": cases,
           "note": "one invocation, with and without checkpoints alternating on the same builds; the machine "
                   "(2 cores) was shared with other work, so the figures are noisy: compare the ratios. "
                   "checkpoint_s is trigger -> every PE's part stored (alignment included); state_bytes is "
                   "the sum of the PEs' state parts of one checkpoint. No Spark in the measured path. "
                   "Pairs alternate which run goes first."}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "checkpoint.json").write_text(json.dumps(doc, indent=2) + "\n")
    return doc
