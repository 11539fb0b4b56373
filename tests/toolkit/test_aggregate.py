"""Aggregate: count/time, tumbling/sliding windows, group-by, every aggregate function,
end-of-stream flush and event-time gaps, against ``refs`` and across fusions."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spadeopt import App, count_window, time_window
from tests.toolkit import refs
from tests.toolkit.gens import replay
from tests.toolkit.harness import check_unchanged, same_under_fusions

STATS = {"n": "count()", "s": "sum(v)", "a": "avg(v)", "lo": "min(v)", "hi": "max(v)",
         "f": "first(seq)", "la": "last(seq)"}


def stats(w):
    vs = [r["v"] for r in w]
    return {"n": len(vs), "s": sum(vs), "a": sum(vs) / len(vs), "lo": min(vs), "hi": max(vs),
            "f": w[0]["seq"], "la": w[-1]["seq"]}


def keyed(k, w, ws=None, we=None, *, by=("k",), wins=False):
    row = {}
    if by:
        row.update(zip(by, k if len(by) > 1 else (k,), strict=True))
    row.update(stats(w))
    if wins:
        row.update({"ws": ws, "we": we})
    return row


def rows_of(schema: str, data):
    names = [p.split(":")[0].strip() for p in schema.split(",")]
    return [dict(zip(names, d, strict=True)) for d in data]


# ---- count windows -----------------------------------------------------------------------

SCHEMA = "seq:int, k:str, p:int, v:int"


def count_data(n=45, seed=1):
    rng = random.Random(seed)
    return [(i, rng.choice("aab c"), i % 2, rng.randint(-20, 50)) for i in range(n)]


def test_count_windows_match_reference_under_every_fusion(tmp_path):
    data = count_data()
    a = App("aggc")
    s = a.source("src", SCHEMA, generator=replay, args={"rows": data})
    keyed_out = {"k": "k", **STATS}
    a.sink("ct", a.aggregate("ct_agg", s, window=count_window(4), by=["k"], output=keyed_out))
    a.sink("cs", a.aggregate("cs_agg", s, window=count_window(5, 2), by=["k"], output=keyed_out))
    a.sink("cg", a.aggregate("cg_agg", s, window=count_window(6), output=STATS))
    a.sink("cm", a.aggregate("cm_agg", s, window=count_window(3, 1), by=["k", "p"],
                             output={"k": "k", "p": "p", **STATS}))
    # count windows have no start/end: wstart()/wend() are null
    a.sink("cw", a.aggregate("cw_agg", s, window=count_window(10, 5),
                             output={"n": "count()", "ws": "wstart()", "we": "wend()"}))
    got = same_under_fusions(a, tmp_path)

    rows = rows_of(SCHEMA, data)
    k1 = lambda r: r["k"]  # noqa: E731
    assert got["ct"] == refs.agg_count(rows, 4, 4, k1, keyed)
    assert got["cs"] == refs.agg_count(rows, 5, 2, k1, keyed)
    assert got["cg"] == refs.agg_count(rows, 6, 6, lambda r: 0, lambda k, w: stats(w))
    assert got["cm"] == refs.agg_count(rows, 3, 1, lambda r: (r["k"], r["p"]),
                                       lambda k, w: keyed(k, w, by=("k", "p")))
    assert got["cw"] == [{"n": n, "ws": None, "we": None} for n in (5, 10, 10, 10, 10, 10, 10, 10, 10)]


def test_count_flush_semantics_at_end_of_stream(tmp_path):
    """Tumbling count windows flush their partial windows at end of stream (in the order
    they were opened); sliding count windows emit nothing more."""
    data = [(i, "ab"[i % 2], 0, i) for i in range(7)]  # a: 0 2 4 6   b: 1 3 5
    a = App("flushc")
    s = a.source("src", SCHEMA, generator=replay, args={"rows": data})
    out = {"k": "k", "n": "count()", "s": "sum(v)"}
    a.sink("tum", a.aggregate("tum_agg", s, window=count_window(3), by=["k"], output=out))
    a.sink("sld", a.aggregate("sld_agg", s, window=count_window(3, 2), by=["k"], output=out))
    got = same_under_fusions(a, tmp_path, fusions=("none", "all"))
    assert got["tum"] == [{"k": "a", "n": 3, "s": 6}, {"k": "b", "n": 3, "s": 9},
                          {"k": "a", "n": 1, "s": 6}]
    # sliding: every 2nd tuple of a group, over its last 3 (fewer while it is young)
    assert got["sld"] == [{"k": "a", "n": 2, "s": 2}, {"k": "b", "n": 2, "s": 4},
                          {"k": "a", "n": 3, "s": 12}]


# ---- time windows ------------------------------------------------------------------------

TSCHEMA = "seq:int, ts:int, k:str, v:int"
FSCHEMA = "seq:int, ts:float, k:str, v:int"


def time_data(n=40, seed=2, as_float=False):
    """Ordered event times with repeated stamps and gaps longer than every window."""
    rng = random.Random(seed)
    ts, out = 3, []
    for i in range(n):
        ts += rng.choice([0, 0, 1, 1, 2, 3, 17] if i != n // 2 else [40])
        t = ts * 0.25 if as_float else ts
        out.append((i, t, rng.choice("xxyz"), rng.randint(0, 9)))
    return out


def time_app(name, schema, data, windows):
    a = App(name)
    s = a.source("src", schema, generator=replay, args={"rows": data})
    for sink, (w, by) in windows.items():
        out = {**{b: b for b in by}, **STATS, "ws": "wstart()", "we": "wend()"}
        a.sink(sink, a.aggregate(f"{sink}_agg", s, window=w, by=by, output=out))
    return a


def sort_wins(rows):
    return sorted(rows, key=lambda r: (r["we"], r.get("k", "")))


def check_time(got, rows, windows):
    for sink, (w, by) in windows.items():
        keyf = (lambda r: r["k"]) if by else (lambda r: 0)
        want = refs.agg_time(rows, "ts", w.size, w.slide, keyf,
                             lambda g, ws, s, e, by=by: keyed(g, ws, s, e, by=tuple(by), wins=True))
        if w.tumbling:
            assert got[sink] == want, sink
        else:  # windows close in end order; groups within one window in any order
            assert [r["we"] for r in got[sink]] == sorted(r["we"] for r in got[sink]), sink
            assert sort_wins(got[sink]) == sort_wins(want), sink


INT_WINDOWS = {
    "tt": (time_window("ts", 5), ["k"]),
    "ts6": (time_window("ts", 6, 2), ["k"]),
    "ts4": (time_window("ts", 4, 3), []),
    "tg": (time_window("ts", 10), []),
}


def test_time_windows_int_event_time(tmp_path):
    data = time_data()
    got = same_under_fusions(time_app("aggt", TSCHEMA, data, INT_WINDOWS), tmp_path)
    check_time(got, rows_of(TSCHEMA, data), INT_WINDOWS)
    assert all(isinstance(r["ws"], int) for r in got["tt"])


FLOAT_WINDOWS = {
    "ft": (time_window("ts", 1.5), ["k"]),
    "fs": (time_window("ts", 2.0, 0.5), ["k"]),
    "fg": (time_window("ts", 1.25, 0.75), []),
}


def test_time_windows_float_event_time(tmp_path):
    data = time_data(seed=3, as_float=True)
    got = same_under_fusions(time_app("aggf", FSCHEMA, data, FLOAT_WINDOWS), tmp_path)
    check_time(got, rows_of(FSCHEMA, data), FLOAT_WINDOWS)


def test_time_flush_semantics_and_gaps(tmp_path):
    """Tumbling time windows flush the open window at end of stream; sliding time
    windows emit every remaining window that holds a tuple. Gaps emit no empty windows."""
    data = [(0, 1, "x", 1), (1, 2, "x", 2), (2, 30, "x", 4), (3, 31, "y", 8)]
    a = App("flusht")
    s = a.source("src", TSCHEMA, generator=replay, args={"rows": data})
    out = {"k": "k", "s": "sum(v)", "ws": "wstart()", "we": "wend()"}
    a.sink("tum", a.aggregate("tum_agg", s, window=time_window("ts", 10), by=["k"], output=out))
    a.sink("sld", a.aggregate("sld_agg", s, window=time_window("ts", 4, 2), by=["k"], output=out))
    got = same_under_fusions(a, tmp_path, fusions=("none", "all"))
    assert got["tum"] == [{"k": "x", "s": 3, "ws": 0, "we": 10}, {"k": "x", "s": 4, "ws": 30, "we": 40},
                          {"k": "y", "s": 8, "ws": 30, "we": 40}]
    assert sort_wins(got["sld"]) == sort_wins([
        {"k": "x", "s": 1, "ws": -2, "we": 2}, {"k": "x", "s": 3, "ws": 0, "we": 4},
        {"k": "x", "s": 2, "ws": 2, "we": 6},
        {"k": "x", "s": 4, "ws": 28, "we": 32}, {"k": "x", "s": 4, "ws": 30, "we": 34},
        {"k": "y", "s": 8, "ws": 28, "we": 32}, {"k": "y", "s": 8, "ws": 30, "we": 34},
    ])


def test_time_windows_drop_late_tuples(tmp_path):
    """Input must be ordered by the time attribute. A tuple older than the oldest open
    window (tumbling: the current window) is late and dropped; an out-of-order tuple
    that still belongs to an open window is counted in the open windows holding it."""
    data = [(0, 1, "x", 1), (1, 12, "x", 2), (2, 3, "x", 100), (3, 10, "x", 1000), (4, 14, "x", 4)]
    a = App("late")
    s = a.source("src", TSCHEMA, generator=replay, args={"rows": data})
    out = {"s": "sum(v)", "n": "count()", "ws": "wstart()", "f": "first(seq)"}
    a.sink("tum", a.aggregate("tum_agg", s, window=time_window("ts", 10), output=out))
    a.sink("sld", a.aggregate("sld_agg", s, window=time_window("ts", 4, 2), output=out))
    got = same_under_fusions(a, tmp_path, fusions=("none", "all"))
    # ts=3 is late for [0,10); ts=10 joins the open window [10,20) in arrival order
    assert got["tum"] == [{"s": 1, "n": 1, "ws": 0, "f": 0}, {"s": 1006, "n": 3, "ws": 10, "f": 1}]
    # ts=12 closes [-2,2) and [0,4); the oldest open window is then [10,14): ts=3 is
    # dropped, ts=10 counts in [10,14) only (sorted in by event time)
    assert got["sld"] == [{"s": 1, "n": 1, "ws": -2, "f": 0}, {"s": 1, "n": 1, "ws": 0, "f": 0},
                          {"s": 1002, "n": 2, "ws": 10, "f": 3}, {"s": 6, "n": 2, "ws": 12, "f": 1},
                          {"s": 4, "n": 1, "ws": 14, "f": 4}]


def test_window_bounds_are_float_for_fractional_window_over_int_time(tmp_path):
    """wstart()/wend() default to float when the window size or slide is fractional."""
    data = [(0, 1, "x", 1), (1, 3, "x", 2), (2, 6, "x", 3)]
    a = App("fracw")
    s = a.source("src", TSCHEMA, generator=replay, args={"rows": data})
    a.sink("tum", a.aggregate("tum_agg", s, window=time_window("ts", 2.5),
                              output={"s": "sum(v)", "ws": "wstart()", "we": "wend()"}))
    g = a.build()
    assert dict(g.op("tum_agg").outputs[0].schema.attrs)["ws"] == "float"
    got = same_under_fusions(g, tmp_path, fusions=("none", "all"))
    assert got["tum"] == [{"s": 1, "ws": 0.0, "we": 2.5}, {"s": 2, "ws": 2.5, "we": 5.0},
                          {"s": 3, "ws": 5.0, "we": 7.5}]


def test_declared_output_types_are_applied(tmp_path):
    """A declared output type converts the aggregate's value (count as float, avg as int)."""
    data = [(i, 0, "x", v) for i, v in enumerate([1, 2, 4])]
    a = App("aggtyp")
    s = a.source("src", TSCHEMA, generator=replay, args={"rows": data})
    a.sink("o", a.aggregate("o_agg", s, window=count_window(3),
                            output={"n:float": "count()", "a:int": "avg(v)", "s:float": "sum(v)",
                                    "m:str": "max(v)"}))
    got = same_under_fusions(a, tmp_path, fusions=("none", "all"))
    assert got["o"] == [{"n": 3.0, "a": 2, "s": 7.0, "m": "4"}]
    assert [type(x) for x in got["o"][0].values()] == [float, int, float, str]


