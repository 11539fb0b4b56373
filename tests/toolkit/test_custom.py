"""Custom operators: a user class with process(port, tup, submit) and on_final(submit),
two input and two output ports, and one without on_final."""

from __future__ import annotations

from spadeopt import App
from tests.toolkit.gens import Dedup, Tally, Widen, replay
from tests.toolkit.harness import multiset, same_under_fusions

S = "seq:int, v:int"


def test_custom_two_inputs_two_outputs_and_on_final(tmp_path):
    da = [(i, (i * 37) % 17) for i in range(30)]
    db = [(100 + i, (i * 11) % 23) for i in range(18)]
    a = App("cust")
    sa = a.source("sa", S, generator=replay, args={"rows": da})
    sb = a.source("sb", S, generator=replay, args={"rows": db})
    outs = a.custom("tally", Tally, inputs={"a": sa, "b": sb}, args={"threshold": 12},
                    outputs={"big": "port:str, seq:int, v:int", "totals": "port:str, n:int, s:int"})
    a.sink("big", outs["big"])
    a.sink("totals", outs["totals"])
    dd = a.custom("dedup", Dedup, inputs={"in": a.functor("mod", sa, output={"m:int": "v % 5", "seq": "seq"})},
                  outputs={"out": "m:int, seq:int"})
    a.sink("firsts", dd["out"])
    # the two inputs interleave in arrival order, so 'big' is compared as a multiset
    got = same_under_fusions(a, tmp_path, unordered=["big"])

    want_big = [{"port": p, "seq": s, "v": v} for p, d in (("a", da), ("b", db)) for s, v in d if v >= 12]
    assert multiset(got["big"]) == multiset(want_big)
    for p in ("a", "b"):  # each port's tuples keep their order
        assert [r for r in got["big"] if r["port"] == p] == [r for r in want_big if r["port"] == p]
    assert got["totals"] == [{"port": "a", "n": len(da), "s": sum(v for _, v in da)},
                             {"port": "b", "n": len(db), "s": sum(v for _, v in db)}]
    seen, firsts = set(), []
    for s, v in da:
        if v % 5 not in seen:
            seen.add(v % 5)
            firsts.append({"m": v % 5, "seq": s})
    assert got["firsts"] == firsts


def test_custom_submitting_the_wrong_shape_fails_naming_it(tmp_path):
    import pytest

    from spadeopt.orchestrate.build_local import build_and_run
    from tests.toolkit.harness import plan

    a = App("widen")
    s = a.source("s", S, generator=replay, args={"rows": [(i, i) for i in range(5)]})
    w = a.custom("widen", Widen, inputs={"in": s}, outputs={"out": S})
    a.sink("out", a.functor("copy", w["out"], output={"seq": "seq", "v:int": "v + 1"}))
    graph = a.build()
    for fusion in ("all", "none"):
        with pytest.raises(Exception) as info:
            build_and_run(graph, plan(graph, fusion), workdir=tmp_path / fusion)
        msg = str(info.value)
        assert '"op": "widen"' in msg and "operator 'widen' (port 'out') made a 3-tuple" in msg, msg
