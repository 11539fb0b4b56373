"""Benchmark of stage 2: GreedyFuse's gap to the exact optimum, and GreedyFuse's speed.

(a) Gap. On ``n_graphs`` seeded random small problems (5–9 operators, random connected
DAGs, uniform loads, rates and sizes, a linear ``v``; see
:func:`spadeopt.optimize.synthetic.random_small_problem`) run GreedyFuse and the exact
optimizer and record :func:`spadeopt.optimize.exact.gap` (the share of the initial
inter-PE traffic greedy leaves on the table relative to the optimum). Summary: how many
gaps are zero, mean, median, p90, max. The exact optimizer ignores MinUtil (a soft
constraint), so part of the gap is GreedyFuse stopping at MinUtil by design; a second
summary reruns greedy with MinUtil = 1 to show the part due to the greedy choice alone.

(b) Speed. Time GreedyFuse on application-like random DAGs of 200 and 2,000 operators
(:func:`spadeopt.optimize.synthetic.random_app_problem`); best and median of ``repeats``
runs, against the targets of 1 s and 60 s.

(c) Widths. FATM's width heuristic (coordinate ascent) against the exhaustive width
search on small random apps with parallel regions (:mod:`spadeopt.bench.width_gap`).

The problems are synthetic, not profiles of real applications. Writes
``optimizer_gap.json``, ``optimizer_speed.json`` and ``optimizer_widths.json`` into
``out_dir``.

Usage: ``python -m spadeopt.bench.optimizer_bench OUT_DIR``
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import random
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from spadeopt.bench.reports import gap_summary, write_report
from spadeopt.bench.width_gap import width_gap_study
from spadeopt.optimize.exact import exact_fuse, gap
from spadeopt.optimize.greedy_fuse import greedy_fuse
from spadeopt.optimize.synthetic import random_app_problem, random_small_problem

SCHEMA_VERSION = 1
SPEED_TARGETS_S = {200: 1.0, 2000: 60.0}


def run(
    out_dir: Path,
    *,
    n_graphs: int = 200,
    seed: int = 2009,
    speed_sizes: Sequence[int] = (200, 2000),
    repeats: int = 3,
    width_graphs: int = 12,
) -> dict:
    """Run the three parts, write their JSON files into ``out_dir``, return
    ``{"gap", "speed", "widths"}``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    gap_report = gap_study(n_graphs=n_graphs, seed=seed)
    speed_report = speed_study(sizes=speed_sizes, seed=seed, repeats=repeats)
    width_report = width_gap_study(n_graphs=width_graphs, seed=seed)
    write_report(out_dir / "optimizer_gap.json", gap_report)
    write_report(out_dir / "optimizer_speed.json", speed_report)
    write_report(out_dir / "optimizer_widths.json", width_report)
    return {"gap": gap_report, "speed": speed_report, "widths": width_report}


def gap_study(*, n_graphs: int, seed: int) -> dict:
    """GreedyFuse vs exact on ``n_graphs`` random problems of 5–9 operators."""
    cases = []
    start = time.perf_counter()
    for k in range(n_graphs):
        rng = random.Random(f"{seed}-gap-{k}")
        problem = random_small_problem(rng, rng.randint(5, 9))
        greedy, exact = greedy_fuse(problem), exact_fuse(problem)
        # With MinUtil = 1 greedy stops only at MaxFrac: what remains is its myopia.
        greedy_1 = greedy_fuse(dataclasses.replace(problem, min_util=1.0))
        cases.append(
            {
                "case": k,
                "operators": len(problem.operators),
                "links": len(problem.links),
                "objective_initial": greedy.objective_initial,
                "objective_greedy": greedy.objective,
                "objective_exact": exact.objective,
                "pes_greedy": len(greedy.partitions),
                "pes_exact": len(exact.partitions),
                "gap": gap(greedy, exact),
                "gap_min_util_1": gap(greedy_1, exact),
            }
        )
    gaps = [c["gap"] for c in cases]
    worst = max(cases, key=lambda c: c["gap"]) if cases else None
    summary = gap_summary(gaps)
    summary["worst_case"] = worst["case"] if worst else None
    summary["seconds"] = time.perf_counter() - start
    return {
        "schema_version": SCHEMA_VERSION,
        "what": "GreedyFuse vs exact optimum; gap = (obj_greedy - obj_exact) / obj_initial",
        "generator": "spadeopt.optimize.synthetic.random_small_problem (synthetic)",
        "seed": seed,
        "summary": summary,
        "summary_min_util_1": gap_summary([c["gap_min_util_1"] for c in cases]),
        "note": (
            "exact ignores MinUtil (a soft constraint); summary_min_util_1 reruns greedy with "
            "MinUtil = 1 so that only MaxFrac stops it, isolating the greedy choice itself"
        ),
        "cases": cases,
    }


def speed_study(*, sizes: Sequence[int], seed: int, repeats: int) -> dict:
    """Wall-clock time of GreedyFuse on application-like DAGs of the given sizes."""
    runs = []
    for n in sizes:
        problem = random_app_problem(random.Random(f"{seed}-speed-{n}"), n)
        times = []
        for _ in range(max(1, repeats)):
            start = time.perf_counter()
            result = greedy_fuse(problem)
            times.append(time.perf_counter() - start)
        target = SPEED_TARGETS_S.get(n)
        runs.append(
            {
                "operators": n,
                "links": len(problem.links),
                "pes": len(result.partitions),
                "merges": len(result.steps),
                "saturated_singletons": len(result.warnings),
                "objective_initial": result.objective_initial,
                "objective": result.objective,
                "seconds_best": min(times),
                "seconds_median": statistics.median(times),
                "target_seconds": target,
                "meets_target": None if target is None else max(times) < target,
            }
        )
    return {
        "schema_version": SCHEMA_VERSION,
        "what": "GreedyFuse wall-clock time",
        "generator": "spadeopt.optimize.synthetic.random_app_problem (synthetic)",
        "seed": seed,
        "repeats": repeats,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "runs": runs,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: run the benchmark into OUT_DIR and print the headline figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--graphs", type=int, default=200, help="random small graphs for (a)")
    parser.add_argument("--seed", type=int, default=2009)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--width-graphs", type=int, default=12, help="random apps with regions for (c)")
    args = parser.parse_args(argv)
    report = run(args.out_dir, n_graphs=args.graphs, seed=args.seed, repeats=args.repeats,
                 width_graphs=args.width_graphs)
    for key, label in (("summary", ""), ("summary_min_util_1", " (greedy at MinUtil 1)")):
        s = report["gap"][key]
        print(
            f"gap over {s['graphs']} graphs{label}: zero {s['zero_gap']}, mean {s['mean']:.4f}, "
            f"median {s['median']:.4f}, p90 {s['p90']:.4f}, max {s['max']:.4f}"
        )
    w = report["widths"]["summary"]
    print(f"width heuristic vs exhaustive over {w['graphs']} graphs: zero {w['zero_gap']}, mean {w['mean']:.4f}, "
          f"max {w['max']:.4f}; vectors planned {w['vectors_ascent_mean']:.1f} vs {w['vectors_exhaustive_mean']:.1f}")
    for r in report["speed"]["runs"]:
        print(
            f"GreedyFuse {r['operators']} operators / {r['links']} links: "
            f"best {r['seconds_best']:.3f} s, median {r['seconds_median']:.3f} s, "
            f"{r['pes']} PEs after {r['merges']} merges"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
