"""Equation 1, rates and merging on literal per-point summaries (no Spark)."""

from __future__ import annotations

import pytest

from spadeopt.profiling import SampleRecord
from spadeopt.refine.estimate import Agg, RunData, aggregate_records, estimate
from spadeopt.refine.profile import ProfileRun

T0 = 1000.0


def count(n_first: int, n_last: int, secs: float, start: float = T0, n: int = 10) -> Agg:
    return Agg(n, (n_first + n_last) / 2, start, n_first, start + secs, n_last)


def total(n: int, at: float = T0 + 10) -> Agg:
    return Agg(1, n, at, n, at, n)


def mean(v: float, n: int = 100) -> Agg:
    return Agg(n, v, T0, v, T0 + 1, v)


def thread(cpu: float, secs: float, start: float = T0) -> Agg:
    return Agg(5, cpu / 2, start, 0.0, start + secs, cpu)


def run(aggs, pes, links=(), window=(T0, T0 + 10), name="run") -> RunData:
    return RunData(name, pes, frozenset(links), aggs, window,
                   ProfileRun(name, "none", len(pes), 1, 0.01, 100, window[0], window[1] - window[0]))


def profile(*runs, cores=2):
    return estimate(list(runs), app="t", fingerprint="f", params={}, host="h", cpu_model="m", cores=cores)


US = 1e-6


def fused_chain() -> RunData:
    """FALL: src -> a (5 us/tuple, keeps half) -> b (10 us/tuple) -> sink, one PE, 10 s at 1000/s.

    The source thread burns 2 us per tuple itself; all downstream work runs in its submits.
    """
    sink_t = 0.1 * US
    b_t = 10 * US + sink_t  # b's process call includes the sink
    a_t = 5 * US + 0.5 * b_t  # a's process call includes b for half the tuples
    aggs = {
        ("src", "out", "out", None, "count"): count(1000, 10000, 9.0),
        ("src", "out", "out", None, "total"): total(10000),
        ("src", "out", "out", None, "size"): mean(40),
        ("src", "out", "out", None, "submit_cpu"): mean(a_t),
        ("src", "out", "out", "a.in", "process_cpu"): mean(a_t),
        ("src", "thread", "thread", None, "thread_cpu"): thread(10000 * (2 * US + a_t), 10.0),
        ("a", "out", "out", None, "count"): count(500, 5000, 9.0),
        ("a", "out", "out", None, "total"): total(5000),
        ("a", "out", "out", None, "size"): mean(40),
        ("a", "out", "out", None, "submit_cpu"): mean(b_t),
        ("a", "out", "out", "b.in", "process_cpu"): mean(b_t),
        ("b", "out", "out", None, "count"): count(500, 5000, 9.0),
        ("b", "out", "out", None, "total"): total(5000),
        ("b", "out", "out", None, "size"): mean(20),
        ("b", "out", "out", None, "submit_cpu"): mean(sink_t),
        ("b", "out", "out", "sink.in", "process_cpu"): mean(sink_t),
    }
    return run(aggs, {"pe0": ("src", "a", "b", "sink")})


def test_equation_1_under_fusion_recovers_each_operators_own_cpu():
    p = profile(fused_chain())
    u = {op: o.u for op, o in p.operators.items()}
    assert u["src"] == pytest.approx(1000 * 2 * US)
    assert u["a"] == pytest.approx(1000 * 5 * US)
    assert u["b"] == pytest.approx(500 * 10 * US)
    assert u["sink"] == pytest.approx(500 * 0.1 * US)
    assert p.operators["a"].selectivity == {"out": 0.5}
    assert p.operators["src"].selectivity == {"out": None}
    assert p.operators["a"].cpu_per_tuple_s == pytest.approx(5 * US)
    assert p.inputs["b.in"].rate == pytest.approx(500)
    assert p.outputs["b.out"].byte_rate == pytest.approx(500 * 20)
    links = {(lk.src, lk.dst): (lk.rate, lk.size) for lk in p.links}
    assert links == {("src.out", "a.in"): (pytest.approx(1000), 40), ("a.out", "b.in"): (pytest.approx(500), 40),
                     ("b.out", "sink.in"): (pytest.approx(500), 20)}


