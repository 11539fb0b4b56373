"""The job state of a running job, from the driver's live metrics (``deploy.live_metrics``).

One dict, the interface between the data path and everything that shows it
(``spadeopt.live``: Prometheus, ``spadeopt top``, the web page); docs/metrics.md gives
its schema. Built from each PE's totals and its last two records (``_PE``), the
deployment (which PE runs which operators on which node, the links), and the driver's
own checkpoint and restart counts.
"""

from __future__ import annotations

import time
from typing import Any

from spadeopt.runtime.latency import BUCKETS_MS

TUPLES, BYTES, BATCHES, BLOCKED = range(4)  # the positions of a sender's counts (PEMetrics.ports_out)
UP_WITHIN_S = 3.0  # a PE is "up" while its last record is this recent
BOTTLENECK_BUSY = 0.5  # below this busy fraction no PE is called the bottleneck


def _fractions(pe: Any) -> tuple[float, float, float]:
    """Busy, idle and backpressure fractions of the last interval's wall time."""
    if pe.dt <= 0:
        return 0.0, 0.0, 0.0
    idle = min(1.0, pe.rate(("idle_s",)))
    blocked = min(1.0 - idle, sum(pe.rate(k) for k in pe.keys("out", BLOCKED)))
    return max(0.0, 1.0 - idle - blocked), idle, blocked


def _pe_rows(c: Any, now: float) -> list[dict[str, Any]]:
    rows = []
    sent = {ref: c.pes[p.pe].get(("out", ref, TUPLES)) for p in c.deploy.pes for ref in p.outputs}
    for p in c.deploy.pes:
        pe = c.pes[p.pe]
        busy, idle, blocked = _fractions(pe)
        outs, ins, srcs = pe.keys("out", TUPLES), pe.keys("in"), pe.keys("sources")
        upstream = sum(sent.get(ln.src, 0.0) for ln in c.deploy.links if ln.dst_pe == p.pe)
        idle_s = pe.get(("idle_s",))
        blocked_s = sum(pe.get(k) for k in pe.keys("out", BLOCKED))
        rows.append({
            "pe": p.pe, "node": p.node, "operators": list(p.operators),
            "up": pe.last is not None and not pe.final and now - pe.seen <= UP_WITHIN_S,
            "done": pe.final,  # ran to its end (not up, and not down either)
            "cpu_seconds": pe.get(("cpu_s",)), "cpu": pe.rate(("cpu_s",)),
            "busy": busy, "idle": idle, "backpressure": blocked,
            "busy_seconds": pe.busy_s, "idle_seconds": idle_s,
            "backpressure_seconds": blocked_s,
            "tuples_in": int(sum(pe.get(k) for k in ins + srcs)),
            "tuples_out": int(sum(pe.get(k) for k in outs)),
            "rate_in": sum(pe.rate(k) for k in ins + srcs), "rate_out": sum(pe.rate(k) for k in outs),
            "queued": int(max(0.0, upstream - sum(pe.get(k) for k in ins))) if ins else 0,
            "restarts": pe.restarts,
        })
    return rows


def _operator_rows(c: Any) -> list[dict[str, Any]]:
    """Each operator's tuples out (``tally``; a source's count), in (what it took from
    other PEs' links; a fused sink's count; None when its input comes only from operators
    fused with it: their output is its input) and its counters (a window's late tuples):
    by PE, channel copies by their own names."""
    rows = []
    for p in c.deploy.pes:
        pe = c.pes[p.pe]
        for op in p.operators:
            outs = [k for k in pe.total if k[0] == "op" and k[1] == op] or \
                   [k for k in pe.total if k[0] == "sources" and k[1] == op]
            ins = [k for k in pe.total if k[0] == "in" and k[1].split(".", 1)[0] == op] or \
                  ([("sinks", op)] if ("sinks", op) in pe.total else [])
            counters = {k[2]: int(pe.get(k)) for k in pe.total if k[0] == "counter" and k[1] == op}
            rows.append({
                "operator": op, "pe": p.pe,
                "tuples_in": int(sum(pe.get(k) for k in ins)) if ins else None,
                "tuples_out": int(sum(pe.get(k) for k in outs)) if outs else None,
                "rate_in": sum(pe.rate(k) for k in ins) if ins else None,
                "rate_out": sum(pe.rate(k) for k in outs) if outs else None,
                "counters": counters})
    return rows


