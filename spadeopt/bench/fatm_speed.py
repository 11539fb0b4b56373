"""Benchmark: how long FATM takes with fission on (issue 12: 200 operators <= 1 s,
2,000 <= 60 s on 1 x 2 and 1 x 8 cores; issue 36: 200 operators on 1 x 64 cores <= 5 s).

A chain app of ``n`` operators (a source, ``n - 2`` functors, every seventh with a
filter, a sink) declares one parallel region of 10 functors in its middle; a synthetic
profile gives every stream 10,000 tuples/s and the operators loads of 0.002-0.014 cores.
``fuse_auto`` runs at ``--rate max`` on 1 x 2 and 1 x 8 cores (width candidates 1..2 and
1..8, then the MaxFrac ladder on the chosen widths), with automatic region discovery off
and on (issue 27: the rest of the chain becomes two discovered regions, whose widths are
searched too). The many-core cases (:data:`MANY_CORES`: 200 operators on 1 x 16 and
1 x 64 cores, discovery on, as ``spadeopt optimize ... --cores 64`` plans) run once each
and are written as rows of their own. Discovery alone is timed on apps/bargain.py (204 operators, 88 regions).
Wall-clock and CPU seconds
(``time.process_time``) of each call, written to ``optimizer_fatm_speed.json``; small
cases run ``REPEATS`` times and report the fastest call (the least disturbed one; all
calls are listed), the 2,000-operator ones once (many_cores: one call each; its
target is CPU seconds). The load average before each case is
recorded: on a shared machine the wall clock also counts other processes' time.
Synthetic.

    python -m spadeopt.bench.fatm_speed docs/results
    python -m spadeopt.bench.fatm_speed docs/results --against /tmp/old   # before/after, side by side
    python -m spadeopt.bench.fatm_speed docs/results --many-cores   # only 200 operators at 1 x 16 and 1 x 64
    python -m spadeopt.bench.fatm_speed DIR --against /tmp/old --many-cores   # those two, old and new, 2 rounds

``--against TREE`` (a checkout of an older commit, e.g. ``git archive REV | tar -x -C TREE``)
times the same cases (discovery on, as ``fuse_auto`` defaults) under that tree's code and
this one's in turn, each call a fresh process (CPU seconds of the call alone), and writes
``optimizer_fatm_speed_against.json`` with the ratios.
"""

from __future__ import annotations

import itertools
import json
import os
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path

from spadeopt.frontend.dsl import App
from spadeopt.model.graph import AppGraph
from spadeopt.optimize.fatm import OperatorProfile, fuse_auto
from spadeopt.optimize.problem import LinearCommModel
from spadeopt.plan.discover import discover_regions
from spadeopt.toolkit.sources import counter

TARGETS_S = {200: 1.0, 2000: 60.0}
MANY_CORES = ((200, 16), (200, 64))  # (operators, cores), discovery on, one call each
MANY_TARGETS_S = {(200, 64): 5.0}
RATE = 10_000.0
REPEATS = {200: 3}  # calls per case (default 1)