def unfused_chain() -> RunData:
    """NONE: the same chain, one PE per operator: PE input ports carry process times."""
    aggs = {
        ("src", "out", "out", None, "count"): count(1000, 10000, 9.0),
        ("src", "out", "out", None, "total"): total(10000),
        ("src", "out", "out", None, "size"): mean(40),
        ("src", "out", "out", None, "submit_cpu"): mean(1 * US),  # the send
        ("src", "thread", "thread", None, "thread_cpu"): thread(10000 * 3 * US, 10.0),
        ("a", "in", "in", None, "count"): count(1000, 10000, 9.0),
        ("a", "in", "in", None, "total"): total(10000),
        ("a", "in", "in", None, "size"): mean(40),
        ("a", "in", "in", None, "process_cpu"): mean(5 * US + 0.5 * US),
        ("a", "out", "out", None, "count"): count(500, 5000, 9.0),
        ("a", "out", "out", None, "total"): total(5000),
        ("a", "out", "out", None, "size"): mean(40),
        ("a", "out", "out", None, "submit_cpu"): mean(1 * US),
        ("sink", "in", "in", None, "count"): count(500, 5000, 9.0),
        ("sink", "in", "in", None, "total"): total(5000),
        ("sink", "in", "in", None, "size"): mean(40),
        ("sink", "in", "in", None, "process_cpu"): mean(0.1 * US),
    }
    return run(aggs, {"pe0": ("src",), "pe1": ("a",), "pe2": ("sink",)},
               links={("src.out", "a.in"), ("a.out", "sink.in")})


def test_equation_1_without_fusion_subtracts_the_send():
    p = profile(unfused_chain())
    assert p.operators["src"].u == pytest.approx(1000 * 2 * US)
    assert p.operators["a"].u == pytest.approx(1000 * 5 * US)
    assert p.operators["sink"].u == pytest.approx(500 * 0.1 * US)
    assert {(lk.src, lk.dst) for lk in p.links} == {("src.out", "a.in"), ("a.out", "sink.in")}


def test_ports_of_one_operator_share_a_time_base():
    """The output's own count window is off (few samples), but its rate keeps the exact ratio."""
    r = fused_chain()
    aggs = dict(r.aggs)
    aggs[("a", "out", "out", None, "count")] = count(500, 1000, 0.5, n=2)  # 1000/s: wrong by 2x
    p = profile(run(aggs, r.pes))
    assert p.outputs["a.out"].rate == pytest.approx(500)
    assert p.operators["a"].u == pytest.approx(1000 * 5 * US)


def test_port_without_two_count_samples_falls_back_to_the_operators_window_not_the_manifest():
    r = unfused_chain()
    aggs = {k: v for k, v in r.aggs.items() if k[0] != "sink" or k[4] != "count"}
    aggs[("sink", "in", "in", None, "count")] = Agg(1, 500, T0 + 1, 500, T0 + 1, 500)
    p = profile(run(aggs, r.pes, r.links, window=(T0, T0 + 10)))
    assert p.inputs["sink.in"].rate == pytest.approx(5000 / 10)  # the run's streaming window
    assert any("fewer than two count samples" in w for w in p.warnings)


