"""The Grafana dashboard (docs/grafana/spadeopt-dashboard.json) queries only metrics the
server exposes, through a Prometheus data source variable, and covers what issue 38 asks."""

from __future__ import annotations

import json
import re
from pathlib import Path

from spadeopt.live.prometheus import METRICS

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "spadeopt-dashboard.json"


def _exprs(doc) -> list[str]:
    return [t["expr"] for p in doc["panels"] for t in p.get("targets", [])]


def _named(expr: str) -> set[str]:
    """The spadeopt metric families an expression reads (a histogram's _bucket/_sum/_count as the histogram)."""
    hist = {m.name for m in METRICS if m.type == "histogram"}
    out = set()
    for name in re.findall(r"\bspadeopt_[a-z0-9_]+", expr):
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        out.add(base if base in hist else name)
    return out


def test_every_query_names_only_metrics_of_the_table():
    doc = json.loads(DASHBOARD.read_text())
    known = {m.name for m in METRICS}
    exprs = _exprs(doc)
    assert len(exprs) >= 15
    for e in exprs:
        assert _named(e), f"no spadeopt metric in {e!r}"
        assert _named(e) <= known, f"{e!r} names {_named(e) - known}"
    assert _named("rate(spadeopt_pe_cpu_second_total[1m])") - known, "the check catches a misspelt name"


def test_it_uses_a_datasource_variable_and_covers_the_issue():
    doc = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in doc["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert all(p["datasource"]["uid"] == "${datasource}" for p in doc["panels"])
    used = set().union(*(_named(e) for e in _exprs(doc)))
    for need in ("source_tuples_total", "pe_cpu_seconds_total", "pe_busy_seconds_total",
                 "pe_backpressure_seconds_total", "pe_queued_tuples", "link_tuples_total", "latency_seconds",
                 "checkpoint_age_seconds", "restarts_total", "source_lag_entries"):
        assert "spadeopt_" + need in used, need
    assert sum("histogram_quantile(0.99" in e or "histogram_quantile(0.5" in e for e in _exprs(doc)) == 2