def test_decimal_time_windows_hold_exactly_the_tuples_within_their_bounds(tmp_path):
    """Window k is [k*slide, k*slide + size) as computed in floating point (tumbling:
    [k*size, (k+1)*size), so windows tile the line): with decimal sizes every tuple
    lands in the windows whose emitted bounds contain it, and bounds do not drift along
    the stream (they are computed from k, never accumulated)."""
    data = [(i, round(i * 0.05, 10), "xy"[i % 2], 1) for i in range(400)]
    windows = {"t1": (time_window("ts", 0.1), ["k"]), "t3": (time_window("ts", 0.3), []),
               "s31": (time_window("ts", 0.3, 0.1), ["k"]), "s21": (time_window("ts", 0.2, 0.1), []),
               "s7": (time_window("ts", 0.7, 0.35), ["k"])}
    got = check_unchanged(time_app("decw", FSCHEMA, data, windows), tmp_path)
    check_time(got, rows_of(FSCHEMA, data), windows)
    ts = {d[0]: d[1] for d in data}
    for sink, (w, _) in windows.items():
        assert got[sink]
        for r in got[sink]:
            assert r["ws"] <= ts[r["f"]] and ts[r["la"]] < r["we"], (sink, r)
            k = round(r["ws"] / w.slide)
            end = (k + 1) * w.size if w.tumbling else k * w.slide + w.size
            assert r["ws"] == k * w.slide and r["we"] == end, (sink, r)
    # and for real, with one fusion per kind of link
    real = same_under_fusions(time_app("decw2", FSCHEMA, data[:120], windows), tmp_path,
                              fusions=("none", "all"))
    check_time(real, rows_of(FSCHEMA, data[:120]), windows)


