"""The state -> Prometheus mapping: every metric of the table comes out of a full state,
with the right labels and values; histogram buckets cumulative, in seconds; unknown
values left out; docs/metrics.md carries the same table."""

from __future__ import annotations

import math
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from spadeopt.live.prometheus import METRICS, exposition, histogram_buckets, markdown_table
from tests.live.states import full_state

ROOT = Path(__file__).resolve().parents[2]


def _samples(state) -> dict[str, list]:
    out: dict[str, list] = {}
    for fam in text_string_to_metric_families(exposition(state)):
        for s in fam.samples:
            out.setdefault(s.name, []).append(s)
    return out


def _value(samples, name, **labels) -> float:
    found = [s.value for s in samples[name] if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (name, labels, samples.get(name))
    return found[0]


def test_every_metric_of_the_table_is_exposed_from_a_full_state():
    samples = _samples(full_state())
    for m in METRICS:
        name = m.name + "_bucket" if m.type == "histogram" else m.name
        assert name in samples, f"{m.name} missing"
        for s in samples[name]:
            assert set(s.labels) - {"le"} == set(m.labels), (m.name, s.labels)
    assert len({m.name for m in METRICS}) == len(METRICS)
    assert all(m.name.endswith("_total") == (m.type == "counter") for m in METRICS)


def test_labels_and_values_come_from_the_right_rows():
    s = _samples(full_state())
    assert _value(s, "spadeopt_pe_cpu_seconds_total", app="demo", pe="pe0", node="0") == 3.2
    assert _value(s, "spadeopt_pe_backpressure_seconds_total", pe="pe1", node="0") == 1.5
    assert _value(s, "spadeopt_pe_up", pe="pe2", node="1") == 0.0 and _value(s, "spadeopt_pe_up", pe="pe0") == 1.0
    assert _value(s, "spadeopt_pe_queued_tuples", pe="pe2") == 7
    assert _value(s, "spadeopt_pe_restarts_total", pe="pe2") == 2
    assert _value(s, "spadeopt_operator_tuples_out_total", operator="agg", pe="pe2") == 500
    assert _value(s, "spadeopt_operator_events_total", operator="agg", event="late") == 12
    assert len(s["spadeopt_operator_events_total"]) == 1  # f has no counters
    assert _value(s, "spadeopt_link_bytes_total", link="pe1>pe2", from_pe="pe1", to_pe="pe2") == 3300000
    assert _value(s, "spadeopt_source_tuples_total", source="side") == 10
    assert _value(s, "spadeopt_sink_tuples_total", sink="out") == 500
    assert _value(s, "spadeopt_job_info", app="demo", strategy="auto", status="running") == 1
    assert _value(s, "spadeopt_job_start_time_seconds", app="demo") == 1764330000.0
    assert _value(s, "spadeopt_checkpoint_age_seconds") == 1.2
    assert _value(s, "spadeopt_checkpoint_last_bytes") == 20480
    assert _value(s, "spadeopt_checkpoint_duration_seconds_total") == 1.1
    assert _value(s, "spadeopt_checkpoints_total") == 3
    assert _value(s, "spadeopt_restarts_total") == 1
    assert _value(s, "spadeopt_pe_bottleneck", pe="pe0") == 1


def test_lag_only_where_known_and_unknowns_left_out():
    s = _samples(full_state())
    assert [x.labels["source"] for x in s["spadeopt_source_lag_entries"]] == ["src"]
    assert _value(s, "spadeopt_source_lag_entries", source="src") == 345
    state = full_state()
    state["pes"][0]["cpu_seconds"] = None
    state.update(latency=None, checkpoints=None, bottleneck=None)
    s = _samples(state)
    assert {x.labels["pe"] for x in s["spadeopt_pe_cpu_seconds_total"]} == {"pe1", "pe2"}
    assert not any(k.startswith(("spadeopt_latency", "spadeopt_checkpoint", "spadeopt_pe_bottleneck")) for k in s)


def test_an_empty_state_still_says_the_job():
    s = _samples({"app": "x", "status": "starting"})
    assert _value(s, "spadeopt_job_info", app="x", status="starting", strategy="") == 1
    assert set(s) == {"spadeopt_job_info"}


def test_latency_histogram_is_cumulative_in_seconds():
    s = _samples(full_state())
    buckets = [(x.labels["le"], x.value) for x in s["spadeopt_latency_seconds_bucket"]]
    assert buckets == [("0.001", 3), ("0.0025", 10), ("0.005", 30), ("0.01", 38), ("0.025", 40), ("+Inf", 40)]
    assert all(a[1] <= b[1] for a, b in zip(buckets, buckets[1:], strict=False))
    assert _value(s, "spadeopt_latency_seconds_count") == 40
    assert math.isclose(_value(s, "spadeopt_latency_seconds_sum"), 0.18)
    # unsorted bounds are sorted, a dip is lifted, a missing +Inf is added with the count
    assert histogram_buckets({"count": 9, "sum_ms": 1, "buckets_ms": [[5, 4], [1, 5]]}) == [
        (0.001, 5.0), (0.005, 5.0), (math.inf, 9.0)]


def test_docs_list_exactly_the_table():
    doc = (ROOT / "docs" / "metrics.md").read_text()
    assert markdown_table() in doc, "docs/metrics.md's table is stale: paste spadeopt.live.prometheus.markdown_table()"
    documented = {ln.split("`")[1] for ln in doc.splitlines() if ln.startswith("| `spadeopt_")}
    assert documented == {m.name for m in METRICS}
