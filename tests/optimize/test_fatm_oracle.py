"""FATM returns the best plan under its own model: its choice against an exhaustive oracle.

The oracle (``tests/optimize/oracle.py``) plans every integer width vector with
GreedyFuse at finer MaxFrac rungs than FATM's and with every contiguous per-channel
fusion, and scores every plan with FATM's own prediction. FATM's predicted rate must be
at least ``TOLERANCE`` of the oracle's best: on small random graphs (a splittable source
or not, filters, a keyed event-time window, a counting sink) at 2, 4 and 16 cores and on
2 nodes, and on graphs shaped like the two many-core workloads (a 16-call opaque chain
and a YSB-style keyed pipeline) at 16 cores, the chain at 64. Synthetic profiles; the model's
constants are the defaults. Slow: the oracle plans thousands of plans.
"""

from __future__ import annotations

import random

import pytest

from spadeopt.api import load_graph
from spadeopt.optimize.fatm import fuse_auto
from spadeopt.optimize.predict import DEFAULT_MODEL
from spadeopt.optimize.problem import LinearCommModel
from tests.optimize.oracle import oracle, random_graph, random_profile, synthetic_profile

TOLERANCE = 0.98
COMM = LinearCommModel(per_tuple_s=0.4e-6, per_byte_s=1e-9)

pytestmark = pytest.mark.slow


def _check(graph, prof, nodes: int, cores: int, greedy_widths_up_to: int = 16, max_cuts: int = 2) -> None:
    auto = fuse_auto(graph, prof, COMM, nodes, cores, rate="max", model=DEFAULT_MODEL)
    got = auto.explain["rate"]["predicted"]
    best, how = oracle(graph, prof, COMM, DEFAULT_MODEL, nodes, cores, greedy_widths_up_to, max_cuts)
    assert best > 0, "the oracle found no plan"
    assert got >= TOLERANCE * best, (f"FATM predicted {got:,.0f}/s with widths {auto.explain['fission']['widths']}, "
                                     f"the oracle {best:,.0f}/s with {how}")


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("cores", [2, 4])
def test_fatm_reaches_the_oracle_on_random_graphs(seed, cores):
    rng = random.Random(seed)
    graph = random_graph(rng)
    _check(graph, random_profile(graph, rng), 1, cores)


@pytest.mark.parametrize("seed", range(3))
def test_fatm_reaches_the_oracle_on_random_graphs_at_16_cores_and_on_two_nodes(seed):
    rng = random.Random(100 + seed)
    graph = random_graph(rng)
    prof = random_profile(graph, rng)
    _check(graph, prof, 1, 16, greedy_widths_up_to=4)
    _check(graph, prof, 2, 4, greedy_widths_up_to=8)


def _opaque_chain():
    graph, _ = load_graph("apps/opaque_chain.py")
    per = {op.name: 1.3e-6 / 17 for op in graph.operators}  # 1.3 us a record on one PE, as measured on 16 cores
    return graph, synthetic_profile(graph, per, size=24.0)


def _ysb():
    graph, _ = load_graph("apps/ysb.py")
    per = {"events": 0.15e-6, "views": 0.1e-6, "campaign": 0.4e-6, "counts": 0.3e-6, "out": 0.05e-6}
    return graph, synthetic_profile(graph, per, selectivity={"views": 1 / 3, "counts": 0.001}, size=32.0)


@pytest.mark.parametrize("shape", [_opaque_chain, _ysb], ids=["opaque_chain", "ysb"])
def test_fatm_reaches_the_oracle_on_the_many_core_workloads_at_16_cores(shape):
    graph, prof = shape()
    _check(graph, prof, 1, 16, greedy_widths_up_to=8, max_cuts=1)


def test_fatm_reaches_the_oracle_on_the_opaque_chain_at_64_cores():
    """Every width 1-64 with each channel one PE or cut in two anywhere (GreedyFuse's
    family is too slow to plan at every width here)."""
    graph, prof = _opaque_chain()
    _check(graph, prof, 1, 64, greedy_widths_up_to=0, max_cuts=1)


def test_the_oracle_can_fail_fatm():
    """The check can fail: a plan pinned to width 1 on 16 cores is far below the oracle."""
    graph, prof = _opaque_chain()
    pinned = fuse_auto(graph, prof, COMM, 1, 16, rate="max", model=DEFAULT_MODEL, fission=False)
    best, _ = oracle(graph, prof, COMM, DEFAULT_MODEL, 1, 16, greedy_widths_up_to=0, max_cuts=0)
    assert pinned.explain["rate"]["predicted"] < 0.5 * best
