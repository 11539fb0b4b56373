"""Benchmark ``collapse``: static runs compiled into one loop (issue 14, paper 004 §4.2).

The workload (``apps/notional.py``): trades ``(id, price, symbol, volume, ts)`` through
16 functors that each add ``notional = price * volume``, into a counting sink, in one
PE (FALL). Three programs are timed side by side, alternating, ``repeat`` times:

* FALL with collapsing (the default production build),
* FALL with ``--no-collapse`` (one comprehension and one list per operator and batch),
* a hand-unrolled Python loop over the same source generator doing the same 16
  computations per record and building the output tuple.

once with expressions (``price * volume``: collapsing drops the 15 overwritten
products) and once with an opaque Python function per functor (kept as 16 calls in one
pass). Figures are medians and ratios of medians. The apps bargain and outlier are
reported by whether collapsing changes their generated code at all (it does not when
they hold no static run of two or more functors), which decides whether a throughput
difference could be anything but noise. The machine may be shared: figures are noisy.
"""

from __future__ import annotations

import dataclasses
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from spadeopt.api import load_graph
from spadeopt.codegen.render import render_build
from spadeopt.optimize.strategies import plan_for
from spadeopt.orchestrate.build_local import build_and_run

APP = "apps/notional.py"


def _rate(params: dict[str, str], collapse: bool) -> float:
    graph, ref = load_graph(APP, params)
    plan = dataclasses.replace(plan_for(graph, "all"), collapse=collapse)
    res = build_and_run(graph, plan, app_ref=ref)
    pes = res.report["pes"]
    (n, first, *_), = [v for pe in pes for v in pe["sources"].values()]
    return n / (max(pe["t_end"] for pe in pes) - first)


def hand_unrolled(n_ops: int, tuples: int, opaque: bool) -> float:
    """The same ``n_ops`` computations per record, unrolled by hand; records/s."""
    from apps.notional import trades

    loop = _hand_loop(n_ops, opaque)
    t0 = time.perf_counter()
    count, _ = loop(trades(tuples))
    return count / (time.perf_counter() - t0)


def _hand_loop(n_ops: int, opaque: bool):
    """The hand-unrolled loop as a function of an iterable of records: ``n_ops``
    computations per record and the output tuple; returns (records, last row)."""
    from apps.notional import notional_of

    step = "notional_of(p, v)" if opaque else "p * v"
    body = "\n".join(f"        x{i} = {step}" for i in range(n_ops))
    src = (f"def loop(records):\n    count = 0\n    for t in records:\n        p = t[1]\n        v = t[3]\n"
           f"{body}\n        row = (t[0], p, t[2], v, t[4], x{n_ops - 1})\n        count += 1\n"
           f"    return count, row\n")
    ns: dict[str, Any] = {"notional_of": notional_of}
    exec(compile(src, "<hand-unrolled>", "exec"), ns)  # noqa: S102 - our own source text
    return ns["loop"]


def operators_only(tuples: int, opaque: bool, rounds: int, workdir: Path) -> dict[str, Any]:
    """The operators' own cost, without the source's: records generated once, up front.

    The generated FALL PE module (collapsed and not) is loaded into this process and run
    by the real runtime (``PERuntime``; FALL has no links) with its source generator
    replaced by the list of pre-generated records (batched by slicing); the hand-unrolled loop runs
    over the same list. Each is timed by this thread's CPU clock; settings alternate,
    and each figure is the best of ``rounds`` (the run least disturbed by other
    processes). End to end, generating a record costs more than all 16 collapsed
    functors, so the end-to-end ratio cannot show what collapsing buys; this view can.
    """
    from apps.notional import trades
    from spadeopt.bench.inprocess import app_env, run_sources
    from spadeopt.codegen.render import generate

    records = list(trades(tuples))
    params = {"n": "16", "tuples": str(tuples), "opaque": str(int(opaque))}
    graph, ref = load_graph(APP, params)
    modules = {}
    for collapse in (True, False):
        plan = dataclasses.replace(plan_for(graph, "all"), collapse=collapse)
        build = generate(graph, plan, workdir / f"build-{int(opaque)}-{int(collapse)}", ref)
        modules[collapse] = str(build.directory / "pe0.py")
    loop = _hand_loop(16, opaque)

    def pregenerated(module) -> None:
        module._u_trades = lambda **_: records  # a list: cut into batches by slicing

    names = ("collapsed", "no_collapse", "hand_unrolled")
    cpu: dict[str, list[float]] = {k: [] for k in names}
    with app_env(ref):
        for r in range(rounds):
            for name in names[r % 3:] + names[:r % 3]:
                if name == "hand_unrolled":
                    c0 = time.thread_time()
                    loop(records)
                    cpu[name].append(time.thread_time() - c0)
                    continue
                secs, count = run_sources(modules[name == "collapsed"], f"spadeopt_collapse_bench_{r}_{name}",
                                          prepare=pregenerated)
                cpu[name].append(secs)
                if count != tuples:
                    raise RuntimeError(f"the {name} PE took {count} records, not {tuples}")
    best = {k: tuples / min(v) for k, v in cpu.items()}
    return {"records_per_cpu_s": best, "collapsed_vs_hand": best["collapsed"] / best["hand_unrolled"],
            "collapsed_vs_no_collapse": best["collapsed"] / best["no_collapse"], "tuples": tuples,
            "rounds": rounds, "cpu_s": cpu}


