"""Names users choose never collide with generated code (issue 14): operators and
attributes named like the generated code's own locals run under every fusion."""

from __future__ import annotations

import pytest

from spadeopt import App
from spadeopt.errors import GraphError
from spadeopt.frontend.dsl import count_window
from spadeopt.model.schema import gid, is_identifier, ungid
from tests.toolkit.gens import replay
from tests.toolkit.harness import same_under_fusions

NAMES = ("out", "t", "l", "r", "batch", "rt", "key", "items", "build", "u", "groups", "_3t")


def test_every_identifier_but_keywords_is_allowed():
    assert all(is_identifier(n) for n in NAMES + ("match", "_", "x__in"))
    assert not any(is_identifier(n) for n in ("if", "None", "class", "a-b", "1a", "é"))


def test_gid_is_injective_and_parseable():
    names = ["a", "a_", "a__in", "_1a", "in", "a_b", "ab"]
    gids = [gid(n) for n in names]
    assert len(set(gids)) == len(names)
    for n in names:
        assert ungid(gid(n) + "__in") == (n, "__in")
        assert ungid("_" + gid(n) + "_row") == (n, "_row")
    assert ungid("_u_groups") is None and ungid("out") is None


def test_app_with_generated_code_names_runs_under_every_fusion(tmp_path):
    schema = ", ".join(f"{n}:int" for n in ("out", "t", "l", "r", "batch", "items"))
    data = [tuple(i * k for k in range(6)) for i in range(20)]
    a = App("names")
    s = a.source("batch", schema, generator=replay, args={"rows": data})
    f = a.functor("out", s, output={"t:int": "t + out", "l": "l", "r:int": "r * 2", "key:int": "batch + items"})
    g = a.functor("t", f, filter="t % 2 == 0")
    h = a.functor("u", g, output={"groups:int": "t + l + r", "key": "key"})
    rr = a.functor("r", s, output={"key:int": "batch + items", "rt": "t", "out": "out"})
    j = a.join("l", h, rr, on="key", order="key", window=(count_window(3), count_window(3)),
               output={"key": "left.key", "g": "groups", "rt": "rt"})
    a.sink("rt", j)
    a.sink("_3t", a.aggregate("items", h, window=count_window(2), by=["key"],
                               output={"key": "key", "n": "count()", "s:int": "sum(groups)"}))
    got = same_under_fusions(a, tmp_path, unordered=("rt", "_3t"))
    assert got["rt"] and got["_3t"]


@pytest.mark.parametrize("bad", ["if", "None"])
def test_keywords_are_refused_with_a_clear_error(bad):
    a = App("kw")
    a.sink("sink", a.source(bad, "x:int", generator=replay, args={"rows": [(1,)]}))
    with pytest.raises(GraphError, match="must be a Python identifier"):
        a.build()
