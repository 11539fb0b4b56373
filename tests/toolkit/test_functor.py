"""Functor: projection, computed attributes with declared types, filters, user
functions and math.*, against plain Python and across fusions."""

from __future__ import annotations

import math

import pytest

from spadeopt import App
from spadeopt.errors import GraphError
from tests.toolkit.gens import clamp, halve, label, replay
from tests.toolkit.harness import same_under_fusions

SCHEMA = "seq:int, k:int, v:float, name:str"
DATA = [(i, i % 4 - 1, round(i * 1.75 - 9, 2), f"n{i % 5}") for i in range(30)]
ROWS = [dict(zip(("seq", "k", "v", "name"), d, strict=True)) for d in DATA]


def test_functor_semantics(tmp_path):
    a = App("fun")
    s = a.source("src", SCHEMA, generator=replay, args={"rows": DATA})
    a.sink("ident", a.functor("ident_f", s))
    a.sink("proj", a.functor("proj_f", s, output={"name": "name", "id": "seq"}))
    a.sink("keep", a.functor("keep_f", s, filter="k > 0 and (v < 10 or name == 'n1')"))
    a.sink("calc", a.functor("calc_f", s, output={
        "seq": "seq",
        "w:float": "v * 2 + k",
        "sq:float": "math.sqrt(abs(v))",
        "fl:int": "math.floor(v)",
        "c:float": "clamp(v, -2.5, 7.0)",
        "lab:str": "label(k) + name[1:]",
        "big": "v >= 5",
        "h:float": "halve(seq)",
        "const": "'x'",
    }, filter="seq % 3 != 1 and label(k) != 'k2'", functions=[clamp, label, halve]))
    got = same_under_fusions(a, tmp_path)

    assert got["ident"] == ROWS
    assert got["proj"] == [{"name": r["name"], "id": r["seq"]} for r in ROWS]
    assert got["keep"] == [r for r in ROWS if r["k"] > 0 and (r["v"] < 10 or r["name"] == "n1")]
    want = [{"seq": r["seq"], "w": r["v"] * 2 + r["k"], "sq": math.sqrt(abs(r["v"])),
             "fl": math.floor(r["v"]), "c": clamp(r["v"], -2.5, 7.0),
             "lab": label(r["k"]) + r["name"][1:], "big": r["v"] >= 5, "h": halve(r["seq"]),
             "const": "x"}
            for r in ROWS if r["seq"] % 3 != 1 and label(r["k"]) != "k2"]
    assert got["calc"] == want
    assert [type(x) for x in got["calc"][0].values()] == [int, float, float, int, float, str, bool,
                                                          float, str]


def test_declared_types_convert_values(tmp_path):
    """``name:type`` is the attribute's type: values are converted to it, so an int
    attribute computed with ``//`` on floats can be hash-split, and a str attribute
    computed from an int is written as a string."""
    a = App("typed")
    s = a.source("src", "ts:float, k:int", generator=replay,
                 args={"rows": [(i * 13.5, i) for i in range(12)]})
    f = a.functor("f", s, output={"bucket:int": "ts // 60", "ks:str": "k", "kf:float": "k",
                                  "odd:bool": "k % 2", "ts": "ts"})
    outs = a.split("sp", f, n=2, by="bucket")
    a.sink("s0", outs[0])
    a.sink("s1", outs[1])
    got = same_under_fusions(a, tmp_path)
    rows = [{"bucket": int(i * 13.5 // 60), "ks": str(i), "kf": float(i), "odd": bool(i % 2),
             "ts": i * 13.5} for i in range(12)]
    assert got["s0"] == [r for r in rows if r["bucket"] % 2 == 0]
    assert got["s1"] == [r for r in rows if r["bucket"] % 2 == 1]
    assert all(type(r["bucket"]) is int and type(r["kf"]) is float for r in got["s0"] + got["s1"])


def test_a_failed_derivation_is_reported_once():
    a = App("cascade")
    s = a.source("src", SCHEMA, generator=replay, args={"rows": []})
    a.sink("snk", a.functor("f", s, output={"r": "math.sqrt(v)"}))
    with pytest.raises(GraphError) as err:
        a.build()
    (problem,) = err.value.problems
    assert problem.startswith("functor 'f': output 'r' computes 'math.sqrt(v)'; declare its type as 'r:float' "
                              "(or int, str, bool, bytes) (at ")  # and the file:line of the declaration
    assert "test_functor.py:" in problem
