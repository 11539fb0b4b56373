"""Tumbling windows that keep running values instead of rows (``kinds.aggregate._accumulators``):
only where the answer is the same bit for bit, and then the same as the builtins over
the group's rows (NaN, signed zeros, infinities, ints past 64 bits, equal values of two
types), under every fusion and in a checkpoint's state."""

from __future__ import annotations

import json
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spadeopt import App, count_window, time_window
from spadeopt.codegen.render import render_build
from tests.toolkit import refs
from tests.toolkit.harness import check_unchanged, plan

SPECIAL = {0: float("nan"), 1: -0.0, 2: 0.0, 3: math.inf, 4: -math.inf, 5: 1.0}


def coded(rows):
    """``(seq, k, x, i, b)`` rows with ``x`` a float decoded from a code (NaN, signed zeros
    and infinities cannot be written as source arguments): codes 0-5 are ``SPECIAL``,
    others ``code / 4``."""
    for seq, k, code, i, b in rows:
        yield (seq, k, SPECIAL.get(code, code / 4), i, b)


SCHEMA = "seq:int, k:str, x:float, i:int, b:bool"
OUT = {"n": "count()", "lo": "min(x)", "hi": "max(x)", "s": "sum(i)", "a": "avg(i)", "bs": "sum(b)",
       "f": "first(seq)", "la": "last(x)", "ilo": "min(i)", "ihi": "max(i)", "sx:int": "sum(i * 3 - 1)"}


def _ref(k, w):
    xs, ins = [r["x"] for r in w], [r["i"] for r in w]
    return {"k": k, "n": len(w), "lo": min(xs), "hi": max(xs), "s": sum(ins), "a": sum(ins) / len(ins),
            "bs": sum(r["b"] for r in w), "f": w[0]["seq"], "la": w[-1]["x"], "ilo": min(ins), "ihi": max(ins),
            "sx": sum([i * 3 - 1 for i in ins])}


def _app(data, size):
    a = App("running")
    s = a.source("src", SCHEMA, generator=coded, args={"rows": data})
    a.sink("cnt", a.aggregate("cnt_agg", s, window=count_window(size), by=["k"], output={"k": "k", **OUT}))
    t = a.functor("stamp", s, output={"seq": "seq", "ts:float": "seq * 0.5", "k": "k", "x": "x", "i": "i", "b": "b"})
    a.sink("tim", a.aggregate("tim_agg", t, window=time_window("ts", size), by=["k"],
                              output={"k": "k", **OUT, "we": "wend()"}))
    return a


def _code(app) -> str:
    g = app.build()
    return "\n".join(v for k, v in render_build(g, plan(g, "all"), "").items() if k.endswith(".py"))


def test_running_values_only_where_exact():
    """Ints and bools sum exactly in any order, min/max/count/first/last are the
    builtins' answer; a float sum, an expression that may raise (a division, a user
    function) and a sliding window keep the rows."""
    a = App("which")
    s = a.source("src", "k:str, x:float, i:int", generator=coded, args={"rows": []})
    a.sink("ints", a.aggregate("ints_agg", s, window=count_window(3), by=["k"],
                               output={"k": "k", "s": "sum(i)", "hi": "max(x)", "n": "count()"}))
    assert "a group is running values" in _code(a)
    for name, out, w in [("fsum", {"s": "sum(x)"}, count_window(3)), ("div", {"m:int": "max(i // 2)"}, count_window(3)),
                         ("call", {"m:int": "min(abs(i))"}, count_window(3)),
                         ("slide", {"s": "sum(i)"}, count_window(3, 1)),
                         ("tslide", {"s": "sum(i)"}, time_window("x", 4.0, 2.0))]:
        b = App(name)
        s = b.source("src", "k:str, x:float, i:int", generator=coded, args={"rows": []})
        b.sink("o", b.aggregate("o_agg", s, window=w, by=["k"], output={"k": "k", **out}))
        code = _code(b)
        assert "a group is running values" not in code and "_row(key, items, ws, we)" in code, name


rows_st = st.lists(st.tuples(st.sampled_from("aab"), st.integers(0, 12),
                             st.one_of(st.integers(-5, 5), st.integers(-2**80, 2**80)), st.booleans()),
                   min_size=1, max_size=40)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=rows_st, size=st.integers(1, 5))
def test_running_values_match_builtins_over_rows(tmp_path_factory, rows, size):
    data = [(seq, k, code, i, b) for seq, (k, code, i, b) in enumerate(rows)]
    got = check_unchanged(_app(data, size), tmp_path_factory.mktemp("run"))
    full = [{"seq": seq, "k": k, "x": SPECIAL.get(code, code / 4), "i": i, "b": b, "ts": seq * 0.5}
            for seq, k, code, i, b in data]
    want_cnt = refs.agg_count(full, size, size, lambda r: r["k"], _ref)
    want_tim = refs.agg_time(full, "ts", size, size, lambda r: r["k"], lambda k, w, ws, we: {**_ref(k, w), "we": float(we)})
    # NaN == NaN is False: compare the JSON text, which also tells -0.0 from 0.0 and 1 from 1.0
    assert json.dumps(got["cnt"]) == json.dumps(want_cnt)
    assert json.dumps(got["tim"]) == json.dumps(want_tim)


def test_running_values_take_the_codec_fast_path():
    """A tumbling window's groups of running values (scalars, a first tuple) are packed in
    one call and come back as the same lists."""
    import msgpack

    from spadeopt.runtime import checkpoint_codec as ck

    groups = {"a": [3, ("a", 1.5, 2), 7, -0.0, True, None, "s", b"\x00"], ("b", 1): [1, 2**63 - 1, 2.5]}
    assert type(ck._fast(groups)) is msgpack.ExtType
    back = ck.decode_state(ck.encode_state(groups))
    assert back == groups and all(type(v) is list for v in back.values())
    assert [type(x) for x in back["a"]] == [type(x) for x in groups["a"]]
    assert type(ck._fast({"a": [1, 2**70]})) is dict  # past 64 bits: the slow path, same value back
    assert ck.decode_state(ck.encode_state({"a": [1, 2**70]})) == {"a": [1, 2**70]}
