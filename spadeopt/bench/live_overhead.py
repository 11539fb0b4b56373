"""Benchmark: what live metrics cost a run, side by side (issue 38: >= 0.97x).

With live metrics on (``spadeopt run``'s default) every PE sends a ``PEMetrics`` record
to the driver once a second (``runtime.pe_live``) and the driver serves them
(``deploy.live_metrics``, ``spadeopt.live``); off (``--no-metrics``) neither runs. The
per-batch counters (tuples, bytes and blocked time per sender, tuples per input port,
each operator's output tally) are in every build, on or off: they are what the records
read, and ``spadeopt bench fused-overhead`` / ``collapse`` measure builds with them.

Workloads: the opaque chain (``apps/chain.py``: a source, N operators each calling a
Python function, a sink) one PE per operator (NONE: the most PEs, links and records)
and fused (FALL). Each round runs every workload on then off, the order alternating
round by round so the machine's drift falls on both; the figure is the ratio of the
medians of the steady source rates, beside the per-round ratios, the load average and
the runs' wall times, and the same ratio on source tuples per CPU second of the PEs
(``per_cpu_ratio``: what the metrics cost in work, less sensitive to the scheduling of
an oversubscribed machine). The sinks must be byte-identical on and off.

    spadeopt bench live-overhead --out OUT_DIR     (--quick: 60,000 records, 2 rounds)

Writes ``OUT_DIR/live_overhead.json`` and ``.md`` (builds under ``OUT_DIR/live_overhead/``).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

from spadeopt.atomic import write_atomic
from spadeopt.bench.spark_auth import _digest

APP = "apps/chain.py"
WORKLOADS = {"chain n=8, NONE": "none", "chain n=8, FALL": "all"}
TARGET = 0.97


def run(out_dir: Path, tuples: int = 300_000, repeat: int = 4, log=print) -> dict[str, Any]:
    from spadeopt import api
    from spadeopt.deploy.launcher import run_build
    from spadeopt.deploy.options import RunOptions
    from spadeopt.output_paths import claim_dir, mark_dir

    work = claim_dir(out_dir / "live_overhead", "live-overhead", "--out")  # refuses what it did not write
    work.mkdir(parents=True, exist_ok=True)
    mark_dir(work, "live-overhead", [APP])
    params = {"n": "8", "work": "40", "tuples": str(tuples)}
    builds = {}
    for name, fusion in WORKLOADS.items():
        d = work / fusion
        shutil.rmtree(d, ignore_errors=True)
        builds[name] = api.build(APP, fusion, params, out=d).directory
    rates: dict[str, dict[str, list[float]]] = {w: {"on": [], "off": []} for w in WORKLOADS}
    walls: dict[str, dict[str, list[float]]] = {w: {"on": [], "off": []} for w in WORKLOADS}
    per_cpu: dict[str, dict[str, list[float]]] = {w: {"on": [], "off": []} for w in WORKLOADS}
    digests: dict[str, set[str]] = {w: set() for w in WORKLOADS}
    loads = []
    for r in range(repeat):
        loads.append(round(os.getloadavg()[0], 2))
        for name in WORKLOADS:
            for mode in (("on", "off") if r % 2 == 0 else ("off", "on")):
                sinks = work / "sinks"
                shutil.rmtree(sinks, ignore_errors=True)
                res = run_build(builds[name], RunOptions(out=sinks, metrics_port=0 if mode == "on" else None))
                rates[name][mode].append(res.steady_throughput)
                per_cpu[name][mode].append(res.tuples / sum(p["cpu_s"] for p in res.per_pe))
                walls[name][mode].append(res.wall_s)
                digests[name].add(_digest(sinks))
            log(f"  round {r + 1}/{repeat} (load {loads[-1]}) {name}: "
                + ", ".join(f"{m} {rates[name][m][-1]:,.0f}/s" for m in ("on", "off")))
    rows = {}
    for name in WORKLOADS:
        on, off = statistics.median(rates[name]["on"]), statistics.median(rates[name]["off"])
        c_on, c_off = statistics.median(per_cpu[name]["on"]), statistics.median(per_cpu[name]["off"])
        rows[name] = {"ratio": on / off if off else None, "on_median": on, "off_median": off,
                      "per_cpu_ratio": c_on / c_off if c_off else None, "per_cpu_second": per_cpu[name],
                      "per_round": [a / b if b else None for a, b in zip(rates[name]["on"], rates[name]["off"],
                                                                           strict=True)],
                      "rates": rates[name], "wall_s": walls[name],
                      "noise": (max(rates[name]["off"]) - min(rates[name]["off"])) / off if off else None,
                      "identical_sinks": len(digests[name]) == 1}
    doc = {"benchmark": "live-overhead", "when": time.strftime("%Y-%m-%dT%H:%M:%S"), "app": APP,
           "params": params, "repeat": repeat, "load_avg": loads, "target": TARGET, "workloads": rows,
           "met": all(r["ratio"] is not None and r["ratio"] >= TARGET for r in rows.values())}
    write_atomic(out_dir / "live_overhead.json", json.dumps(doc, indent=2) + "\n")
    write_atomic(out_dir / "live_overhead.md", _table(doc))
    shutil.rmtree(work / "sinks", ignore_errors=True)
    return doc


def _table(doc: dict[str, Any]) -> str:
    lines = [f"# live metrics on / off ({doc['when']}, {doc['repeat']} rounds, load {doc['load_avg']})", "",
             "| workload | on (median /s) | off (median /s) | on / off | per round | off noise | "
             "on / off per CPU second | sinks |",
             "|---|---:|---:|---:|---|---:|---:|---|"]
    for name, r in doc["workloads"].items():
        rounds = ", ".join(f"{x:.3f}" for x in r["per_round"] if x is not None)
        lines.append(f"| {name} | {r['on_median']:,.0f} | {r['off_median']:,.0f} | {r['ratio']:.3f} | {rounds} | "
                     f"{r['noise']:.1%} | {r['per_cpu_ratio']:.3f} | "
                     f"{'identical' if r['identical_sinks'] else 'DIFFER'} |")
    lines += ["", f"target: on / off >= {doc['target']} on every workload: "
              + ("met" if doc["met"] else "NOT met (see the noise column: a 2-core machine shared with other work)")]
    return "\n".join(lines) + "\n"
