"""Benchmark ``fused-overhead``: what fusion and one PE boundary cost, against hand-written code.

1. FALL on a forwarding chain (16 operators) against a plain Python loop calling the
   same operator logic, with no work and with a per-tuple busy loop.
2. One inter-PE link (source PE -> sink PE, 100-byte tuples) against a bare
   pyzmq + msgpack sender/receiver at the same batch size.
Every pair is measured side by side, alternating, ``repeat`` times; figures are the
medians and the ratio of medians. PEs run as real processes with the node agent
(no Spark in the measured path: throughput is timed by the sources themselves).
"""

from __future__ import annotations

import json
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from spadeopt.api import load_graph
from spadeopt.bench.baselines import bare_zmq, hand_loop
from spadeopt.optimize.strategies import plan_for
from spadeopt.runtime.pe import DEFAULT_BATCH
from spadeopt.testing import run_local


def _spadeopt_rate(fusion: str, params: dict[str, str]) -> float:
    graph, ref = load_graph("apps/chain.py", params)
    res = run_local(graph, plan_for(graph, fusion), app_ref=ref)
    pes = res["report"]["pes"]
    (n, first, *_), = [v for pe in pes for v in pe["sources"].values()]
    return n / (max(pe["t_end"] for pe in pes) - first)


def run(out_dir: Path, quick: bool = False, repeat: int = 5, log=print) -> dict[str, Any]:
    tuples = 100_000 if quick else 400_000
    repeat = 2 if quick else repeat
    cases: list[dict[str, Any]] = []
    for work in (0, 20):
        ours, theirs = [], []
        for i in range(repeat):
            ours.append(_spadeopt_rate("all", {"n": "16", "work": str(work), "tuples": str(tuples // (1 + work // 5))}))
            theirs.append(hand_loop(16, tuples // (1 + work // 5), 100, work))
            log(f"  fused chain work={work} [{i + 1}/{repeat}]: spadeopt {ours[-1]:,.0f}/s, hand loop {theirs[-1]:,.0f}/s")
        cases.append(_case(f"FALL 16-operator chain, work={work}", "hand-written Python loop", ours, theirs, 0.7))
    ours, theirs = [], []
    with tempfile.TemporaryDirectory(prefix="spo-bench-") as tmp:
        for i in range(repeat):
            ours.append(_spadeopt_rate("none", {"n": "0", "size": "100", "tuples": str(tuples)}))
            theirs.append(bare_zmq(tuples, 100, DEFAULT_BATCH, f"ipc://{tmp}/bare{i}"))
            log(f"  one link [{i + 1}/{repeat}]: spadeopt {ours[-1]:,.0f}/s, bare pyzmq+msgpack {theirs[-1]:,.0f}/s")
    cases.append(_case("one inter-PE link, 100-byte tuples", f"bare pyzmq+msgpack, batch {DEFAULT_BATCH}",
                       ours, theirs, 0.6))
    doc = {"benchmark": "fused-overhead", "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
           "host": platform.node(), "python": platform.python_version(), "tuples": tuples,
           "repeat": repeat, "cases": cases,
           "note": "shared machine: figures are noisy; compare the ratios, measured side by side"}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "fused_overhead.json").write_text(json.dumps(doc, indent=2) + "\n")
    return doc


def _case(name: str, baseline: str, ours: list[float], theirs: list[float], target: float) -> dict[str, Any]:
    mo, mt = statistics.median(ours), statistics.median(theirs)
    return {"case": name, "baseline": baseline, "spadeopt_tuples_per_s": mo, "baseline_tuples_per_s": mt,
            "ratio": mo / mt, "target_ratio": target, "meets_target": mo / mt >= target,
            "samples": {"spadeopt": ours, "baseline": theirs}}