def _code_differs(app: str, params: dict[str, str]) -> bool:
    graph, ref = load_graph(app, params)
    plan = plan_for(graph, "all")
    on = render_build(graph, plan, "APP_REF")
    off = render_build(graph, dataclasses.replace(plan, collapse=False), "APP_REF")
    strip = {k: v for k, v in on.items() if k.endswith(".py")}
    return strip != {k: v for k, v in off.items() if k.endswith(".py")}


def run(out_dir: Path, quick: bool = False, repeat: int = 5, log=print) -> dict[str, Any]:
    tuples = 200_000 if quick else 1_000_000
    repeat = 2 if quick else repeat
    cases = []
    for opaque in (0, 1):
        params = {"n": "16", "tuples": str(tuples), "opaque": str(opaque)}
        on, off, hand = [], [], []
        for i in range(repeat):
            on.append(_rate(params, True))
            off.append(_rate(params, False))
            hand.append(hand_unrolled(16, tuples, bool(opaque)))
            log(f"  {'opaque' if opaque else 'expr'} [{i + 1}/{repeat}]: collapsed {on[-1]:,.0f}/s, "
                f"no-collapse {off[-1]:,.0f}/s, hand-unrolled {hand[-1]:,.0f}/s")
        mo, mf, mh = (statistics.median(x) for x in (on, off, hand))
        target = 1.0 if opaque else 3.0
        with tempfile.TemporaryDirectory(prefix="spo-collapse-bench-") as tmp:
            alone = operators_only(min(tuples, 300_000), bool(opaque), 3 if quick else 7, Path(tmp))
        alone["meets_target"] = alone["collapsed_vs_hand"] >= target
        log(f"  {'opaque' if opaque else 'expr'} operators only (records made up front, best of "
            f"{alone['rounds']}): collapsed {alone['collapsed_vs_hand']:.2f}x the hand-unrolled loop, "
            f"{alone['collapsed_vs_no_collapse']:.2f}x no-collapse")
        cases.append({
            "case": f"FALL, 16 functors, {'opaque Python function' if opaque else 'expression price * volume'}",
            "collapsed_per_s": mo, "no_collapse_per_s": mf, "hand_unrolled_per_s": mh,
            "collapsed_vs_hand": mo / mh, "collapsed_vs_no_collapse": mo / mf, "no_collapse_vs_hand": mf / mh,
            "target_collapsed_vs_hand": target, "meets_target": mo / mh >= target,
            "samples": {"collapsed": on, "no_collapse": off, "hand_unrolled": hand},
            "operators_only": alone,
        })
    apps = {name: {"params": params, "collapsing_changes_code": _code_differs(f"apps/{name}.py", params)}
            for name, params in (("bargain", {}), ("outlier", {}))}
    doc = {"benchmark": "collapse", "when": time.strftime("%Y-%m-%dT%H:%M:%S"), "host": platform.node(),
           "python": platform.python_version(), "tuples": tuples, "repeat": repeat, "cases": cases,
           "apps_fall": apps,
           "command": "spadeopt bench collapse" + (" --quick" if quick else ""),
           "note": "shared machine (2 cores, 3 other engineers running Spark): figures are noisy; "
                   "compare the ratios, measured side by side, alternating"}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "collapse.json").write_text(json.dumps(doc, indent=2) + "\n")
    return doc
