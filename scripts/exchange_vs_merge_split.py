"""A key exchange against merge + split between two parallel regions, side by side.

    python scripts/exchange_vs_merge_split.py [--rounds N] [--tuples N] [--out FILE]

``tests/apps/exchange.py`` (region ``prep``, then region ``desk`` keyed on another
attribute) under FMAN (each channel one PE) at widths ``prep x desk``, planned twice: with
the key exchange (``plan.regions.choose_exchanges``, what every strategy now plans) and
with the first region's merge and the second's split kept (the same regions with
``fed="split"``). Every run is a fresh process on real PEs without Spark
(``orchestrate.build_local.build_and_run``), the two plans alternating which goes first; throughput is
the source rate from the first source record to the last PE's end, and the CPU of all
PEs per source tuple (less sensitive to a loaded machine). Both runs' sinks are
compared byte for byte. The machine may be shared: the load average is recorded with the
figures, and ratios are of medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

PROBE = r'''
import sys, json, dataclasses, hashlib, pathlib, tempfile
from spadeopt.api import load_graph
from spadeopt.orchestrate.build_local import build_and_run
from spadeopt.optimize.strategies import FMAN
from spadeopt.plan.regions import resolve_regions
app, params, mode = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
graph, ref = load_graph(app, params)
regions = resolve_regions(graph, None, declared_widths=True)
if mode == "merge_split":
    regions = tuple(dataclasses.replace(r, fed="split", after="") if r.fed == "exchange" else r for r in regions)
assert any(r.fed == "exchange" for r in regions) == (mode == "exchange")
out = pathlib.Path(tempfile.mkdtemp())
res = build_and_run(graph, FMAN.partitioned(graph, regions), app_ref=ref, workdir=out)
pes = res.report["pes"]
n = sum(v[0] for pe in pes for v in pe["sources"].values())
first = min(v[1] for pe in pes for v in pe["sources"].values())
sink = sorted(out.rglob("sink.jsonl"))
digest = hashlib.sha256(b"".join(p.read_bytes() for p in sink)).hexdigest()[:16] if sink else None
cpu = sum(pe["cpu_s"] for pe in pes)
print(json.dumps({"rate": n / (max(pe["t_end"] for pe in pes) - first), "cpu_us": cpu / n * 1e6, "pes": len(pes),
                  "sink": digest}))
'''
CASES = {"source 2x2": {"case": "source", "wprep": "2", "wdesk": "2"},
         "keyed 2x2": {"case": "keyed", "wprep": "2", "wdesk": "2"},
         "keyed 3x3": {"case": "keyed", "wprep": "3", "wdesk": "3"}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tuples", type=int, default=200_000)
    ap.add_argument("--out", help="write the figures here (JSON)")
    ns = ap.parse_args()
    modes = ("exchange", "merge_split")
    got: dict[str, dict[str, list[dict]]] = {c: {m: [] for m in modes} for c in CASES}
    loads = [os.getloadavg()[0]]
    for rnd in range(ns.rounds):
        for case, params in CASES.items():
            for mode in (modes if rnd % 2 == 0 else modes[::-1]):
                r = subprocess.run([sys.executable, "-c", PROBE, "tests/apps/exchange.py",
                                    json.dumps({**params, "tuples": str(ns.tuples)}), mode],
                                   capture_output=True, text=True)
                if r.returncode:
                    sys.exit(f"{case} {mode}: {r.stderr[-2000:]}")
                got[case][mode].append(json.loads(r.stdout.strip().splitlines()[-1]))
        loads.append(os.getloadavg()[0])
        print(f"round {rnd + 1}: load {loads[-1]:.2f}", file=sys.stderr)
    doc = {"command": " ".join(sys.argv), "tuples": ns.tuples, "rounds": ns.rounds, "load_avg_1m": loads,
           "cpus": os.cpu_count(), "cases": {}}
    for case in CASES:
        med = {m: statistics.median(x["rate"] for x in got[case][m]) for m in modes}
        cpu = {m: statistics.median(x["cpu_us"] for x in got[case][m]) for m in modes}
        sinks = {x["sink"] for m in modes for x in got[case][m]}
        doc["cases"][case] = {"median_rate": med, "ratio_exchange_over_merge_split": med["exchange"] / med["merge_split"],
                              "median_cpu_us_per_tuple": cpu,
                              "rates": {m: [round(x["rate"]) for x in got[case][m]] for m in modes},
                              "cpu_us_per_tuple": {m: [round(x["cpu_us"], 2) for x in got[case][m]] for m in modes},
                              "pes": {m: got[case][m][0]["pes"] for m in modes}, "same_sinks": len(sinks) == 1}
        print(f"{case}: exchange {med['exchange']:,.0f}/s ({doc['cases'][case]['pes']['exchange']} PEs), "
              f"merge+split {med['merge_split']:,.0f}/s ({doc['cases'][case]['pes']['merge_split']} PEs), "
              f"ratio {med['exchange'] / med['merge_split']:.2f}; CPU per tuple {cpu['exchange']:.2f} vs "
              f"{cpu['merge_split']:.2f} us; same sinks: {len(sinks) == 1}")
    if ns.out:
        with open(ns.out, "w") as f:
            json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