def _link_rows(c: Any) -> list[dict[str, Any]]:
    rows = []
    for ln in c.deploy.links:
        pe = c.pes[ln.src_pe]
        rows.append({"link": ln.id, "from_pe": ln.src_pe, "to_pe": ln.dst_pe, "port": ln.src,
                     "tuples": int(pe.get(("out", ln.src, TUPLES))), "bytes": int(pe.get(("out", ln.src, BYTES))),
                     "rate": pe.rate(("out", ln.src, TUPLES)), "bytes_rate": pe.rate(("out", ln.src, BYTES))})
    return rows


def _ends(c: Any, group: str) -> list[dict[str, Any]]:
    """Sources (with lag) or sinks: tuples and rate, summed over channel copies' PEs."""
    rows: dict[str, dict[str, Any]] = {}
    for p in c.deploy.pes:
        pe = c.pes[p.pe]
        for k in pe.total:
            if k[0] != group:
                continue
            row = rows.setdefault(k[1], {group[:-1]: k[1], "pe": p.pe, "tuples": 0, "rate": 0.0})
            row["tuples"] += int(pe.get(k))
            row["rate"] += pe.rate(k)
            if group == "sources":
                lag = pe.last.lags.get(k[1]) if pe.last is not None else None
                row["lag"], row["live"] = lag, pe.last is not None and k[1] in pe.last.lags
    return sorted(rows.values(), key=lambda r: r[group[:-1]])


def _latency(c: Any) -> dict[str, Any] | None:
    n = len(BUCKETS_MS) + 1
    counts = [sum(pe.get(("latency", i)) for pe in c.pes.values()) for i in range(n)]
    total = sum(counts)
    if not total:
        return None
    cum, buckets = 0, []
    for bound, k in zip([*BUCKETS_MS, "+Inf"], counts, strict=True):
        cum += int(k)
        buckets.append([bound, cum])

    def quantile(q: float) -> float:
        """Linear within the bucket that holds it, as Prometheus's histogram_quantile."""
        lower, below = 0.0, 0
        for bound, k in buckets:
            if k >= q * total:
                if bound == "+Inf":
                    return float(BUCKETS_MS[-1])
                return lower + (float(bound) - lower) * (q * total - below) / max(k - below, 1)
            lower, below = float(bound), k
        return float(BUCKETS_MS[-1])
    return {"count": int(total), "sum_ms": sum(pe.get(("latency", n)) for pe in c.pes.values()),
            "buckets_ms": buckets, "p50_ms": quantile(0.5), "p99_ms": quantile(0.99)}


def job_state(c: Any) -> dict[str, Any]:
    """The state of ``c`` (a ``live_metrics.Collector``; its lock held)."""
    now = time.time()
    pes = _pe_rows(c, now)
    extras = c.extras()
    hosts = {p.node: c.pes[p.pe].last.host for p in c.deploy.pes if c.pes[p.pe].last is not None}
    busiest = max(pes, key=lambda r: r["busy"], default=None)
    return {
        "app": c.deploy.app, "strategy": c.deploy.strategy, "status": c.status,
        "started": c.started, "now": now,
        "nodes": [{"node": n, "host": hosts.get(n)} for n in range(c.deploy.nodes)],
        "pes": pes, "operators": _operator_rows(c), "links": _link_rows(c),
        "sources": _ends(c, "sources"), "sinks": _ends(c, "sinks"),
        "latency": _latency(c), "checkpoints": extras.get("checkpoints"),
        "adaptive": extras.get("adaptive"),  # run --adaptive: its phase and the switch (adaptive.live_view)
        "restarts": max(extras.get("restarts", 0), max((r["restarts"] for r in pes), default=0)),
        "bottleneck": busiest["pe"] if busiest and busiest["busy"] >= BOTTLENECK_BUSY else None,
    }
