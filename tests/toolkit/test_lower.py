"""Lowering details: the one expression type checker (type, exactness, may-raise) and the
conversions it decides, argument literals in generated code, and stable hashing of floats."""

from __future__ import annotations

import ast
import math

import pytest

from spadeopt import App
from spadeopt.errors import CodegenError
from spadeopt.kinds.lowering import literal, typed
from spadeopt.model.schema import Schema
from spadeopt.model.types import ExprProblem, ExprType, check, scope_lookup, static_type
from tests.toolkit.gens import Tally, replay, with_nans
from tests.toolkit.harness import same_under_fusions

S = Schema.parse("i:int, x:float, s:str, b:bytes, f:bool")


@pytest.mark.parametrize("expr,want", [
    ("i", "int"), ("x", "float"), ("s", "str"), ("b", "bytes"), ("f", "bool"),
    ("1", "int"), ("1.5", "float"), ("'a'", "str"), ("True", "bool"), ("None", None),
    ("i + 1", "int"), ("i * x", "float"), ("i / 2", "float"), ("i // 2", "int"), ("x // 2", "float"),
    ("i % 3", "int"), ("f + f", "int"), ("i ** 2", None), ("x ** 2", "float"), ("-i", "int"),
    ("-f", "int"), ("not i", "bool"), ("~i", "int"), ("i < x", "bool"), ("i > 1 and x < 2", "bool"),
    ("i or 0", "int"), ("i or x", None), ("s + s", "str"), ("s * 2", "str"), ("b + b", "bytes"),
    ("s[1:]", "str"), ("b[0]", "int"), ("b[1:]", "bytes"), ("i if f else 0", "int"),
    ("i if f else x", None), ("abs(x)", "float"), ("abs(i)", "int"), ("round(x)", "int"),
    ("round(x, 1)", "float"), ("len(s)", "int"), ("int(x)", "int"), ("str(i)", "str"),
    ("min(i, 2)", "int"), ("max(i, x)", None), ("math.sqrt(i)", "float"), ("math.floor(x)", "int"),
    ("math.isnan(x)", "bool"), ("math.pi", "float"), ("f & f", "bool"), ("i & f", "int"),
    ("i << 2", "int"), ("userfn(i)", None), ("unknown", None),
])
def test_static_type(expr, want):
    assert static_type(expr, S) == want


def _check(expr: str) -> ExprType:
    return check(ast.parse(expr, mode="eval").body, scope_lookup({"": ("t", S)}))


@pytest.mark.parametrize("expr,want", [
    # numeric promotion: typed float for the checks, but the value may be an int
    ("max(i, x)", ExprType("float", exact=False, may_raise=True)),
    ("i if f else x", ExprType("float", exact=False, may_raise=False)),
    ("i ** 2", ExprType("int", exact=False, may_raise=True)),
    ("i / userfn(x)", ExprType("float", exact=False, may_raise=True)),
    # pure: cannot raise, so collapse may drop or inline it
    ("i + 1", ExprType("int", exact=True, may_raise=False)),
    ("s + s", ExprType("str", exact=True, may_raise=False)),
    ("not s", ExprType("bool", exact=True, may_raise=False)),
    ("i == s", None),  # refused: always False
    ("s < s", ExprType("bool", exact=True, may_raise=True)),  # str ordering is not proven pure
    # an int with a float overflows for a huge int, unless one side is a small constant
    ("i * x", ExprType("float", exact=True, may_raise=True)),
    ("i + 1.5", ExprType("float", exact=True, may_raise=True)),
    ("x * 2", ExprType("float", exact=True, may_raise=False)),
    ("i // 2", ExprType("int", exact=True, may_raise=True)),
    ("round(x, ndigits=1)", ExprType("float", exact=True, may_raise=True)),
])
def test_check_gives_type_exactness_and_may_raise(expr, want):
    if want is None:
        with pytest.raises(ExprProblem):
            _check(expr)
    else:
        assert _check(expr) == want


def test_static_type_qualified_names():
    q = {"left": ("l", Schema.parse("k:str, v:int")), "right": ("r", Schema.parse("k:str, w:float"))}
    assert static_type("left.v", qualified=q) == "int"
    assert static_type("v + right.w", qualified=q) == "float"
    assert static_type("k", qualified=q) is None  # ambiguous: the validator refuses it anyway


def test_typed_converts_only_when_needed():
    assert typed("t[0]", "int", "int") == "t[0]"
    assert typed("t[0]", "float", "int") == "float(t[0])"
    assert typed("f(t)", "int", None) == "int(f(t))"
    assert typed("t[2]", "bytes", "str") == "(t[2]).encode()"
    assert typed("f(t)", "bytes", None) == "f(t)"


def test_argument_literals():
    assert eval(literal([1.5, float("inf"), -float("inf"), (2,), {"a": None}], "w")) == \
        [1.5, math.inf, -math.inf, (2,), {"a": None}]
    assert math.isnan(eval(literal(float("nan"), "w")))
    with pytest.raises(CodegenError, match="argument value"):
        literal(object(), "w")


def test_non_finite_float_arguments_reach_the_generator_and_custom(tmp_path):
    inf = float("inf")
    a = App("nonfinite")
    s = a.source("src", "seq:int, v:float", generator=replay,
                 args={"rows": [(0, inf), (1, float("nan")), (2, -inf), (3, 1.5)]})
    a.sink("vals", a.functor("flags", s, output={"seq": "seq", "nan:bool": "math.isnan(v)", "v": "v"}))
    outs = a.custom("tally", Tally, inputs={"a": a.functor("toint", s, output={"seq": "seq", "v:int": "seq"}),
                                            "b": a.source("empty", "seq:int, v:int", generator=replay,
                                                          args={"rows": []})},
                    outputs={"big": "port:str, seq:int, v:int", "totals": "port:str, n:int, s:int"},
                    args={"threshold": inf})
    a.sink("big", outs["big"])
    got = same_under_fusions(a, tmp_path, fusions=("none", "all"))
    assert [(r["seq"], r["nan"]) for r in got["vals"]] == [(0, False), (1, True), (2, False), (3, False)]
    assert got["vals"][0]["v"] == inf and got["vals"][2]["v"] == -inf
    assert got["big"] == []


def test_split_by_float_is_stable_for_nan(tmp_path, monkeypatch):
    """hash(nan) is per object in Python >= 3.10; NaNs must still go to one output."""
    monkeypatch.setenv("PYTHONHASHSEED", "random")
    a = App("nansplit")
    s = a.source("src", "i:int, x:float", generator=with_nans, args={"n": 40})
    for k, o in enumerate(a.split("sp", s, n=3, by="x")):
        a.sink(f"o{k}", o)
    got = same_under_fusions(a, tmp_path)
    for k in range(3):
        rows = got.get(f"o{k}", [])
        want = [i for i in range(0, 40, 2) if hash(i * 0.75) % 3 == k]
        assert [r["i"] for r in rows if not math.isnan(r["x"])] == want
    nan_outs = {k for k in range(3) for r in got.get(f"o{k}", []) if math.isnan(r["x"])}
    assert len(nan_outs) == 1
