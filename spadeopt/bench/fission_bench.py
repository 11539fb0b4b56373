"""Benchmark ``fission``: what parallel regions buy, and what restoring order costs.

1. Scalability (002's scalability figures): throughput against width 1-4 for a
   stateless region (static-rate: weighted round robin) and a partitioned-stateful one
   (hash split, sequence-number merge), each at several per-tuple costs (busy-loop
   iterations per operator).
2. Ordering overhead (002's ordering figure): at widths 2-4, the order-preserving
   merges (weighted round robin; sequence numbers) against a hand-built unordered
   split + union with the same channels.
3. The issue's targets: the 16-functor peer workload (``apps/peer.py``) as one width-2
   region under FMAN against its width-1 FALL (fused) run; ``apps/bargain_logical.py``
   at width 2 against the hand-built ``apps/bargain.py`` under FMAN.

Every configuration runs under FMAN (the split with the source, each channel one PE,
the merge with the sink) as real processes with the node agent and ZeroMQ on this
machine (Spark is not in the measured path). Configurations of one figure alternate,
``repeat`` times; figures are medians, ratios are of medians measured in the same run.
Throughput: source tuples / (last PE end - first source batch). Writes fission.json
and three PNGs.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

from spadeopt.api import load_graph
from spadeopt.optimize.strategies import plan_for
from spadeopt.orchestrate.build_local import build_and_run

APP = "spadeopt.bench.fission_apps:app"
WIDTHS = (1, 2, 3, 4)


def rate(app_ref: str, params: dict[str, Any], fusion: str = "manual", widths: dict[str, int] | None = None) -> float:
    graph, ref = load_graph(app_ref, {k: str(v) for k, v in params.items()})
    res = build_and_run(graph, plan_for(graph, fusion, widths=widths), app_ref=ref)
    pes = res.report["pes"]
    firsts = [v[1] for pe in pes for v in pe["sources"].values() if v[1] is not None]
    n = sum(v[0] for pe in pes for v in pe["sources"].values())
    return n / (max(pe["t_end"] for pe in pes) - min(firsts))


def _interleaved(configs: dict[str, tuple], repeat: int, log) -> dict[str, float]:
    runs: dict[str, list[float]] = {k: [] for k in configs}
    for _ in range(repeat):
        for name, args in configs.items():
            runs[name].append(rate(*args))
    out = {k: statistics.median(v) for k, v in runs.items()}
    for k, v in out.items():
        log(f"  {k}: {v:,.0f} tuples/s")
    return out


def _tuples(work: int, quick: bool) -> int:
    base = 60_000 if quick else 240_000
    return max(10_000, int(base / (1 + work / 25)))


def run(out_dir: Path, quick: bool = False, repeat: int = 3, log=print) -> dict[str, Any]:
    repeat = 1 if quick else repeat
    works = (0, 100, 400) if not quick else (0, 200)
    doc: dict[str, Any] = {"benchmark": "fission", "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
                           "host": platform.node(), "cpus": os.cpu_count(), "repeat": repeat,
                           "note": "shared machine: other jobs ran at the same time, figures are noisy",
                           "load_average_at_start": list(os.getloadavg())}
    scal: dict[str, Any] = {}
    for kind in ("stateless", "keyed"):
        scal[kind] = {}
        for work in works:
            log(f"scalability {kind} work={work}")
            n = _tuples(work, quick)
            configs = {str(w): (APP, {"kind": kind, "work": work, "tuples": n}, "manual", {"work": w}) for w in WIDTHS}
            got = _interleaved(configs, repeat, log)
            scal[kind][str(work)] = {"tuples": n, "throughput": [got[str(w)] for w in WIDTHS],
                                     "speedup": [got[str(w)] / got["1"] for w in WIDTHS]}
    doc["scalability"] = {"widths": list(WIDTHS), "regions": scal}

    log("ordering overhead")
    order: dict[str, Any] = {}
    n = _tuples(0, quick)
    for w in WIDTHS[1:]:
        configs = {
            "weighted round robin": (APP, {"kind": "stateless", "tuples": n}, "manual", {"work": w}),
            "sequence numbers": (APP, {"kind": "dynamic", "tuples": n}, "manual", {"work": w}),
            "unordered union": (APP, {"kind": "union", "tuples": n, "width": w}, "manual", None),
        }
        got = _interleaved(configs, repeat, log)
        order[str(w)] = {k: {"throughput": v, "vs_union": v / got["unordered union"]} for k, v in got.items()}
    doc["ordering"] = {"tuples": n, "work": 0, "by_width": order}

    log("targets")
    peer_n = 200_000 if quick else 1_000_000
    configs = {
        "peer width 1 FALL": ("apps/peer.py", {"tuples": peer_n}, "all", None),
        "peer width 1 FMAN": ("apps/peer.py", {"tuples": peer_n}, "manual", None),
        "peer width 2 FMAN": ("apps/peer.py", {"tuples": peer_n}, "manual", {"chain": 2}),
    }
    peer = _interleaved(configs, repeat, log)
    bt = 30_000 if quick else 100_000
    configs = {
        "bargain FMAN": ("apps/bargain.py", {"tuples": bt}, "manual", None),
        "bargain_logical width 2 FMAN": ("apps/bargain_logical.py", {"tuples": bt}, "manual", {"symbols": 2}),
        "bargain_logical width 1 FMAN": ("apps/bargain_logical.py", {"tuples": bt}, "manual", {"symbols": 1}),
    }
    barg = _interleaved(configs, repeat, log)
    doc["targets"] = {
        "peer": {"tuples": peer_n, "throughput": peer,
                 "width2_over_width1_fused": peer["peer width 2 FMAN"] / peer["peer width 1 FALL"],
                 "target": ">= 1.6"},
        "bargain": {"tuples": bt, "throughput": barg,
                    "logical_width2_over_hand_fman": barg["bargain_logical width 2 FMAN"] / barg["bargain FMAN"],
                    "target": ">= 0.9"},
    }
    doc["load_average_at_end"] = list(os.getloadavg())
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "fission.json").write_text(json.dumps(doc, indent=2) + "\n")
    _plot(doc, out_dir)
    return doc


def _plot(doc: dict[str, Any], out_dir: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    widths = doc["scalability"]["widths"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, (kind, series) in zip(axes, doc["scalability"]["regions"].items(), strict=True):
        for work, s in series.items():
            ax.plot(widths, s["speedup"], marker="o", label=f"work {work}")
        ax.plot(widths, widths, ls=":", color="grey", label="linear")
        ax.set_title({"stateless": "stateless region (weighted round robin)",
                      "keyed": "partitioned region (hash, sequence numbers)"}[kind], fontsize=9)
        ax.set_xlabel("width (channels)")
        ax.set_xticks(widths)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, title="busy-loop iterations / op")
    axes[0].set_ylabel("throughput relative to width 1")
    fig.suptitle(f"fission scalability on {doc['cpus']} cores (shared machine: noisy)", fontsize=10)
    fig.tight_layout()
    fig.savefig(out_dir / "fission_scalability.png", dpi=120)
    plt.close(fig)

    order = doc["ordering"]["by_width"]
    fig, ax = plt.subplots(figsize=(6, 4))
    ws = [int(w) for w in order]
    for mode in ("weighted round robin", "sequence numbers"):
        ax.plot(ws, [order[str(w)][mode]["vs_union"] for w in ws], marker="o", label=mode)
    ax.axhline(1.0, color="grey", ls=":", label="unordered union")
    ax.set_xlabel("width (channels)")
    ax.set_xticks(ws)
    ax.set_ylabel("throughput relative to unordered union")
    ax.set_title("cost of the order-preserving merge (no per-tuple work)", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out_dir / "fission_ordering.png", dpi=120)
    plt.close(fig)

    t = doc["targets"]
    fig, ax = plt.subplots(figsize=(8, 4))
    labels = list(t["peer"]["throughput"]) + list(t["bargain"]["throughput"])
    vals = list(t["peer"]["throughput"].values()) + list(t["bargain"]["throughput"].values())
    ax.barh(labels, vals, color=["C0"] * 3 + ["C1"] * 3)
    ax.set_xlabel("throughput (source tuples/s)")
    ax.set_title(f"peer width 2 / width 1 fused = {t['peer']['width2_over_width1_fused']:.2f} (target 1.6); "
                 f"bargain_logical w2 / bargain FMAN = {t['bargain']['logical_width2_over_hand_fman']:.2f}",
                 fontsize=8)
    fig.tight_layout()
    fig.savefig(out_dir / "fission_targets.png", dpi=120)
    plt.close(fig)
