"""FusionProblem validation and the reference cost functions, on hand-computed numbers."""

from __future__ import annotations

import math
import re

import pytest

from spadeopt.errors import OptimizeError, UsageError
from spadeopt.optimize.cost import (
    comm_load,
    comp_load,
    connected,
    effective_util,
    merge_benefit,
    metrics,
    objective,
    oper_load,
    rate,
    rate_between,
    saturated,
    size,
    underutilized,
)
from spadeopt.optimize.legality import fusion_legal, initial_partitions
from spadeopt.optimize.problem import FusionProblem, LinearCommModel, Link

COMM = LinearCommModel(per_tuple_s=1e-4, per_byte_s=1e-6)


def triangle(**kwargs: object) -> FusionProblem:
    """a->b (100/s, 10 B), b->c (200/s, 20 B), a->c (50/s, 40 B), import into a (30/s)."""
    return FusionProblem.build(
        ["a", "b", "c"],
        {"a": 0.1, "b": 0.2, "c": 0.3},
        [
            ("a", "b", 100.0, 10.0),
            ("b", "c", 200.0, 20.0),
            ("a", "c", 50.0, 40.0),
            (None, "a", 30.0, 10.0),
        ],
        COMM,
        **kwargs,  # type: ignore[arg-type]
    )


AB = frozenset({"a", "b"})


def test_rate_counts_crossing_links_in_and_out_including_external() -> None:
    p = triangle()
    assert rate(frozenset({"a"}), p) == 180.0  # import 30 + out 100 + out 50
    assert rate(frozenset({"b"}), p) == 300.0
    assert rate(AB, p) == 280.0  # import 30 + b->c 200 + a->c 50
    assert rate(frozenset({"a", "b", "c"}), p) == 30.0  # the import is never saved


def test_size_is_rate_weighted_and_comm_load_uses_v() -> None:
    p = triangle()
    assert size(AB, p) == pytest.approx((30 * 10 + 200 * 20 + 50 * 40) / 280)  # 22.5
    assert comm_load(AB, p) == pytest.approx(280 * (1e-4 + 22.5 * 1e-6))
    assert oper_load(AB, p) == pytest.approx(0.3)
    assert comp_load(AB, p) == pytest.approx(0.3 + 0.0343)
    assert effective_util(AB, p) == pytest.approx(0.3 / 0.3343)
    assert underutilized(AB, p)  # 0.897 < 0.95
    assert not saturated(AB, p)  # 0.334 <= 0.5


def test_merge_benefit_is_twice_the_rate_between() -> None:
    p = triangle()
    a, b = frozenset({"a"}), frozenset({"b"})
    assert rate_between(a, b, p) == 100.0
    assert merge_benefit(a, b, p) == 200.0
    assert connected(a, b, p)
    assert objective([{"a"}, {"b"}, {"c"}], p) == 180 + 300 + 250
    assert objective([{"a", "b", "c"}], p) == 30.0


def test_empty_partition_has_no_size_and_zero_load_means_full_util() -> None:
    p = FusionProblem.build(["x", "y"], {"x": 0.0, "y": 0.0}, [], COMM)
    m = metrics(frozenset({"x"}), p)
    assert (m.rate, m.size, m.comp_load, m.effective_util) == (0.0, 0.0, 0.0, 1.0)
    assert not m.underutilized
    assert not connected(frozenset({"x"}), frozenset({"y"}), p)


def test_saturated_is_strictly_above_max_frac() -> None:
    p = FusionProblem.build(["x"], {"x": 0.5}, [], COMM)
    assert not saturated(frozenset({"x"}), p)
    p = FusionProblem.build(["x"], {"x": 0.5000001}, [], COMM)
    assert saturated(frozenset({"x"}), p)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"links": [("a", "zz", 1.0, 1.0)]}, "link #0 (a -> zz) names unknown operator 'zz'"),
        ({"links": [("a", "a", 1.0, 1.0)]}, "link #0 (a -> a) is a self link"),
        ({"links": [(None, None, 1.0, 1.0)]}, "has no operator at either end"),
        ({"links": [("a", "b", -1.0, 1.0)]}, "rate must be a finite number >= 0; got -1.0"),
        ({"links": [("a", "b", 1.0, math.nan)]}, "size must be a finite number >= 0; got nan"),
        ({"load": {"a": 0.1}}, "load has no value for operator 'b'"),
        ({"load": {"a": 0.1, "b": -0.2}}, "load of operator 'b' must be a finite number >= 0"),
        ({"load": {"a": 0.1, "b": 0.1, "q": 0.1}}, "load names unknown operator 'q'"),
        ({"max_frac": 0.0}, "max_frac must be a finite number > 0; got 0.0"),
        ({"min_util": 1.5}, "min_util must be in (0, 1]; got 1.5"),
        ({"min_util": 0.0}, "min_util must be in (0, 1]; got 0.0"),
        ({"exlocate": [{"a", "nope"}]}, "exlocate group {a,nope} names unknown operator(s)"),
        ({"unfusable": [{"a"}]}, "unfusable group {a} needs at least 2 operators"),
        ({"colocate": [{"q"}]}, "colocate group {q} names unknown operator(s) ['q']"),
        ({"operators": ["a", "b", "a"]}, "operator 'a' is declared more than once"),
    ],
)
def test_invalid_problems_name_the_bad_item(kwargs: dict, message: str) -> None:
    args: dict = {
        "operators": ["a", "b"],
        "load": {"a": 0.1, "b": 0.1},
        "links": [("a", "b", 1.0, 1.0)],
        "comm": COMM,
    }
    args.update(kwargs)
    ops, load, links, comm = (args.pop(k) for k in ("operators", "load", "links", "comm"))
    with pytest.raises(UsageError, match=re.escape(message)):
        FusionProblem.build(ops, load, links, comm, **args)


