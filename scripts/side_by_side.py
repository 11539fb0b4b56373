"""Throughput of two source trees side by side (a refactor's before and after).

    python scripts/side_by_side.py BEFORE_TREE AFTER_TREE [--rounds N] [--out FILE]

Each tree is a checkout (``git worktree add /tmp/before REV``). Every round runs each case
under FALL in both trees, alternating which goes first, each run a fresh process with the
tree first on ``sys.path``, on real PEs without Spark (``orchestrate.build_local.build_and_run``). The throughput is the
aggregate source rate from the first source record to the last PE's end. Cases: notional
(16 functors, expressions and opaque calls, a counting sink) and bargain (file sinks).
Ratios of medians; the machine may be shared, so say the load average with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

PROBE = r'''
import sys, json
sys.path.insert(0, sys.argv[1])
from spadeopt.api import load_graph
try:
    from spadeopt.orchestrate.build_local import build_and_run as run_local
except ImportError:  # trees before 2026-11-28 (record 065)
    try:
        from spadeopt.deploy.local import run_local
    except ImportError:  # trees before 2026-11-25 evening
        from spadeopt.testing import run_local
from spadeopt.optimize.strategies import plan_for
app, params = sys.argv[2], json.loads(sys.argv[3])
graph, ref = load_graph(app, params)
res = run_local(graph, plan_for(graph, "all"), app_ref=ref)
pes = (res.report if hasattr(res, "report") else res["report"])["pes"]  # a dict before LocalRun
n = sum(v[0] for pe in pes for v in pe["sources"].values())
first = min(v[1] for pe in pes for v in pe["sources"].values())
print(n / (max(pe["t_end"] for pe in pes) - first))
'''
CASES = {"notional-expr": ("apps/notional.py", {"n": "16", "tuples": "3000000", "opaque": "0"}),
         "notional-opaque": ("apps/notional.py", {"n": "16", "tuples": "1000000", "opaque": "1"}),
         "bargain": ("apps/bargain.py", {"tuples": "300000"})}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", help="write the figures here (JSON)")
    ns = ap.parse_args()
    trees = {"before": os.path.abspath(ns.before), "after": os.path.abspath(ns.after)}
    rates: dict[str, dict[str, list[float]]] = {c: {t: [] for t in trees} for c in CASES}
    loads = []
    for rnd in range(ns.rounds):
        for case, (app, params) in CASES.items():
            order = list(trees.items()) if rnd % 2 == 0 else list(reversed(trees.items()))
            for tree, path in order:
                r = subprocess.run([sys.executable, "-c", PROBE, path, app, json.dumps(params)], cwd=path,
                                   capture_output=True, text=True, env={**os.environ, "PYTHONPATH": path})
                if r.returncode:
                    sys.exit(f"{case} in {path} failed:\n{r.stderr[-2000:]}")
                rates[case][tree].append(float(r.stdout.strip().splitlines()[-1]))
        loads.append(round(os.getloadavg()[0], 2))
        print(f"round {rnd + 1}/{ns.rounds} (load {loads[-1]})", file=sys.stderr, flush=True)
    summary = {c: {"before": round(statistics.median(d["before"])), "after": round(statistics.median(d["after"])),
                   "after/before": round(statistics.median(d["after"]) / statistics.median(d["before"]), 3)}
               for c, d in rates.items()}
    doc = {"what": "FALL tuples/s, run_local, fresh process per run, alternating; medians and their ratio",
           "command": "python scripts/side_by_side.py " + " ".join(sys.argv[1:]), "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
           "trees": trees, "load_average_per_round": loads, "summary": summary, "rates": rates}
    print(json.dumps(summary, indent=1))
    if ns.out:
        with open(ns.out, "w") as f:
            json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