# ---- property: random data, windows and batch boundaries (simulated runtime) -----------

SIM = settings(max_examples=40, deadline=None, derandomize=True,
               suppress_health_check=[HealthCheck.too_slow])


@st.composite
def timed_rows(draw):
    n = draw(st.integers(0, 30))
    steps = draw(st.lists(st.sampled_from([0, 1, 1, 2, 5, 13]), min_size=n, max_size=n))
    ks = draw(st.lists(st.sampled_from("xyz"), min_size=n, max_size=n))
    vs = draw(st.lists(st.integers(-5, 5), min_size=n, max_size=n))
    out, ts = [], draw(st.integers(-10, 10))
    for i in range(n):
        ts += steps[i]
        out.append((i, ts, ks[i], vs[i]))
    return out


@SIM
@given(data=timed_rows(), size=st.integers(1, 6), slide_frac=st.integers(1, 6),
       count=st.booleans(), grouped=st.booleans(),
       chunks=st.lists(st.integers(1, 5), min_size=1, max_size=3), seed=st.integers(0, 9))
def test_aggregate_property(tmp_path_factory, data, size, slide_frac, count, grouped, chunks, seed):
    slide = max(1, min(size, slide_frac))
    w = count_window(size, slide) if count else time_window("ts", size, slide)
    by = ["k"] if grouped else []
    out = {**{b: b for b in by}, **STATS}
    if not count:
        out.update({"ws": "wstart()", "we": "wend()"})
    a = App("aggp")
    s = a.source("src", TSCHEMA, generator=replay, args={"rows": data})
    a.sink("o", a.aggregate("o_agg", s, window=w, by=by, output=out))
    got = check_unchanged(a, tmp_path_factory.mktemp("aggp"), seed=seed, chunks=chunks)["o"]
    rows = rows_of(TSCHEMA, data)
    keyf = (lambda r: r["k"]) if grouped else (lambda r: 0)
    if count:
        want = refs.agg_count(rows, size, slide, keyf, lambda k, w_: keyed(k, w_, by=tuple(by)))
        assert got == want
    else:
        want = refs.agg_time(rows, "ts", size, slide, keyf,
                             lambda k, w_, ws, we: keyed(k, w_, ws, we, by=tuple(by), wins=True))
        if size == slide:
            assert got == want
        else:
            assert sort_wins(got) == sort_wins(want)
