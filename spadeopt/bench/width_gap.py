"""Benchmark: FATM's width heuristic (coordinate ascent) against the exhaustive width search.

On ``n_graphs`` seeded random small apps with parallel regions
(:func:`random_region_app`: a source, 2-3 regions of 1-3 functors each with an
unreplicated functor between them, a sink; random loads, every stream at the profiled
rate) FATM's width choice (:func:`spadeopt.optimize.widths.choose_widths`) runs twice on
the same score (:func:`spadeopt.optimize.fatm.width_scorer`: the predicted rate of the
plan FATM makes for a width vector at ``--rate max``): once exhaustively over every
vector in ``1..nodes x cores`` per region, once by coordinate ascent. The gap of a graph
is ``1 - score(ascent's choice) / score(exhaustive choice)`` (0 when ascent finds the
optimum; the exhaustive choice is the optimum of this score, tie rule included). The
summary mirrors GreedyFuse vs exact (``optimizer_gap.json``): zero gaps, mean, median,
p90, max, and the vectors each search planned. Synthetic, not real profiles.
"""

from __future__ import annotations

import random
import time
from typing import Any

from spadeopt.bench.reports import gap_summary, write_report
from spadeopt.frontend.dsl import App
from spadeopt.model.graph import AppGraph
from spadeopt.optimize.fatm import OperatorProfile, width_scorer
from spadeopt.optimize.predict import DEFAULT_MODEL
from spadeopt.optimize.problem import LinearCommModel
from spadeopt.optimize.widths import choose_widths, free_regions
from spadeopt.plan.regions import resolve_regions

COMM = LinearCommModel(per_tuple_s=2e-6, per_byte_s=1e-9)
RATE = 10_000.0
SCHEMA = "id:int, price:float"


def _ids(n: int):  # a generator the graph names; never run by the benchmark
    yield from ((i, float(i)) for i in range(n))


def random_region_app(rng: random.Random, name: str) -> tuple[AppGraph, OperatorProfile]:
    """A random app with 2-3 parallel regions in a line, and a synthetic profile of it."""
    a = App(name)
    s = a.source("src", SCHEMA, generator=_ids, args={"n": 10})
    load = {"src": rng.uniform(0.01, 0.1)}
    for r in range(rng.randint(2, 3)):
        ops = []
        for j in range(rng.randint(1, 3)):
            op = f"r{r}_{j}"
            s = a.functor(op, s)
            ops.append(op)
            load[op] = rng.uniform(0.02, 0.4)
        a.parallel(*ops, width=1, name=f"reg{r}")
        s = a.functor(f"mid{r}", s)
        load[f"mid{r}"] = rng.uniform(0.005, 0.1)
    a.sink("sink", s, mode="count")
    load["sink"] = rng.uniform(0.005, 0.05)
    graph = a.build()
    links = tuple((st.src.op, st.dst.op, RATE, 40.0) for st in graph.streams)
    return graph, OperatorProfile(graph.name, graph.fingerprint, load, links, RATE)


def width_gap_study(*, n_graphs: int = 20, seed: int = 2009, nodes: int = 1, cores: int = 4) -> dict[str, Any]:
    """Coordinate ascent vs exhaustive width search on ``n_graphs`` random apps."""
    cases = []
    start = time.perf_counter()
    for k in range(n_graphs):
        rng = random.Random(f"{seed}-widths-{k}")
        graph, prof = random_region_app(rng, f"widths{k}")
        regions = resolve_regions(graph, {})
        free = free_regions(graph, None, True)
        score = width_scorer(graph, prof, COMM, nodes, cores, 0.5, 0.95, 1.0, True, DEFAULT_MODEL)
        cache: dict[tuple[int, ...], float | None] = {}

        def cached(rs, score=score, cache=cache):
            key = tuple(r.width for r in rs)
            if key not in cache:
                cache[key] = score(rs)
            return cache[key]

        best, ex_doc = choose_widths(regions, free, nodes * cores, cached, exhaustive_max=10**9)
        got, asc_doc = choose_widths(regions, free, nodes * cores, cached, exhaustive_max=0)
        best_w, got_w = tuple(r.width for r in best), tuple(r.width for r in got)
        best_rate, got_rate = cache[best_w], cache[got_w]
        gap = 1.0 - got_rate / best_rate if best_rate and got_rate else (0.0 if best_rate is None else 1.0)
        cases.append({"case": k, "operators": len(graph.operators), "regions": len(free),
                      "exhaustive_widths": list(best_w), "ascent_widths": list(got_w),
                      "exhaustive_rate": best_rate, "ascent_rate": got_rate, "gap": max(0.0, gap),
                      "vectors_exhaustive": ex_doc["vectors_tried"], "vectors_ascent": asc_doc["vectors_tried"]})
    gaps = [c["gap"] for c in cases]
    summary = gap_summary(gaps)
    summary["seconds"] = time.perf_counter() - start
    summary["vectors_exhaustive_mean"] = sum(c["vectors_exhaustive"] for c in cases) / max(1, len(cases))
    summary["vectors_ascent_mean"] = sum(c["vectors_ascent"] for c in cases) / max(1, len(cases))
    return {"schema_version": 1,
            "what": "FATM width choice: coordinate ascent vs exhaustive search; gap = 1 - rate(ascent) / rate(best)",
            "generator": "spadeopt.bench.width_gap.random_region_app (synthetic)", "seed": seed,
            "nodes": nodes, "cores": cores, "score": "predicted source rate of FATM's plan at --rate max",
            "summary": summary, "cases": cases}


def main(argv: list[str] | None = None) -> int:
    """``python -m spadeopt.bench.width_gap OUT.json [--graphs N]``: part (c) of
    ``spadeopt bench optimizer`` alone (without the GreedyFuse gap and speed parts)."""
    import argparse
    import sys
    from pathlib import Path

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--graphs", type=int, default=12)
    parser.add_argument("--seed", type=int, default=2009)
    args = parser.parse_args(argv)
    doc = width_gap_study(n_graphs=args.graphs, seed=args.seed)
    doc["command"] = "python -m spadeopt.bench.width_gap " + " ".join(argv if argv is not None else sys.argv[1:])
    write_report(args.out, doc)
    s = doc["summary"]
    print(f"width heuristic vs exhaustive over {s['graphs']} graphs: zero gap {s['zero_gap']}, mean {s['mean']:.4f}, "
          f"max {s['max']:.4f}; vectors planned {s['vectors_ascent_mean']:.1f} vs {s['vectors_exhaustive_mean']:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
