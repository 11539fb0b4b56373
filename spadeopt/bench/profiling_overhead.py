"""Benchmark ``profiling-overhead`` (paper 003 Fig. 9): the cost of profiling builds.

Everything fused into one PE (FALL); chains of 1, 8 and 32 forwarding operators and the
bargain app; throughput with profiling off and at s = 0.001, 0.01 and 0.1, measured
side by side (each round runs every setting once, in rotating order). Figures are
medians over the rounds; overhead = 1 - median(profiled) / median(off), on source tuples
per wall-clock second (the primary figure) and, beside it, per CPU second of the PE
processes (``per_cpu_second``: less sensitive to other processes on a shared machine). "Off" is the same
build without instrumentation and without collapsing (profiling builds never collapse),
so the figure is the cost of profiling alone. The machine's 1-minute load average is
recorded before every round, and ``noise`` is the spread of the off runs
((max - min) / median): an overhead inside it is not distinguishable from zero.

A third view, ``in_process_cpu`` (issue 14, round 3), is the least noisy: the same two
generated PE modules, loaded into the bench process and driven by the real runtime
(``PERuntime``; FALL has no links, so nothing but the process boundary is left out),
their sources run in the bench's thread, timed by that thread's CPU clock; settings
alternate and each figure is the minimum over the rounds (the run least disturbed by
other processes), overhead = 1 - min(off) / min(profiled) on tuples per CPU second.

Targets (issue 14): at s = 0.001, <= 10 % on the chain of 8 and <= 25 % on the chain of
32, bargain within noise; beside the paper's Fig. 9 (about 0 %, 10 % and 50 % at
s = 0.001, 0.01 and 0.1).
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from spadeopt.api import load_graph
from spadeopt.optimize.strategies import plan_for
from spadeopt.orchestrate.build_local import build_and_run
from spadeopt.plan.deployment import Sampling
from spadeopt.wire import DEFAULT_BATCH

RATES = (None, 0.001, 0.01, 0.1)
PAPER_FIG9 = {"0.001": 0.0, "0.01": 0.10, "0.1": 0.50}
"""The paper's Fig. 9 overheads (digest 003 §7, F23): about 0 %, 10 % and 50 %."""
TARGETS = {"chain n=8": 0.10, "chain n=32": 0.25}
"""Issue 14's bounds on the overhead at s = 0.001."""


def summarize(label: str, samples: dict[str, list[float]]) -> dict[str, Any]:
    """Medians, overheads against the off median, the off runs' noise, and the target verdict.

    ``samples`` maps ``str(s)`` (``"None"`` for off) to tuples/s of each round.
    """
    off = statistics.median(samples["None"])
    overhead = {k: 1 - statistics.median(v) / off for k, v in samples.items() if k != "None"}
    noise = (max(samples["None"]) - min(samples["None"])) / off
    out: dict[str, Any] = {
        "median_tuples_per_s": {k: statistics.median(v) for k, v in samples.items()},
        "overhead": overhead, "off_noise": noise,
    }
    if label in TARGETS:
        out["target_s0.001"] = f"<= {TARGETS[label]:.0%}"
        out["target_met"] = overhead["0.001"] <= TARGETS[label]
    elif label == "bargain":
        out["target_s0.001"] = "within noise (|overhead| <= off_noise)"
        out["target_met"] = abs(overhead["0.001"]) <= noise
    return out


def _rate(report: dict[str, Any]) -> float:
    """Source tuples per second over the sources' active span. Everything is fused, so a
    source's last batch returns only when all its downstream work is done."""
    spans = [v for pe in report["pes"] for v in pe["sources"].values() if v[1] is not None]
    n = sum(v[0] for v in spans)
    return n / (max(v[2] for v in spans) - min(v[1] for v in spans))


def measure(app: str, params: dict[str, str], s: float | None, workdir: Path) -> tuple[float, float]:
    """One run: (source tuples per wall-clock second, source tuples per CPU second of the PEs).

    The second figure divides by the PEs' process CPU time (``cpu_s`` of the run report),
    so time the process spent waiting for a core on a loaded machine does not count.
    """
    graph, ref = load_graph(app, params)
    plan = _plan(graph, s)
    overrides: dict[str, Any] = {}
    if s is not None:
        run_dir = Path(tempfile.mkdtemp(dir=workdir))
        overrides["profile"] = Sampling(s, 5000, 0, str(run_dir))
    res = build_and_run(graph, plan, app_ref=ref, workdir=Path(tempfile.mkdtemp(dir=workdir)),
                        settings=overrides)
    report = res.report
    n = sum(v[0] for pe in report["pes"] for v in pe["sources"].values())
    return _rate(report), n / sum(pe["cpu_s"] for pe in report["pes"])


def _plan(graph, s: float | None):
    # off: not instrumented and not collapsed (profiling builds never collapse), so the
    # figure is the cost of profiling alone (issue 14)
    plan = dataclasses.replace(plan_for(graph, "all"), collapse=False)
    return plan if s is None else dataclasses.replace(plan, instrumented=True)