def test_all_problems_are_reported_at_once() -> None:
    with pytest.raises(UsageError) as info:
        FusionProblem.build(["a"], {"a": -1.0}, [("a", "x", -2.0, 1.0)], COMM, max_frac=-1)
    assert "4 problems" in str(info.value)


def test_constructor_insists_on_tuples_and_build_converts() -> None:
    with pytest.raises(UsageError, match="use FusionProblem.build"):
        FusionProblem(["a"], {"a": 0.1}, (), COMM)  # type: ignore[arg-type]
    p = FusionProblem.build(["a"], {"a": 0.1}, [], COMM, exlocate=[])
    assert p.operators == ("a",) and p.links == ()


def test_comm_model_must_be_nonnegative() -> None:
    with pytest.raises(UsageError, match="per_tuple_s must be a finite number >= 0"):
        LinearCommModel(per_tuple_s=-1.0)
    with pytest.raises(UsageError, match="comm must have a cost"):
        FusionProblem.build(["a"], {"a": 0.1}, [], object())  # type: ignore[arg-type]


def test_fusion_legal_reports_the_annotation() -> None:
    p = triangle(exlocate=[{"a", "c"}], unfusable=[{"b", "c"}])
    assert fusion_legal(frozenset({"a"}), frozenset({"b"}), p).ok
    verdict = fusion_legal(AB, frozenset({"c"}), p)
    assert not verdict.ok
    assert verdict.reason == "exlocation annotation {a,c}"
    verdict = fusion_legal(frozenset({"b"}), frozenset({"c"}), p)
    assert verdict.reason == "unfusable annotation {b,c}"
    assert not fusion_legal(AB, frozenset({"b"}), p).ok  # overlap


def test_big_exlocation_group_names_the_clashing_pair() -> None:
    p = triangle(exlocate=[{"a", "b", "c"}])
    verdict = fusion_legal(frozenset({"a"}), frozenset({"c"}), p)
    assert verdict.reason == "exlocation annotation {a,b,c} (a and c would share a PE)"


def test_initial_partitions_join_overlapping_colocation_groups() -> None:
    p = FusionProblem.build(
        list("abcde"), dict.fromkeys("abcde", 0.1), [], COMM, colocate=[{"b", "d"}, {"d", "a"}]
    )
    assert initial_partitions(p) == (frozenset("abd"), frozenset("c"), frozenset("e"))


def test_colocation_against_exlocation_is_an_error_naming_both() -> None:
    p = FusionProblem.build(
        list("abc"),
        dict.fromkeys("abc", 0.1),
        [],
        COMM,
        colocate=[{"a", "b"}, {"b", "c"}],
        exlocate=[{"a", "c"}],
    )
    with pytest.raises(OptimizeError, match=re.escape("colocation {a,b,c} conflicts with")):
        initial_partitions(p)
    with pytest.raises(OptimizeError, match=re.escape("exlocation annotation {a,c}")):
        initial_partitions(p)


def test_links_may_be_passed_as_link_objects() -> None:
    p = FusionProblem.build(["a", "b"], {"a": 0, "b": 0}, [Link("a", "b", 1.0, 2.0)], COMM)
    assert p.links[0].byte_rate == 2.0


def test_links_made_with_new_rates_or_ends_equal_links_built_so() -> None:
    """FATM's rate search and channel quotient make links without Link's __init__: equal
    (and equally hashed) to the links built field by field."""
    from spadeopt.optimize.problem import with_ends, with_rates

    links = [Link("a", "b", 1.0, 8.0), Link(None, "b", 2.0, 4.0), Link("a", None, 0.0, 0.0)]
    got = with_rates(links, [3.0, 0.5])
    assert got == (Link("a", "b", 3.0, 8.0), Link(None, "b", 0.5, 4.0))
    assert hash(got[0]) == hash(Link("a", "b", 3.0, 8.0)) and got[0].byte_rate == 24.0
    assert with_ends(links, [(2, "x", None), (0, None, "b")]) == (Link("x", None, 0.0, 0.0), Link(None, "b", 1.0, 8.0))
