"""Streams arrive whole: a PE that finishes early must not lose its tail."""

from __future__ import annotations

import signal

import pytest

from spadeopt.api import load_graph
from spadeopt.optimize.strategies import plan_for
from spadeopt.orchestrate.build_local import build_and_run


@pytest.fixture
def deadline():
    def boom(*_):
        raise TimeoutError("the run hung: a stream lost its tail or its final marker")

    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(90)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("fusion", ["manual", "none"])
def test_fast_upstream_pe_does_not_lose_its_tail(fusion, deadline):
    graph, ref = load_graph("tests/apps/loss.py", {"tuples": "20000", "work": "5000"})
    for _ in range(3):
        res = build_and_run(graph, plan_for(graph, fusion), app_ref=ref)
        sinks = {k: v for pe in res.report["pes"] for k, v in pe["sinks"].items()}
        assert sinks == {"sink": 625}