def chain_app(n: int, region: int = 10) -> AppGraph:
    a = App(f"speed{n}")
    s = a.source("src", "seq:int, payload:bytes", generator=counter, args={"n": 10})
    names = []
    for i in range(n - 2):
        s = a.functor(f"f{i}", s, filter="seq >= 0" if i % 7 == 3 else None)
        names.append(f"f{i}")
    a.sink("sink", s)
    a.parallel(*names[n // 2: n // 2 + region], width=1, name="reg")
    return a.build()


def discovery_row(app: str = "apps/bargain.py", repeats: int = 3) -> dict:
    """CPU seconds of ``discover_regions`` alone on ``app`` (the fastest of ``repeats``)."""
    from spadeopt.api import load_graph

    graph, _ = load_graph(app)
    cpus = []
    for _ in range(repeats):
        g = replace(graph)  # a fresh memo: nothing cached from the previous call
        c0 = time.process_time()
        found = discover_regions(g)
        cpus.append(time.process_time() - c0)
    return {"app": app, "operators": len(graph.operators), "regions": len(found.candidates),
            "checks": found.checks, "cpu_seconds": min(cpus), "calls_cpu_seconds": cpus}


def chain_profile(g: AppGraph) -> OperatorProfile:
    """The synthetic profile of :func:`chain_app`'s graph (module docstring)."""
    load = {op.name: 0.002 + (i % 5) * 0.003 for i, op in enumerate(g.operators)}
    return OperatorProfile(g.name, g.fingerprint, load, tuple((s.src.op, s.dst.op, RATE, 60.0) for s in g.streams),
                           RATE)


def many_cores_row(n: int, cores: int) -> dict:
    """One call of ``fuse_auto`` on ``n`` operators at 1 x ``cores`` (discovery on): wall and
    CPU seconds, and what it planned."""
    g = chain_app(n)
    load_avg = os.getloadavg()[0]
    t0, c0 = time.perf_counter(), time.process_time()
    auto = fuse_auto(g, chain_profile(g), LinearCommModel(2e-6, 1e-9), nodes=1, cores=cores, rate="max")
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    target = MANY_TARGETS_S.get((n, cores))
    return {"operators": n, "cores": cores, "discover": True, "seconds": wall, "cpu_seconds": cpu,
            "load_average_1min": load_avg, "pes": len(auto.plan.pes), "widths": auto.explain["fission"]["widths"],
            "predicted_rate": auto.explain["rate"]["predicted"], "max_frac": auto.explain["max_frac"],
            "target_seconds": target, "meets_target": None if target is None else cpu <= target}


def many_rows(cases=MANY_CORES, log=print) -> list[dict]:
    """:func:`many_cores_row` of each ``(operators, cores)`` case, logged."""
    rows = []
    for n, cores in cases:
        r = many_cores_row(n, cores)
        rows.append(r)
        log(f"  {n} operators, 1 x {cores} cores, discovery on: {r['seconds']:.2f} s wall, {r['cpu_seconds']:.2f} s "
            f"CPU ({r['pes']} PEs, predicted {r['predicted_rate']:.0f}/s; load average {r['load_average_1min']:.1f})")
    return rows


def run_many(out_dir: Path, log=print) -> dict:
    """Only the many-core cases, written into ``optimizer_fatm_speed.json``'s ``many_cores``
    (the file's other rows are kept)."""
    path = out_dir / "optimizer_fatm_speed.json"
    doc = json.loads(path.read_text()) if path.exists() else {"benchmark": "fatm-speed"}
    doc["many_cores"] = many_rows(log=log)
    doc["many_cores_when"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    doc["many_cores_command"] = "python -m spadeopt.bench.fatm_speed DIR --many-cores"
    out_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return doc


def run(out_dir: Path, sizes=(200, 2000), cores_list=(2, 8), log=print, discover_list=(False, True),
        discovery_app: str | None = "apps/bargain.py", many_cores=MANY_CORES) -> dict:
    rows = []
    for n in sizes:
        g = chain_app(n)
        prof = chain_profile(g)
        for cores, discover in itertools.product(cores_list, discover_list):
            load_avg = os.getloadavg()[0]
            walls, cpus = [], []
            for _ in range(REPEATS.get(n, 1)):
                t0, c0 = time.perf_counter(), time.process_time()
                auto = fuse_auto(replace(g), prof, LinearCommModel(2e-6, 1e-9), nodes=1, cores=cores, rate="max",
                                 discover=discover)
                walls.append(time.perf_counter() - t0)
                cpus.append(time.process_time() - c0)
            secs = min(walls)
            rows.append({"operators": n, "cores": cores, "discover": discover, "seconds": secs,
                         "cpu_seconds": min(cpus),
                         "calls_seconds": walls, "load_average_1min": load_avg, "pes": len(auto.plan.pes),
                         "widths": auto.explain["fission"]["widths"], "max_frac": auto.explain["max_frac"],
                         "target_seconds": TARGETS_S.get(n), "meets_target": secs <= TARGETS_S.get(n, float("inf"))})
            log(f"  {n} operators, 1 x {cores} cores, discovery {'on' if discover else 'off'}: {secs:.2f} s wall, "
                f"{min(cpus):.2f} s CPU ({len(auto.plan.pes)} PEs; load average {load_avg:.1f})")
    many = many_rows(many_cores, log)
    discovery = discovery_row(discovery_app) if discovery_app else None
    if discovery:
        log(f"  discovery on {discovery['app']}: {discovery['cpu_seconds']:.3f} s CPU, {discovery['checks']} checks")
    doc = {"benchmark": "fatm-speed", "when": time.strftime("%Y-%m-%dT%H:%M:%S"), "python": platform.python_version(),
           "runs": rows, "many_cores": many, "discovery": discovery, "command": "python -m spadeopt.bench.fatm_speed DIR",
           "note": "shared 2-core VM, noisy: seconds is the fastest wall-clock call of the case (calls_seconds "
                   "lists them), cpu_seconds the least process CPU time of its calls; many_cores: one call each"}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "optimizer_fatm_speed.json").write_text(json.dumps(doc, indent=2) + "\n")
    return doc


_CASE = """
import sys, time
from dataclasses import replace
n, cores = int(sys.argv[1]), int(sys.argv[2])
if n == 0:
    from spadeopt.api import load_graph
    from spadeopt.plan.discover import discover_regions
    g, _ = load_graph("apps/bargain.py")
    c0 = time.process_time(); discover_regions(g); print(time.process_time() - c0)
    raise SystemExit(0)
from spadeopt.bench.fatm_speed import chain_app, RATE
from spadeopt.optimize.fatm import OperatorProfile, fuse_auto
from spadeopt.optimize.problem import LinearCommModel
g = chain_app(n)
load = {op.name: 0.002 + (i % 5) * 0.003 for i, op in enumerate(g.operators)}
prof = OperatorProfile(g.name, g.fingerprint, load, tuple((s.src.op, s.dst.op, RATE, 60.0) for s in g.streams), RATE)
c0 = time.process_time()
fuse_auto(g, prof, LinearCommModel(2e-6, 1e-9), nodes=1, cores=cores, rate="max")
print(time.process_time() - c0)
"""


def against(out_dir: Path, base: Path, cases=((0, 0), (200, 2), (200, 8), (2000, 2), (2000, 8)), rounds: int = 2,
            log=print) -> dict:
    """CPU seconds of each case under ``base``'s code and this tree's, alternating, ``rounds``
    times (case ``(0, 0)``: discovery alone on apps/bargain.py); the least of each, and
    before / after."""
    import subprocess

    here = Path(__file__).resolve().parents[2]
    got: dict[tuple[str, int, int], list[float]] = {}
    for _ in range(rounds):
        for n, cores in cases:
            for tag, tree in (("before", Path(base).resolve()), ("after", here)):
                env = {**os.environ, "PYTHONPATH": str(tree)}
                out = subprocess.run([sys.executable, "-c", _CASE, str(n), str(cores)], env=env, cwd=tree,
                                     capture_output=True, text=True, check=True).stdout
                got.setdefault((tag, n, cores), []).append(float(out.split()[-1]))
    rows = []
    for n, cores in cases:
        b, a = min(got[("before", n, cores)]), min(got[("after", n, cores)])
        rows.append({"case": "discovery, apps/bargain.py" if n == 0 else f"{n} operators, 1 x {cores} cores",
                     "before_cpu_seconds": b, "after_cpu_seconds": a, "before_over_after": b / a if a else None,
                     "before_calls": got[("before", n, cores)], "after_calls": got[("after", n, cores)]})
        log(f"  {rows[-1]['case']}: {b:.2f} -> {a:.2f} s CPU ({b / a:.1f}x)")
    doc = {"benchmark": "fatm-speed-against", "when": time.strftime("%Y-%m-%dT%H:%M:%S"), "base": str(base),
           "rows": rows, "load_average_1min_end": os.getloadavg()[0],
           "command": "python -m spadeopt.bench.fatm_speed DIR --against TREE",
           "note": "discovery on (fuse_auto's default), --rate max; each call a fresh process, least CPU of the "
                   "rounds; before and after alternate, so both see the same machine"}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "optimizer_fatm_speed_against.json").write_text(json.dumps(doc, indent=2) + "\n")
    return doc


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if "--against" in args:
        i = args.index("--against")
        base = Path(args[i + 1])
        rest = args[:i] + args[i + 2:]
        many = {"cases": MANY_CORES, "rounds": 2} if "--many-cores" in rest else {}
        rest = [a for a in rest if a != "--many-cores"]
        against(Path(rest[0] if rest else "docs/results"), base, **many)
        return 0
    if "--many-cores" in args:
        rest = [a for a in args if a != "--many-cores"]
        run_many(Path(rest[0] if rest else "docs/results"))
        return 0
    run(Path(args[0] if args else "docs/results"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
