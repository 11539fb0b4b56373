"""Join: count and time windows per key, count_window(0), where=, qualified names,
ties in the order attribute (left first), against ``refs.join`` and across fusions."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spadeopt import App, count_window, time_window
from spadeopt.errors import GraphError
from tests.toolkit import refs
from tests.toolkit.gens import replay
from tests.toolkit.harness import check_unchanged, same_under_fusions

LS = "ts:int, k:str, p:int, lv:int"
RS = "ts:int, k:str, p:int, rv:int"


def stream(n, seed, val):
    rng = random.Random(seed)
    ts, out = 0, []
    for _ in range(n):
        ts += rng.choice([0, 0, 1, 1, 2, 4])  # many ties, within and across the inputs
        out.append((ts, rng.choice("aab"), rng.randint(0, 1), rng.randint(0, val)))
    return out


def rows(schema, data):
    names = [p.split(":")[0].strip() for p in schema.split(",")]
    return [dict(zip(names, d, strict=True)) for d in data]


OUT = {"lts": "left.ts", "rts": "right.ts", "k": "left.k", "lv": "lv", "rv": "right.rv"}


def pair(lt, rt):
    return {"lts": lt["ts"], "rts": rt["ts"], "k": lt["k"], "lv": lt["lv"], "rv": rt["rv"]}


def k_(r):
    return r["k"]


def test_join_windows_match_reference_under_every_fusion(tmp_path):
    ld, rd = stream(30, 1, 9), stream(24, 2, 9)
    a = App("joins")
    left = a.source("lsrc", LS, generator=replay, args={"rows": ld})
    right = a.source("rsrc", RS, generator=replay, args={"rows": rd})
    a.sink("jc", a.join("jc_j", left, right, on="k", order="ts",
                        window=(count_window(3), count_window(2)), output=OUT))
    a.sink("jz", a.join("jz_j", left, right, on="k", order="ts",
                        window=(count_window(0), count_window(1)), output=OUT))
    a.sink("jt", a.join("jt_j", left, right, on="k", order="ts",
                        window=(time_window("ts", 3), time_window("ts", 5)), output=OUT,
                        where="left.lv + right.rv > 6 and left.p == right.p"))
    # composite key, different attribute names on the two sides
    rr = a.functor("rename", right, output={"rk": "k", "rp": "p", "t2": "ts", "rv": "rv"})
    a.sink("jm", a.join("jm_j", left, rr, on=(("k", "p"), ("rk", "rp")), order=("ts", "t2"),
                        window=(count_window(2), time_window("t2", 4)),
                        output={"lts": "ts", "rts": "t2", "k": "k", "lv": "lv", "rv": "rv",
                                "d:int": "t2 - ts"}))
    got = same_under_fusions(a, tmp_path)

    L, R = rows(LS, ld), rows(RS, rd)
    common = dict(lord="ts", rord="ts", emit=pair)
    assert got["jc"] == refs.join(L, R, lkey=k_, rkey=k_, lwin=("count", 3), rwin=("count", 2), **common)
    assert got["jz"] == refs.join(L, R, lkey=k_, rkey=k_, lwin=("count", 0), rwin=("count", 1), **common)
    assert got["jt"] == refs.join(L, R, lkey=k_, rkey=k_, lwin=("time", 3), rwin=("time", 5),
                                  where=lambda lt, rt: lt["lv"] + rt["rv"] > 6 and lt["p"] == rt["p"],
                                  **common)
    want_m = refs.join(L, R, lkey=lambda r: (r["k"], r["p"]), rkey=lambda r: (r["k"], r["p"]),
                       lwin=("count", 2), rwin=("time", 4), lord="ts", rord="ts",
                       emit=lambda lt, rt: {**pair(lt, rt), "d": rt["ts"] - lt["ts"]})
    assert got["jm"] == want_m
    assert got["jc"] and got["jz"] and got["jt"] and got["jm"]


def test_join_ties_left_first_and_window_bounds(tmp_path):
    """Tied order values: the left tuple is processed first, so a tied pair matches
    once (when the right tuple probes). A time window of size d keeps tuples at most d
    older than the probing tuple, bounds included. count_window(0) keeps nothing."""
    ld = [(5, "a", 0, 1), (10, "a", 0, 2)]
    rd = [(5, "a", 0, 10), (8, "a", 0, 20), (15, "a", 0, 30), (16, "a", 0, 40)]
    a = App("ties")
    left = a.source("lsrc", LS, generator=replay, args={"rows": ld})
    right = a.source("rsrc", RS, generator=replay, args={"rows": rd})
    a.sink("tj", a.join("tj_j", left, right, on="k", order="ts",
                        window=(time_window("ts", 5), time_window("ts", 2)), output=OUT))
    a.sink("zj", a.join("zj_j", left, right, on="k", order="ts",
                        window=(count_window(0), count_window(5)), output=OUT))
    got = same_under_fusions(a, tmp_path, fusions=("none", "all"))
    m = lambda lts, rts, lv, rv: {"lts": lts, "rts": rts, "k": "a", "lv": lv, "rv": rv}  # noqa: E731
    # r@5 probes left within [0, 5]: l@5 (tie, left first); r@8 probes [3, 8]: l@5;
    # l@10 probes right within [8, 10]: r@8; r@15 probes [10, 15]: l@10; r@16: nothing
    assert got["tj"] == [m(5, 5, 1, 10), m(5, 8, 1, 20), m(10, 8, 2, 20), m(10, 15, 2, 30)]
    # left keeps nothing: only left tuples probing the right window match; l@5 sees no
    # right tuple yet (left first on the tie); l@10 sees r@5 and r@8
    assert got["zj"] == [m(10, 5, 2, 10), m(10, 8, 2, 20)]


SIM = settings(max_examples=40, deadline=None, derandomize=True,
               suppress_health_check=[HealthCheck.too_slow])


@st.composite
def ordered(draw, val):
    n = draw(st.integers(0, 15))
    steps = draw(st.lists(st.sampled_from([0, 0, 1, 3]), min_size=n, max_size=n))
    ks = draw(st.lists(st.sampled_from("ab"), min_size=n, max_size=n))
    ts, out = 0, []
    for i in range(n):
        ts += steps[i]
        out.append((ts, ks[i], i % 2, val * 100 + i))
    return out


window_spec = st.one_of(st.tuples(st.just("count"), st.integers(0, 3)),
                        st.tuples(st.just("time"), st.integers(0, 4)))


@SIM
@given(ld=ordered(1), rd=ordered(2), lw=window_spec, rw=window_spec,
       chunks=st.lists(st.integers(1, 4), min_size=1, max_size=3), seed=st.integers(0, 99))
def test_join_property(tmp_path_factory, ld, rd, lw, rw, chunks, seed):
    def win(spec):
        return count_window(spec[1]) if spec[0] == "count" else time_window("ts", spec[1])

    a = App("joinp")
    left = a.source("lsrc", LS, generator=replay, args={"rows": ld})
    right = a.source("rsrc", RS, generator=replay, args={"rows": rd})
    a.sink("o", a.join("o_j", left, right, on="k", order="ts", window=(win(lw), win(rw)),
                       output=OUT))
    got = check_unchanged(a, tmp_path_factory.mktemp("joinp"), seed=seed, chunks=chunks)["o"]
    assert got == refs.join(rows(LS, ld), rows(RS, rd), lkey=k_, rkey=k_, lord="ts", rord="ts",
                            lwin=lw, rwin=rw, emit=pair)


def test_join_windows_must_be_over_the_order_attribute_and_not_slide():
    a = App("badj")
    left = a.source("lsrc", LS, generator=replay, args={"rows": []})
    right = a.source("rsrc", RS, generator=replay, args={"rows": []})
    a.join("j1", left, right, on="k", order="ts", window=(time_window("p", 3), count_window(2, 1)),
           output=OUT)
    with pytest.raises(GraphError) as err:
        a.build()
    msg = str(err.value)
    assert "the left time window is over 'p' but the left input is ordered by 'ts'" in msg
    assert "the right window has a slide (1)" in msg
