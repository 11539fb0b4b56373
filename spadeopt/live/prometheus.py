"""A running job's state as Prometheus metrics: one table (``METRICS``) says every metric's
name, type, help, labels and where in the state dict it comes from; ``collect`` turns a
state dict into metric families by that table, and ``exposition`` into the text format
Prometheus scrapes (``GET /metrics`` of ``spadeopt.live.server``).

The state dict is the driver's (``spadeopt.live``'s package docstring shows its schema).
Totals are counters (``_total``); a value that is ``None`` (unknown) is left out rather
than reported as 0. docs/metrics.md lists the same table (a test checks they agree).

>>> [m.name for m in METRICS][:2]
['spadeopt_job_info', 'spadeopt_job_start_time_seconds']
>>> text = exposition({"app": "a", "status": "running", "pes": [{"pe": "pe0", "node": 0, "queued": 7}]})
>>> 'spadeopt_pe_queued_tuples{app="a",node="0",pe="pe0"} 7.0' in text
True
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

PREFIX = "spadeopt_"


@dataclass(frozen=True)
class Metric:
    name: str  # as exposed: a counter's samples end in _total
    type: str  # counter | gauge | histogram
    help: str
    labels: tuple[str, ...]
    source: str  # where in the state: "pes[].cpu_seconds" (every row of a list), "checkpoints.taken", "restarts"


def _m(name: str, type_: str, source: str, labels: str, help_: str) -> Metric:
    return Metric(PREFIX + name, type_, help_, tuple(labels.split()), source)


PE, OP, LINK = "app pe node", "app operator pe", "app link from_pe to_pe"
METRICS: tuple[Metric, ...] = (
    _m("job_info", "gauge", "app strategy status", "app strategy status",
       "1 for the job, labelled with its app, fusion strategy and status (starting, running, done, failed)"),
    _m("job_start_time_seconds", "gauge", "started", "app", "when the job started (Unix time)"),
    _m("restarts_total", "counter", "restarts", "app", "restarts of the job from a checkpoint"),
    _m("pe_up", "gauge", "pes[].up", PE, "1 while the PE process runs, 0 when it is down"),
    _m("pe_cpu_seconds_total", "counter", "pes[].cpu_seconds", PE, "CPU time the PE process used"),
    _m("pe_busy_seconds_total", "counter", "pes[].busy_seconds", PE, "wall time the PE spent processing tuples"),
    _m("pe_idle_seconds_total", "counter", "pes[].idle_seconds", PE, "wall time the PE waited for input"),
    _m("pe_backpressure_seconds_total", "counter", "pes[].backpressure_seconds", PE,
       "wall time the PE was blocked sending to a full downstream queue"),
    _m("pe_tuples_in_total", "counter", "pes[].tuples_in", PE, "tuples the PE took in: off its input links, and from its own sources"),
    _m("pe_tuples_out_total", "counter", "pes[].tuples_out", PE, "tuples the PE sent on its output links to other PEs (each once, whatever the links)"),
    _m("pe_queued_tuples", "gauge", "pes[].queued", PE, "tuples its upstream PEs sent that it has not taken yet (an estimate: counts up to a second apart)"),
    _m("pe_restarts_total", "counter", "pes[].restarts", PE, "restarts of the PE process"),
    _m("pe_bottleneck", "gauge", "bottleneck", "app pe",
       "1 for the PE the driver names the bottleneck: the busiest PE, when it is at least half busy"),
    _m("operator_tuples_in_total", "counter", "operators[].tuples_in", OP, "tuples the operator took off other PEs' links (a sink: its tuples); absent when its input comes only from operators fused with it"),
    _m("operator_tuples_out_total", "counter", "operators[].tuples_out", OP, "tuples the operator emitted (all its ports; a static run counts at its last operator only)"),
    _m("operator_events_total", "counter", "operators[].counters", "app operator event",
       "operator-specific events by name (event=\"late\": tuples an event-time window found late)"),
    _m("link_tuples_total", "counter", "links[].tuples", LINK, "tuples sent over the PE-to-PE link"),
    _m("link_bytes_total", "counter", "links[].bytes", LINK, "bytes sent over the PE-to-PE link"),
    _m("source_tuples_total", "counter", "sources[].tuples", "app source", "tuples the source produced"),
    _m("source_lag_entries", "gauge", "sources[].lag", "app source",
       "entries of a live (broker) source not read yet; absent when unknown"),
    _m("sink_tuples_total", "counter", "sinks[].tuples", "app sink", "tuples the sink wrote"),
    _m("latency_seconds", "histogram", "latency", "app",
       "source -> sink latency of the latency markers (buckets converted from the state's ms)"),
    _m("checkpoints_total", "counter", "checkpoints.taken", "app", "complete checkpoints taken"),
    _m("checkpoint_duration_seconds_total", "counter", "checkpoints.duration_seconds_total", "app",
       "time all checkpoints took, trigger to completion"),
    _m("checkpoint_bytes_total", "counter", "checkpoints.bytes_total", "app", "bytes all checkpoints wrote"),
    _m("checkpoint_last_duration_seconds", "gauge", "checkpoints.last_duration_s", "app",
       "how long the latest complete checkpoint took"),
    _m("checkpoint_last_bytes", "gauge", "checkpoints.last_bytes", "app", "bytes the latest checkpoint wrote"),
    _m("checkpoint_age_seconds", "gauge", "checkpoints.age_s", "app",
       "seconds since the latest complete checkpoint (what a restart now would replay)"),
    _m("adaptive_phase", "gauge", "adaptive.phase", "app",
       "run --adaptive: the phase, 1 while it measures under its start plan (FALL), then 2, 3, ... after "
       "each switch (a live run switches again, up or down)"),
)
"""Every metric ``collect`` makes, in the order it makes them."""

Sample = tuple[tuple[str, ...], Any]  # label values (in the metric's label order), value


def _number(v: Any) -> float | None:
    if v is None or isinstance(v, str):
        return None
    return float(v)


def _rows(state: Mapping[str, Any], m: Metric) -> Iterator[Sample]:
    """The samples of a plain metric: a field of every row of a list section, of a dict
    section, or of the state itself; labels from the row (``app`` from the state)."""
    app = str(state.get("app") or "")
    section, _, field = m.source.rpartition(".")
    if section.endswith("[]"):
        rows = state.get(section[:-2]) or []
    elif section:
        rows = [state.get(section)] if state.get(section) else []
    else:
        rows = [state]
    for row in rows:
        value = _number(row.get(field))
        if value is not None:
            yield tuple(app if lb == "app" else str(row.get(lb, "")) for lb in m.labels), value


def _events(state: Mapping[str, Any], m: Metric) -> Iterator[Sample]:
    app = str(state.get("app") or "")
    for row in state.get("operators") or []:
        for event, n in sorted((row.get("counters") or {}).items()):
            if _number(n) is not None:
                yield (app, str(row.get("operator", "")), str(event)), float(n)


def _job_info(state: Mapping[str, Any], m: Metric) -> Iterator[Sample]:
    yield tuple(str(state.get(lb) or "") for lb in m.labels), 1.0


def _bottleneck(state: Mapping[str, Any], m: Metric) -> Iterator[Sample]:
    if state.get("bottleneck"):
        yield (str(state.get("app") or ""), str(state["bottleneck"])), 1.0


SPECIAL: dict[str, Callable[[Mapping[str, Any], Metric], Iterator[Sample]]] = {
    PREFIX + "job_info": _job_info, PREFIX + "operator_events_total": _events,
    PREFIX + "pe_bottleneck": _bottleneck}


def histogram_buckets(latency: Mapping[str, Any]) -> list[tuple[float, float]]:
    """The state's ``buckets_ms`` ([[upper bound ms or "+Inf", cumulative count], ...]) as
    (upper bound in seconds, cumulative count), sorted, never decreasing, ending in +Inf
    with the total count.

    >>> histogram_buckets({"count": 4, "buckets_ms": [[10, 3], [1, 1]]})
    [(0.001, 1.0), (0.01, 3.0), (inf, 4.0)]
    """
    pairs = sorted((float("inf") if str(le) == "+Inf" else float(le) / 1000.0, float(n))
                   for le, n in latency.get("buckets_ms") or [])
    out: list[tuple[float, float]] = []
    for le, n in pairs:
        out.append((le, max(n, out[-1][1] if out else 0.0)))
    total = float(latency.get("count") or (out[-1][1] if out else 0.0))
    if not out or out[-1][0] != float("inf"):
        out.append((float("inf"), max(total, out[-1][1] if out else 0.0)))
    return out


def collect(state: Mapping[str, Any]) -> list:
    """The metric families of ``state``, one per ``METRICS`` row that has samples."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
    from prometheus_client.utils import floatToGoString

    families = []
    for m in METRICS:
        if m.type == "histogram":
            lat = state.get("latency")
            if not lat:
                continue
            fam = HistogramMetricFamily(m.name, m.help, labels=m.labels)
            buckets = [(floatToGoString(le), n) for le, n in histogram_buckets(lat)]
            fam.add_metric([str(state.get("app") or "")], buckets, float(lat.get("sum_ms") or 0.0) / 1000.0)
            families.append(fam)
            continue
        samples = list(SPECIAL.get(m.name, _rows)(state, m))
        if not samples:
            continue
        if m.type == "counter":
            fam = CounterMetricFamily(m.name.removesuffix("_total"), m.help, labels=m.labels)
        else:
            fam = GaugeMetricFamily(m.name, m.help, labels=m.labels)
        for labels, value in samples:
            fam.add_metric(list(labels), value)
        families.append(fam)
    return families


class StateCollector:
    """A prometheus_client collector that reads ``state()`` at every scrape."""

    def __init__(self, state: Callable[[], Mapping[str, Any]]) -> None:
        self._state = state

    def collect(self):
        return iter(collect(self._state()))

    def describe(self):
        return []  # no fixed set: families appear as the state has samples for them


def registry(state: Callable[[], Mapping[str, Any]]):
    """A private CollectorRegistry (not the process-wide default) over ``state``."""
    from prometheus_client import CollectorRegistry

    reg = CollectorRegistry(auto_describe=False)
    reg.register(StateCollector(state))
    return reg


def exposition(state: Mapping[str, Any]) -> str:
    """The Prometheus text exposition of one state dict."""
    from prometheus_client import generate_latest

    return generate_latest(registry(lambda: state)).decode()


def markdown_table() -> str:
    """The metrics table of docs/metrics.md, generated from ``METRICS``."""
    lines = ["| metric | type | labels | from the state | meaning |", "|---|---|---|---|---|"]
    for m in METRICS:
        lines.append(f"| `{m.name}` | {m.type} | {', '.join(m.labels)} | `{m.source}` | {m.help} |")
    return "\n".join(lines)
