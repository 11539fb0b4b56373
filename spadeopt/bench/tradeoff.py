"""Benchmark ``fusion-tradeoff`` (paper 003 Figs. 6-8) on the chain app.

Operators per PE k: the chain's n forwarding operators are cut into consecutive
groups of k (the source joins the first group, the sink the last), so k = n is FALL
and k = 1 is one PE per forwarder. Three sweeps, each for k = 1, 2, 4, 8, 16, 32:
chain length (Fig. 6), tuple size at n = 16 (Fig. 7), per-tuple computation at n = 16
(Fig. 8). Throughput is end to end (source tuples / time until the last PE is done),
PEs are real processes on this machine (node agent, ZeroMQ; Spark is not in the
measured path). Writes tradeoff.json and one PNG per sweep.
"""

from __future__ import annotations

import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any

from spadeopt.api import load_graph
from spadeopt.optimize.strategies import FIXED
from spadeopt.orchestrate.build_local import build_and_run
from spadeopt.plan.plan import make_plan

KS = (1, 2, 4, 8, 16, 32)


def chunked_plan(graph, n: int, k: int):
    ops = [f"op{i}" for i in range(n)]
    groups = [ops[i:i + k] for i in range(0, n, k)]
    groups[0] = ["src", *groups[0]]
    groups[-1] = [*groups[-1], "sink"]
    return make_plan(graph, FIXED.name, groups, [0] * len(groups), 1, 2, honours=FIXED.honours)


def measure(n: int, k: int, size: int, work: int, tuples: int) -> float:
    graph, ref = load_graph("apps/chain.py", {"n": str(n), "size": str(size), "work": str(work),
                                              "tuples": str(tuples)})
    res = build_and_run(graph, chunked_plan(graph, n, k), app_ref=ref)
    pes = res.report["pes"]
    first = min(v[1] for pe in pes for v in pe["sources"].values() if v[1] is not None)
    return tuples / (max(pe["t_end"] for pe in pes) - first)


def _tuples(work: int, quick: bool) -> int:
    base = 100_000 if quick else 400_000
    return max(5_000, int(base / (1 + work / 4)))


def run(out_dir: Path, quick: bool = False, repeat: int = 2, log=print) -> dict[str, Any]:
    repeat = 1 if quick else repeat
    sweeps = {
        "chain_length": {"x": "operators in the chain", "values": (1, 2, 4, 8, 16, 32),
                         "point": lambda v: (v, 100, 0)},
        "tuple_size": {"x": "tuple size (bytes)", "values": (16, 100, 1000, 4000, 16000),
                       "point": lambda v: (16, v, 0)},
        "computation": {"x": "per-tuple computation (busy-loop iterations per operator)",
                        "values": (0, 5, 20, 50, 200), "point": lambda v: (16, 100, v)},
    }
    doc: dict[str, Any] = {"benchmark": "fusion-tradeoff", "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
                           "host": platform.node(), "repeat": repeat, "sweeps": {}}
    for name, sw in sweeps.items():
        series: dict[str, list[float | None]] = {str(k): [] for k in KS}
        for v in sw["values"]:
            n, size, work = sw["point"](v)
            for k in KS:
                if k > n:
                    series[str(k)].append(None)
                    continue
                tuples = _tuples(work, quick) if size <= 1000 else _tuples(work, quick) // 4
                thr = statistics.median(measure(n, k, size, work, tuples) for _ in range(repeat))
                series[str(k)].append(thr)
                log(f"  {name}={v} k={k}: {thr:,.0f} tuples/s")
        doc["sweeps"][name] = {"x_label": sw["x"], "x": list(sw["values"]), "throughput": series}
    doc["findings"] = findings(doc)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "tradeoff.json").write_text(json.dumps(doc, indent=2) + "\n")
    for name, sw in doc["sweeps"].items():
        _plot(name, sw, out_dir / f"tradeoff_{name}.png")
    return doc


def findings(doc: dict[str, Any]) -> dict[str, Any]:
    """What the measured sweeps say about the paper's two claims, point by point.

    Fig. 6: fusing the whole chain (k = n) is fastest at every chain length. Fig. 8: at
    16 operators, the best partial fusion (k < 16) overtakes fuse-all once the per-tuple
    computation is large enough; ``overtakes_at`` is the first computation size where it
    does and stays ahead at every larger size (``None`` if never).
    """
    out: dict[str, Any] = {}
    cl = doc["sweeps"].get("chain_length")
    if cl:
        best = []
        for i, n in enumerate(cl["x"]):
            vals = {int(k): ys[i] for k, ys in cl["throughput"].items() if ys[i] is not None}
            fall = vals.get(n)
            best.append({"n": n, "fall": fall, "best_k": max(vals, key=vals.__getitem__)})
        out["fig6_fall_fastest_at"] = [b["n"] for b in best if b["best_k"] == b["n"]]
        out["fig6_fall_always_fastest"] = all(b["best_k"] == b["n"] for b in best)
    cp = doc["sweeps"].get("computation")
    if cp:
        rows = []
        for i, w in enumerate(cp["x"]):
            vals = {int(k): ys[i] for k, ys in cp["throughput"].items() if ys[i] is not None}
            fall = vals[16]
            k_best = max((k for k in vals if k < 16), key=vals.__getitem__)
            rows.append({"work": w, "fall": fall, "best_partial_k": k_best,
                         "best_partial_over_fall": vals[k_best] / fall})
        ahead = [r["best_partial_over_fall"] > 1 for r in rows]
        first = next((r["work"] for i, r in enumerate(rows) if all(ahead[i:])), None)
        out["fig8"] = rows
        out["fig8_partial_overtakes_at"] = first
        out["fig8_fall_wins_without_computation"] = not ahead[0]
    return out


def _plot(name: str, sw: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for k, ys in sw["throughput"].items():
        pts = [(x, y) for x, y in zip(sw["x"], ys, strict=True) if y is not None]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{k} op/PE")
    ax.set_xlabel(sw["x_label"])
    ax.set_ylabel("throughput (source tuples/s)")
    if name != "computation":
        ax.set_xscale("log", base=2 if name == "chain_length" else 10)
    else:
        ax.set_xscale("symlog", linthresh=5)
    ax.set_yscale("log")
    ax.set_title({"chain_length": "Fig. 6: chain length", "tuple_size": "Fig. 7: tuple size (16 operators)",
                  "computation": "Fig. 8: computation size (16 operators)"}[name])
    ax.legend(fontsize=8, title="operators per PE")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