def test_input_port_fed_from_inside_and_outside_the_pe_adds_both_feeds():
    """u.in gets 300/s over ZeroMQ (in point) and 700/s from an in-PE publisher x."""
    aggs = {
        ("x", "out", "out", None, "count"): count(700, 7000, 9.0),
        ("x", "out", "out", None, "total"): total(7000),
        ("x", "out", "out", None, "size"): mean(10),
        ("x", "out", "out", None, "submit_cpu"): mean(4 * US),
        ("x", "out", "out", "u.in", "process_cpu"): mean(4 * US),
        ("u", "in", "in", None, "count"): count(300, 3000, 9.0),
        ("u", "in", "in", None, "total"): total(3000),
        ("u", "in", "in", None, "size"): mean(30),
        ("u", "in", "in", None, "process_cpu"): mean(4 * US),
    }
    p = profile(run(aggs, {"pe1": ("x", "u")}, links={("y.out", "u.in")}))
    assert p.inputs["u.in"].tuples == 10000
    assert p.inputs["u.in"].rate == pytest.approx(1000)
    assert p.inputs["u.in"].size == pytest.approx(0.7 * 10 + 0.3 * 30)
    assert p.operators["u"].u == pytest.approx(1000 * 4 * US)


def test_negative_noise_is_clamped_and_reported():
    aggs = {
        ("a", "in", "in", None, "count"): count(1000, 10000, 9.0),
        ("a", "in", "in", None, "total"): total(10000),
        ("a", "in", "in", None, "process_cpu"): mean(1 * US),
        ("a", "out", "out", None, "count"): count(1000, 10000, 9.0),
        ("a", "out", "out", None, "total"): total(10000),
        ("a", "out", "out", None, "submit_cpu"): mean(3 * US),
    }
    p = profile(run(aggs, {"pe0": ("a",)}))
    assert p.operators["a"].u == 0.0 and p.operators["a"].u_raw < 0
    assert any("clamped to 0" in w for w in p.warnings)


def test_two_runs_merge_rates_by_mean_and_per_tuple_costs_by_tuples():
    slow = fused_chain()
    fast_aggs = dict(slow.aggs)
    # the same tuples in half the time: twice the rates; the same per-tuple CPU
    for k, v in slow.aggs.items():
        if k[4] in ("count", "thread_cpu"):
            fast_aggs[k] = Agg(v.n, v.mean, v.first_ts, v.first_v, v.first_ts + (v.last_ts - v.first_ts) / 2, v.last_v)
    fast = run(fast_aggs, slow.pes, name="fast")
    p = profile(slow, fast)
    assert p.inputs["a.in"].rate == pytest.approx((1000 + 2000) / 2)
    assert p.inputs["a.in"].tuples == 20000
    assert p.operators["a"].cpu_per_tuple_s == pytest.approx(5 * US)
    assert p.operators["a"].u == pytest.approx(1500 * 5 * US)
    assert p.operators["src"].u == pytest.approx(1500 * 2 * US)
    assert len(p.runs) == 2


def test_short_run_warns_about_non_steady_rates():
    r = unfused_chain()
    aggs = dict(r.aggs)
    aggs[("src", "out", "out", None, "count")] = count(1000, 10000, 4.0)
    p = profile(run(aggs, r.pes, r.links))
    assert any("operator 'src' was active" in w for w in p.warnings)


def test_python_aggregation():
    recs = [SampleRecord("pe0", "a", "out", "out", None, "count", ts, v)
            for ts, v in [(3.0, 300), (1.0, 100), (2.0, 200)]]
    agg = aggregate_records(recs)[("a", "out", "out", None, "count")]
    assert agg == Agg(3, 200.0, 1.0, 100.0, 3.0, 300.0)


def test_source_thread_busy_is_the_busiest_sources_threads_cpu_over_its_life():
    """For a run of one PE: how busy that PE was (issue 27 item 6: a profile taken while
    other work shared the core measured 0.39, and the fit had assumed a whole core)."""
    from spadeopt.refine.estimate import source_thread_busy

    aggs = {("src", "thread", "thread", None, "thread_cpu"): thread(0.8, secs=2.0),
            ("src2", "thread", "thread", None, "thread_cpu"): thread(0.3, secs=2.0),
            ("src", "out", "out", None, "count"): count(0, 1000, secs=2.0)}
    assert source_thread_busy(aggs) == pytest.approx(0.4)
    assert source_thread_busy({("src", "out", "out", None, "count"): count(0, 1000, secs=1.0)}) is None
