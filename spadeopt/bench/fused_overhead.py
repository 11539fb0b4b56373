"""Benchmark ``fused-overhead``: what fusion and one PE boundary cost, against hand-written code.

1. FALL on a forwarding chain (16 operators) against a plain Python loop calling the
   same operator logic, with no work and with a per-tuple busy loop.
2. One inter-PE link (source PE -> sink PE, 100-byte tuples) against a bare
   pyzmq + msgpack sender/receiver at the same batch size, the link authenticated and
   encrypted with CURVE (the default) and with ``insecure_links`` side by side.
3. CPU per tuple at each end of one link (5-attribute tuples, about 100 bytes, read
   from a list so the source costs a few ns a tuple): each PE's process CPU (the run
   report's ``cpu_s``, every thread of the PE, libzmq's I/O thread included) over the
   tuples it sent or received, CURVE and ``insecure_links``, against the bare pair's
   ``time.process_time`` at each end, with and without CURVE. Target: 0.5 us per end.
4. The PE boundary check in process: ``decode_batch`` (arity of every tuple, types
   of the first and last) against a bare ``msgpack.unpackb`` of the same frame, and
   its extra time per batch as a share of the link's time per batch.
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
from spadeopt.bench.baselines import ROWS5_SCHEMA, bare_link_cpu, bare_zmq, hand_loop, rows5
from spadeopt.frontend.dsl import App
from spadeopt.optimize.strategies import plan_for
from spadeopt.orchestrate.build_local import build_and_run
from spadeopt.wire import DEFAULT_BATCH


def _spadeopt_rate(fusion: str, params: dict[str, str], overrides: dict[str, Any] | None = None) -> float:
    graph, ref = load_graph("apps/chain.py", params)
    res = build_and_run(graph, plan_for(graph, fusion), app_ref=ref, settings=overrides)
    pes = res.report["pes"]
    (n, first, *_), = [v for pe in pes for v in pe["sources"].values()]
    return n / (max(pe["t_end"] for pe in pes) - first)


LINK_CPU_TARGET_US = 0.5  # CPU-us per tuple per link end, 5-attribute tuples, CURVE on (issue 27, item 5)


def _link5_cpu(tuples: int, overrides: dict[str, Any] | None = None) -> dict[str, float]:
    """Source PE -> sink PE with ``ROWS5_SCHEMA`` tuples: tuples/s and each PE's CPU
    microseconds per tuple (the run report's ``cpu_s``, the whole run over its tuples)."""
    a = App("link5")
    a.sink("sink", a.source("src", ROWS5_SCHEMA, generator=rows5, args={"n": tuples}), mode="count")
    graph = a.build()
    res = build_and_run(graph, plan_for(graph, "none"), app_ref=__file__, settings=overrides)
    pes = res.report["pes"]
    (send,) = [pe for pe in pes if pe["sources"]]
    (recv,) = [pe for pe in pes if pe["sinks"]]
    if recv["sinks"]["sink"] != tuples:
        raise RuntimeError(f"link benchmark: the sink counted {recv['sinks']['sink']} of {tuples} tuples")
    n, first, *_ = send["sources"]["src"]
    return {"tuples_per_s": n / (recv["t_end"] - first), "send_us": send["cpu_s"] / n * 1e6,
            "receive_us": recv["cpu_s"] / n * 1e6}


def _link_cpu_case(tuples: int, repeat: int, tmp: str, log) -> dict[str, Any]:
    """Case 3 (module docstring): four variants side by side, alternating, ``repeat`` times."""
    import msgpack

    from spadeopt.wire import pack

    rows = rows5(tuples)
    variants: dict[str, list[dict[str, float]]] = {"spadeopt": [], "spadeopt_insecure": [], "bare": [],
                                                   "bare_curve": []}
    for i in range(repeat):
        variants["spadeopt"].append(_link5_cpu(tuples))
        variants["spadeopt_insecure"].append(_link5_cpu(tuples, {"insecure_links": True}))
        variants["bare"].append(bare_link_cpu(rows, DEFAULT_BATCH, f"ipc://{tmp}/cpu{i}"))
        variants["bare_curve"].append(bare_link_cpu(rows, DEFAULT_BATCH, f"ipc://{tmp}/cpucurve{i}", curve=True))
        log(f"  one link, 5 attributes, CPU-us per tuple send/receive [{i + 1}/{repeat}]: "
            + ", ".join(f"{k} {v[-1]['send_us']:.3f}/{v[-1]['receive_us']:.3f}" for k, v in variants.items()))
    med = {k: {m: statistics.median(x[m] for x in v) for m in ("send_us", "receive_us", "tuples_per_s")}
           for k, v in variants.items()}
    worst = max(med["spadeopt"]["send_us"], med["spadeopt"]["receive_us"])
    return {"case": "one inter-PE link, 5-attribute tuples: CPU-us per tuple per end",
            "baseline": f"bare pyzmq+msgpack, batch {DEFAULT_BATCH}, with and without CURVE",
            "schema": ROWS5_SCHEMA, "tuple_bytes": len(pack(rows[0])), "batch": DEFAULT_BATCH, "tuples": tuples,
            "cpu": "each end's process CPU (all threads, libzmq's I/O thread included) over its tuples",
            **{f"{k}_cpu_us": {"send": v["send_us"], "receive": v["receive_us"]} for k, v in med.items()},
            **{f"{k}_tuples_per_s": v["tuples_per_s"] for k, v in med.items()},
            "ratio_to_bare": {"send": med["spadeopt"]["send_us"] / med["bare_curve"]["send_us"],
                              "receive": med["spadeopt"]["receive_us"] / med["bare_curve"]["receive_us"]},
            "target_us": LINK_CPU_TARGET_US, "meets_target": worst <= LINK_CPU_TARGET_US,
            "msgpack": msgpack.version, "samples": variants}


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
    ours, insecure, theirs, theirs_curve = [], [], [], []
    link = {"n": "0", "size": "100", "tuples": str(tuples)}
    with tempfile.TemporaryDirectory(prefix="spo-bench-") as tmp:
        for i in range(repeat):
            ours.append(_spadeopt_rate("none", link))
            insecure.append(_spadeopt_rate("none", link, {"insecure_links": True}))
            theirs.append(bare_zmq(tuples, 100, DEFAULT_BATCH, f"ipc://{tmp}/bare{i}"))
            theirs_curve.append(bare_zmq(tuples, 100, DEFAULT_BATCH, f"ipc://{tmp}/curve{i}", curve=True))
            log(f"  one link [{i + 1}/{repeat}]: spadeopt CURVE {ours[-1]:,.0f}/s, insecure {insecure[-1]:,.0f}/s, "
                f"bare pyzmq+msgpack {theirs[-1]:,.0f}/s, bare with CURVE {theirs_curve[-1]:,.0f}/s")
        link_cpu = _link_cpu_case(tuples, repeat, tmp, log)
    cases.append(_case("one inter-PE link, 100-byte tuples", f"bare pyzmq+msgpack, batch {DEFAULT_BATCH}",
                       ours, theirs, 0.6))
    cases.append(_case("one inter-PE link, 100-byte tuples, insecure", f"bare pyzmq+msgpack, batch {DEFAULT_BATCH}",
                       insecure, theirs, 0.6))
    cases.append(_case("one inter-PE link: CURVE against --insecure-links", "the same link with --insecure-links",
                       ours, insecure, 0.8))
    cases.append(_case("bare pyzmq+msgpack: CURVE against plain (libzmq's own cost)", "the same pair without CURVE",
                       theirs_curve, theirs, 0.8))
    cases.append(link_cpu)
    cases.append(_validation_case(statistics.median(ours)))
    doc = {"benchmark": "fused-overhead", "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
           "host": platform.node(), "python": platform.python_version(), "tuples": tuples,
           "repeat": repeat, "cases": cases,
           "note": "shared machine: figures are noisy; compare the ratios, measured side by side"}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "fused_overhead.json").write_text(json.dumps(doc, indent=2) + "\n")
    return doc