def in_process(app: str, params: dict[str, str], workdir: Path, rounds: int) -> dict[str, Any]:
    """Thread CPU seconds of the FALL PE's sources, off and at each rate, run in this process.

    Returns ``{"min_cpu_s": {rate: s}, "overhead": {rate: 1 - min(off)/min(rate)},
    "tuples": n}``. Each round runs every setting once, in rotating order.
    """
    from spadeopt.bench.inprocess import app_env, run_sources
    from spadeopt.codegen.render import generate
    from spadeopt.profiling import Profiler

    graph, ref = load_graph(app, params)
    built = {}
    for profiled in (False, True):  # one instrumented build serves every rate
        build = generate(graph, _plan(graph, 1.0 if profiled else None),
                         Path(tempfile.mkdtemp(dir=workdir)) / "build", ref)
        (pe,) = build.deploy.pes  # FALL: one PE
        built[profiled] = str(build.directory / pe.module)
    modules = {str(s): built[s is not None] for s in RATES}
    cpu: dict[str, list[float]] = {str(s): [] for s in RATES}
    tuples = 0
    with app_env(ref):
        for r in range(rounds):
            for s in RATES[r % len(RATES):] + RATES[:r % len(RATES)]:
                prof = None if s is None else Profiler("pe0", sample_rate=s, reservoir_size=5000, seed=0)
                secs, tuples = run_sources(modules[str(s)], f"spadeopt_bench_pe_{r}_{s}", profiler=prof)
                cpu[str(s)].append(secs)
    best = {k: min(v) for k, v in cpu.items()}
    return {"min_cpu_s": best, "overhead": {k: 1 - best["None"] / v for k, v in best.items() if k != "None"},
            "tuples": tuples, "cpu_s": cpu}


def run(out_dir: Path, quick: bool = False, rounds: int = 5, log=print) -> dict[str, Any]:
    rounds = 2 if quick else rounds
    tuples = 1_000_000 if quick else 2_000_000
    workloads = [(f"chain n={n}", "apps/chain.py", {"n": str(n), "tuples": str(tuples)})
                 for n in ((8,) if quick else (1, 8, 32))]
    if Path("apps/bargain.py").exists():
        # enough tuples for a steady state (the app's default is sized for tests)
        workloads.append(("bargain", "apps/bargain.py",
                          {"tuples": "150000"} if not quick else {"groups": "4", "tuples": "40000"}))
    results = []
    with tempfile.TemporaryDirectory(prefix="spo-prof-bench-") as tmp:
        for label, app, params in workloads:
            samples: dict[str, list[float]] = {str(s): [] for s in RATES}
            per_cpu: dict[str, list[float]] = {str(s): [] for s in RATES}
            loads = []
            for r in range(rounds):
                loads.append(round(os.getloadavg()[0], 2))
                order = RATES[r % len(RATES):] + RATES[:r % len(RATES)]
                for s in order:
                    wall, cpu = measure(app, params, s, Path(tmp))
                    samples[str(s)].append(wall)
                    per_cpu[str(s)].append(cpu)
                log(f"  {label} round {r + 1}/{rounds} (load {loads[-1]}): " + ", ".join(
                    f"s={k}: {v[-1]:,.0f}/s" for k, v in samples.items()))
            cpu_view = summarize(label, per_cpu)
            small = dict(params, tuples=str(min(int(params["tuples"]), 500_000)))
            inproc = in_process(app, small, Path(tmp), 3 if quick else 7)
            if label in TARGETS:
                inproc["target_met"] = inproc["overhead"]["0.001"] <= TARGETS[label]
            log(f"  {label} in-process CPU (min of rounds): " + ", ".join(
                f"s={k}: {v:+.1%}" for k, v in inproc["overhead"].items()))
            results.append({"workload": label, "params": params, **summarize(label, samples),
                            "in_process_cpu": {"params": small, **inproc},
                            "per_cpu_second": {k: cpu_view[k] for k in ("median_tuples_per_s", "overhead",
                                                                       "off_noise", "target_met") if k in cpu_view},
                            "load_avg_1min": loads, "samples": samples, "samples_per_cpu_second": per_cpu})
    doc = {"benchmark": "profiling-overhead", "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
           "host": platform.node(), "cores": os.cpu_count(), "rounds": rounds,
           "fusion": "all (one PE)", "batch": DEFAULT_BATCH,
           "baseline": "the same build without instrumentation, not collapsed",
           "targets": {"s=0.001": "<= 10% on the chain n=8, <= 25% on the chain n=32, bargain within noise"},
           "paper_fig9_overhead": PAPER_FIG9,
           "results": results,
           "command": "spadeopt bench profiling-overhead --out docs/results" + (" --quick" if quick else ""),
           "note": "shared 2-core machine (see load_avg_1min): figures are noisy; settings are "
                   "interleaved round by round"}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "profiling_overhead.json").write_text(json.dumps(doc, indent=2) + "\n")
    return doc
