"""Adding a fusion strategy takes one :class:`Strategy` (``tests/toolkit/sample_strategy.py``,
registered here only): once registered it is ``--fusion pairs`` for ``plan_for``, the
build, the CLI's help and ``compare``, and a build under it computes what FALL's does."""

from __future__ import annotations

import pytest

from spadeopt import api
from spadeopt.errors import UsageError
from spadeopt.optimize.strategies import (
    STRATEGY_BY_NAME,
    fusion_help,
    honours_of,
    label_of,
    plan_for,
    register,
    selectable,
)
from tests.toolkit.harness import simulate
from tests.toolkit.sample_strategy import PAIRS

CHAIN = "apps/chain.py"
PARAMS = {"n": "5", "tuples": "300", "sink": "file", "width": "3"}


@pytest.fixture
def pairs():
    register(PAIRS)
    yield PAIRS
    del STRATEGY_BY_NAME[PAIRS.name]


def test_unregistered_it_is_refused_with_the_choices():
    graph, _ = api.load_graph(CHAIN, PARAMS)
    with pytest.raises(UsageError, match="unknown fusion strategy 'pairs'; use one of none, all, manual$"):
        plan_for(graph, "pairs")


def test_registered_the_registry_answers_for_it(pairs):
    assert selectable() == ("none", "all", "manual", "pairs")
    assert label_of("pairs") == "FPAIR" and honours_of("pairs") == frozenset()
    assert fusion_help().endswith("pairs (consecutive operators two by two)")
    with pytest.raises(UsageError, match="registered already"):
        register(PAIRS)


def test_its_plan_pairs_the_operators_and_places_the_pairs_round_robin(pairs):
    graph, _ = api.load_graph(CHAIN, PARAMS)
    plan = plan_for(graph, "pairs", nodes=2)
    assert plan.strategy == "pairs"
    assert [pe.operators for pe in plan.pes] == [("src", "op0"), ("op1", "op2"), ("op3", "op4"), ("sink",)]
    assert [pe.node for pe in plan.pes] == [0, 1, 0, 1]
    assert [r.width for r in plan.regions] == [1]  # not declared_widths: the app's width 3 is FMAN's


def test_it_pairs_the_physical_graph_of_a_region_at_its_width(pairs):
    graph, _ = api.load_graph(CHAIN, PARAMS)
    plan = plan_for(graph, "pairs", widths={"ops": 2})
    physical = [o for pe in plan.pes for o in pe.operators]
    assert len(physical) > len(graph.operators) and all(len(pe.operators) <= 2 for pe in plan.pes)
    assert [r.width for r in plan.regions] == [2]


def test_a_build_under_it_computes_what_falls_does(pairs, tmp_path):
    build = api.build(CHAIN, "pairs", PARAMS, out=tmp_path / "build", widths={"ops": 2})
    assert build.plan.strategy == "pairs" and build.deploy.strategy == "pairs"
    graph, _ = api.load_graph(CHAIN, PARAMS)
    got = simulate(graph, "pairs", tmp_path / "pairs", given=build.plan, seed=3)
    fall = simulate(graph, "all", tmp_path / "all", widths={"ops": 2})
    assert got == fall and len(got["sink"]) == 300


def test_compare_can_run_it(pairs):
    from spadeopt.bench.compare import entries

    assert list(entries()) == ["none", "all", "manual", "auto1", "auto", "pairs"]
    assert (entries()["pairs"].label, entries()["pairs"].colour) == ("FPAIR", "#c9c")


def test_fatm_plans_through_the_same_interface_from_a_profile():
    from spadeopt.optimize.fatm import OperatorProfile, fuse_auto
    from spadeopt.optimize.problem import LinearCommModel

    graph, _ = api.load_graph(CHAIN, {"n": "6"})
    links = tuple((s.src.op, s.dst.op, 10_000.0, 100.0) for s in graph.streams)
    prof = OperatorProfile(graph.name, graph.fingerprint, {op.name: 0.3 for op in graph.operators}, links)
    comm = LinearCommModel(2e-6)
    plan = plan_for(graph, "auto", 1, 4, profile=prof, comm=comm)
    assert plan == fuse_auto(graph, prof, comm, 1, 4).plan and plan.strategy == "auto"
    assert plan_for(graph, "auto", 1, 4, instrumented=True, profile=prof, comm=comm).instrumented
