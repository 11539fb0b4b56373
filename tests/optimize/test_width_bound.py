"""The width search's branch and bound changes no plan.

``fatm.BOUND_WIDTHS`` on and off: the same plan.json, widths, MaxFrac and predicted rate,
on random apps from the oracle's generators (1 x 4 and 2 x 4 cores: with the bound on,
some of their vectors are never fused, else this would test nothing) and on the
benchmark's chain app.
"""

from __future__ import annotations

import random

import pytest

from spadeopt.bench.fatm_speed import chain_app, chain_profile
from spadeopt.optimize import fatm
from spadeopt.optimize.fatm import fuse_auto
from spadeopt.optimize.predict import DEFAULT_MODEL
from spadeopt.optimize.problem import LinearCommModel
from tests.optimize.oracle import random_graph, random_profile

COMM = LinearCommModel(per_tuple_s=0.4e-6, per_byte_s=1e-9)


def _plan(graph, prof, comm, nodes, cores, bound, monkeypatch):
    monkeypatch.setattr(fatm, "BOUND_WIDTHS", bound)
    auto = fuse_auto(graph, prof, comm, nodes, cores, rate="max", model=DEFAULT_MODEL)
    search = auto.explain["fission"]["search"] or {}
    return ((auto.plan.to_json(), auto.explain["fission"]["widths"], auto.explain["max_frac"],
             auto.explain["rate"]["predicted"]), len(search.get("bounded", ())))


def _random_cases():
    for seed in range(12):
        rng = random.Random(seed)
        graph = random_graph(rng)
        yield graph, random_profile(graph, rng)


@pytest.mark.parametrize("nodes,cores", [(1, 4), (2, 4)])
def test_the_bound_changes_no_plan_on_random_apps(nodes, cores, monkeypatch):
    bounded = 0
    for graph, prof in _random_cases():
        on, n = _plan(graph, prof, COMM, nodes, cores, True, monkeypatch)
        off, _ = _plan(graph, prof, COMM, nodes, cores, False, monkeypatch)
        assert on == off, graph.name
        bounded += n
    assert bounded > 0  # the bound did skip vectors: the comparison is not vacuous


def test_the_bound_changes_no_plan_on_the_benchmark_chain(monkeypatch):
    graph = chain_app(40)
    comm = LinearCommModel(2e-6, 1e-9)
    on, _ = _plan(graph, chain_profile(graph), comm, 1, 8, True, monkeypatch)
    off, _ = _plan(graph, chain_profile(graph), comm, 1, 8, False, monkeypatch)
    assert on == off