def _validation_case(link_rate: float, frames: int = 2000) -> dict[str, Any]:
    """Time ``decode_batch`` against bare ``msgpack.unpackb`` on a default-size batch."""
    from itertools import islice

    import msgpack

    from spadeopt.toolkit.sources import counter
    from spadeopt.wire import decode_batch, unpack, wire_types

    frame = msgpack.packb(list(islice(counter(DEFAULT_BATCH, 100, seed=1), DEFAULT_BATCH)))
    types = wire_types([["seq", "int"], ["payload", "bytes"]])
    bare, checked = [], []
    for _ in range(5):  # alternate, take the best of each (least disturbed by other load)
        t0 = time.perf_counter()
        for _ in range(frames):
            unpack(frame)
        bare.append((time.perf_counter() - t0) / frames)
        t0 = time.perf_counter()
        for _ in range(frames):
            decode_batch(frame, types)
        checked.append((time.perf_counter() - t0) / frames)
    extra = min(checked) - min(bare)
    per_batch = DEFAULT_BATCH / link_rate
    return {"case": "PE boundary check (decode_batch) per batch", "baseline": "bare msgpack.unpackb",
            "batch": DEFAULT_BATCH, "bare_us": min(bare) * 1e6, "checked_us": min(checked) * 1e6,
            "extra_us": extra * 1e6, "link_us_per_batch": per_batch * 1e6,
            "share_of_link_time": extra / per_batch, "target_share": 0.05, "meets_target": extra / per_batch <= 0.05}


def _case(name: str, baseline: str, ours: list[float], theirs: list[float], target: float) -> dict[str, Any]:
    mo, mt = statistics.median(ours), statistics.median(theirs)
    return {"case": name, "baseline": baseline, "spadeopt_tuples_per_s": mo, "baseline_tuples_per_s": mt,
            "ratio": mo / mt, "target_ratio": target, "meets_target": mo / mt >= target,
            "samples": {"spadeopt": ours, "baseline": theirs}}
