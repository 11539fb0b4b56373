"""Late data (issue 40): every event-time window counts the tuples it drops as late,
``allowed_lateness`` keeps windows open that much longer, ``late=True`` sends the dropped
tuples on (port ``late``), and the first late tuple warns once per source. Against a
reference written from docs/operators.md, under every fusion (in process and with real
PE processes, whose counters reach the driver's merge), and the bad inputs' errors."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spadeopt import App, count_window, time_window
from spadeopt.errors import GraphError, UsageError
from spadeopt.runtime import metrics
from tests.toolkit.gens import replay
from tests.toolkit.harness import FUSIONS, plan, run_fusions, simulate

SCHEMA = "seq:int, k:int, ts:int, v:int"
OUT = {"k": "k", "ws": "wstart()", "n": "count()", "s": "sum(v)", "lo": "min(v)", "hi": "max(v)"}


def reference(rows: list[dict], size: int, slide: int, lateness: int) -> tuple[list[dict], list[dict]]:
    """docs/operators.md, "Time windows": window k is ``[k*slide, k*slide + size)`` and
    closes once event time (the latest ``ts`` so far) reached its end plus ``lateness``; a
    tuple joins every window holding it that is still open, and is late (dropped, sent to
    the late port) when none is. Returns the rows sorted by (window, key) and the late tuples."""
    wins: dict[tuple[int, int], list[dict]] = {}
    late, top = [], None
    for r in rows:
        ts = r["ts"]
        top = ts if top is None else max(top, ts)
        first_open = math.floor((top - lateness - size) / slide) + 1  # least k with k*slide + size > top - lateness
        holding = range(max(math.floor((ts - size) / slide) + 1, first_open), math.floor(ts / slide) + 1)
        if not holding:
            late.append(r)
        for k in holding:
            wins.setdefault((k, r["k"]), []).append(r)
    out = [{"k": key, "ws": k * slide, "n": len(w), "s": sum(r["v"] for r in w), "lo": min(r["v"] for r in w),
            "hi": max(r["v"] for r in w)} for (k, key), w in sorted(wins.items())]
    return out, late


def late_app(data: list[tuple], size: int, slide: int | None, lateness: float, port: bool = True) -> App:
    a = App("late")
    s = a.source("src", SCHEMA, generator=replay, args={"rows": data})
    win = time_window("ts", size, slide, allowed_lateness=lateness)
    if port:
        rows, late = a.aggregate("w", s, window=win, by=["k"], output=OUT, late=True)
        a.sink("late", late)
    else:
        rows = a.aggregate("w", s, window=win, by=["k"], output=OUT)
    a.sink("rows", rows)
    return a


def shuffled(n: int, seed: int, keys: int = 3, back: int = 30, share: float = 0.2) -> list[tuple]:
    import random

    r = random.Random(seed)
    out, ts = [], 0
    for i in range(n):
        ts += r.choice((0, 1, 2, 3, 7))
        t = ts - r.randint(1, back) if r.random() < share else ts
        out.append((i, r.randrange(keys), t, r.randrange(100)))
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), window=st.sampled_from([(10, 10), (7, 7), (12, 4), (9, 3), (10, 5)]),
       lateness=st.sampled_from([0, 0, 1, 4, 10, 25]), chunks=st.lists(st.integers(1, 30), min_size=1, max_size=3))
def test_rows_late_tuples_and_count_match_the_reference(tmp_path_factory, seed, window, lateness, chunks):
    size, slide = window
    data = shuffled(150, seed)
    counted: dict = {}
    got = simulate(late_app(data, size, slide, lateness), "all", tmp_path_factory.mktemp("l"), chunks=chunks,
                   counters=counted)
    want_rows, want_late = reference([dict(zip(("seq", "k", "ts", "v"), d, strict=True)) for d in data],
                                     size, slide, lateness)
    assert got["late"] == want_late
    assert counted["w"] == {"late": len(want_late)}
    starts = [r["ws"] for r in got["rows"]]
    assert starts == sorted(starts), "rows come out in window order"
    assert sorted(got["rows"], key=lambda r: (r["ws"], r["k"])) == want_rows


def test_allowed_lateness_keeps_a_window_open_until_event_time_passed_its_end_by_it(tmp_path):
    """Tumbling windows of 10: ts 12 does not close [0, 10) with a lateness of 5 (it
    closes at 15), so ts 4 still counts; ts 25 closes [10, 20), so ts 13 is late."""
    data = [(0, 0, 1, 1), (1, 0, 12, 2), (2, 0, 4, 4), (3, 0, 25, 8), (4, 0, 13, 16)]
    strict = simulate(late_app(data, 10, None, 0), "all", tmp_path / "strict")
    assert [r["seq"] for r in strict["late"]] == [2, 4]
    lenient = simulate(late_app(data, 10, None, 5), "all", tmp_path / "lenient")
    assert [r["seq"] for r in lenient["late"]] == [4]
    assert [(r["ws"], r["n"], r["s"]) for r in lenient["rows"]] == [(0, 2, 5), (10, 1, 2), (20, 1, 8)]


def test_every_fusion_gives_the_same_rows_late_tuples_and_count(tmp_path):
    app = late_app(shuffled(300, 7), 10, 5, 3)
    runs = {f: (simulate(app, f, tmp_path / f, chunks=[7, 30], counters=(c := {})), c) for f in FUSIONS}
    base, counted = runs["none"]
    assert base["late"] and counted["w"]["late"] == len(base["late"])
    for f, (got, c) in runs.items():
        assert got == base and c["w"] == counted["w"], f


@pytest.mark.slow
def test_real_pes_report_the_count_the_late_sink_holds_under_every_fusion(tmp_path):
    """With PE processes and ZeroMQ links: each PE's stats carry its counters, the
    driver's merge sums them; the count equals the late sink's lines, under NONE and FALL."""
    app = late_app(shuffled(2000, 3, keys=5), 10, None, 2)
    graph = app.build()
    from spadeopt.orchestrate.build_local import build_and_run

    counts = {}
    for fusion in ("none", "all"):
        res = build_and_run(graph, plan(graph, fusion), workdir=tmp_path / fusion, settings={"batch_size": 7})
        ops, warnings = metrics.merge(st.get("metrics") for st in res.report["pes"])
        counts[fusion] = (ops, res.sinks)
        assert ops["w"]["late"] == len(res.sinks["late"]) > 50, fusion
        assert len(warnings) == 1 and "source 'src'" in warnings[0] and "'ts'" in warnings[0], warnings
    assert counts["none"] == counts["all"]
    assert run_fusions(app, tmp_path / "rf", fusions=("none", "all"))["none"] == counts["none"][1]


def test_one_warning_per_source_naming_it_the_attribute_and_the_jump(tmp_path):
    """Two windows drop tuples of source ``a`` (one warning), one drops tuples of ``b``."""
    data = [(0, 0, 10, 1), (1, 0, 30, 1), (2, 0, 3, 1), (3, 0, 40, 1)]
    a = App("two")
    sa = a.source("a", SCHEMA, generator=replay, args={"rows": data})
    sb = a.source("b", SCHEMA, generator=replay, args={"rows": data})
    for name, src in (("wa1", sa), ("wa2", sa), ("wb", sb)):
        a.sink(f"{name}_rows", a.aggregate(name, src, window=time_window("ts", 10), by=["k"], output=OUT))
    counted: dict = {}
    simulate(a, "none", tmp_path, counters=counted)
    assert {op: c["late"] for op, c in counted.items() if op != "warnings"} == {"wa1": 1, "wa2": 1, "wb": 1}
    warnings = counted["warnings"]
    assert len(warnings) == 2, warnings
    wa, wb = warnings
    assert wa.startswith("source 'a': event time 'ts' went back by at least 27 (to 3)") and "'wa" in wa
    assert wb.startswith("source 'b': ") and "'wb'" in wb
    assert "allowed_lateness" in wa and "late=True" in wa


def test_a_window_without_late_tuples_counts_zero_and_does_not_warn(tmp_path):
    data = [(i, i % 2, i, 1) for i in range(50)]
    counted: dict = {}
    got = simulate(late_app(data, 10, None, 0), "all", tmp_path, counters=counted)
    assert counted == {"w": {"late": 0}, "warnings": []} and got["late"] == [] and got["rows"]


# ---- bad input ------------------------------------------------------------------


def _problems(build) -> str:
    with pytest.raises(GraphError) as e:
        build().build()
    return str(e.value)


@pytest.mark.parametrize("lateness", [-1, float("nan"), float("inf"), "5", True])
def test_a_bad_allowed_lateness_is_refused_naming_the_window(lateness):
    msg = _problems(lambda: late_app([], 10, None, lateness))
    assert "aggregate 'w': allowed_lateness must be a finite number >= 0" in msg and repr(lateness) in msg


def test_a_late_port_on_a_count_window_is_refused():
    def build():
        a = App("x")
        s = a.source("src", SCHEMA, generator=replay, args={"rows": []})
        a.sink("rows", a.aggregate("w", s, window=count_window(5), by=["k"], output={"k": "k"}, late=True))
        return a

    assert "aggregate 'w': late=True needs an event-time window (time_window(...))" in _problems(build)


def test_late_must_be_a_bool():
    def build():
        a = App("x")
        s = a.source("src", SCHEMA, generator=replay, args={"rows": []})
        a.sink("rows", a.aggregate("w", s, window=time_window("ts", 5), output={"n": "count()"}, late="yes"))
        return a

    assert "aggregate 'w': late must be True or False, got 'yes'" in _problems(build)


def test_a_join_window_with_an_allowed_lateness_is_refused():
    def build():
        a = App("x")
        s = a.source("src", SCHEMA, generator=replay, args={"rows": []})
        a.sink("out", a.join("j", s, s, on="k", order="ts", output={"k": "left.k"},
                             window=(time_window("ts", 5, allowed_lateness=2), count_window(1))))
        return a

    msg = _problems(build)
    assert "join 'j': the left window has an allowed_lateness; a join drops no late tuple" in msg


def test_a_late_port_leaving_a_region_is_refused_saying_what_to_do():
    a = late_app([], 10, None, 0)
    a.parallel("w", width=2, name="reg")
    with pytest.raises(UsageError) as e:
        plan(a.build(), "none", {"reg": 2})
    msg = str(e.value)
    assert "left by 2: w.late, w.out" in msg and "mode='unordered' or 'count' inside the region" in msg


@pytest.mark.parametrize("late_mode", ["unordered", "file"])
def test_fatm_plans_a_window_with_a_late_port_and_its_plan_gives_the_width_1_answer(tmp_path, late_mode):
    """FATM (auto) on a profile where the filter and the window dominate, 8 cores: with the
    late tuples in an unordered sink it widens the window with its late sink (a region's
    second output may end in such a sink); with a file sink it keeps the window out of
    any region (the late port would leave it). Either plan gives width 1's rows, late
    tuples and count."""
    from spadeopt.optimize.fatm import fuse_auto
    from spadeopt.optimize.fatm_problem import OperatorProfile
    from tests.optimize.test_fatm_two_entries import COMM

    a = App("fl")
    s = a.source("src", SCHEMA, generator=replay, args={"rows": shuffled(600, 11, keys=7)})
    f = a.functor("f", s, filter="v % 10 < 8")
    rows, late = a.aggregate("w", f, window=time_window("ts", 10, allowed_lateness=2), by=["k"], output=OUT,
                             late=True)
    a.sink("rows", rows)
    a.sink("late", late, mode=late_mode)
    graph = a.build()
    load = {op.name: (1.0 if op.name in ("f", "w") else 0.01) for op in graph.operators}
    links = tuple((st_.src.op, st_.dst.op, 1000.0, 60.0) for st_ in graph.streams)
    auto = fuse_auto(graph, OperatorProfile(graph.name, graph.fingerprint, load, links, 1000.0), COMM, nodes=1,
                     cores=8, rate="max")
    wide = {o for r in auto.plan.regions if r.width > 1 for o in r.operators}
    assert ("w" in wide) == (late_mode == "unordered"), auto.plan.regions
    counted, got_counted = {}, {}
    base = simulate(graph, "all", tmp_path / "w1", chunks=[7, 30], counters=counted)
    got = simulate(graph, "auto", tmp_path / "fatm", seed=3, chunks=[7, 30], given=auto.plan, counters=got_counted)
    assert base["late"] and got == base
    assert got_counted["w"] == counted["w"] == {"late": len(base["late"])}
