"""Candidates scored with a short rate search, the chosen one resumed (issue 27 item 6).

FATM scores width vectors and MaxFrac rungs with ``rate.SCORE_STEPS`` bisection steps and
resumes the chosen candidate's search to ``rate.SEARCH_STEPS``. Which candidate is chosen
may differ from a search that scores at full resolution (that is the point); the plan of
the chosen candidate may not: a resumed search takes exactly the midpoints an
uninterrupted one takes."""

from __future__ import annotations

import math
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spadeopt import api
from spadeopt.bench.fatm_speed import RATE, chain_app
from spadeopt.optimize.fatm import OperatorProfile, fuse_auto
from spadeopt.optimize.fatm_fit import collapse_fraction, fit_production
from spadeopt.optimize.fatm_physical import PhysicalCache
from spadeopt.optimize.fatm_search import SearchContext, plan_physical
from spadeopt.optimize.predict import DEFAULT_MODEL
from spadeopt.optimize.problem import LinearCommModel
from spadeopt.optimize.rate import SCORE_STEPS, SEARCH_STEPS, max_rate, resume_rate

COMM = LinearCommModel(2e-6, 1e-9)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(threshold=st.floats(1e-9, 1e3), noise=st.integers(0, 2**31), steps=st.integers(0, SEARCH_STEPS),
       monotone=st.booleans())
def test_a_resumed_rate_search_is_the_uninterrupted_one(threshold, noise, steps, monotone):
    """Bit for bit (plan, factor, tries), whether feasibility is monotone in the rate or not."""

    def attempt(k: float):
        if monotone:
            return ("plan", k) if k <= threshold else None
        return ("plan", k) if zlib.crc32(repr((k, noise)).encode()) % 3 else None

    try:
        whole = max_rate(100.0, 2.0, 8.0, attempt)
    except Exception as exc:  # nothing fits: the short search must say the same
        with pytest.raises(type(exc)):
            max_rate(100.0, 2.0, 8.0, attempt, steps)
        return
    short = max_rate(100.0, 2.0, 8.0, attempt, steps)
    resumed = resume_rate(100.0, short[0], short[1], attempt)
    assert resumed == whole
    assert resumed[1].complete and (whole[1].at_upper_bound or short[1].steps == steps)


def _bench_case(n: int):
    g = chain_app(n)
    load = {op.name: 0.002 + (i % 5) * 0.003 for i, op in enumerate(g.operators)}
    return g, OperatorProfile(g.name, g.fingerprint, load,
                              tuple((s.src.op, s.dst.op, RATE, 60.0) for s in g.streams), RATE)


def _peer_case():
    graph, _ = api.load_graph("apps/peer.py", {"tuples": "1000", "n": "4"})
    load = {op.name: 0.01 + 0.02 * (i % 4) for i, op in enumerate(graph.operators)}
    return graph, OperatorProfile(graph.name, graph.fingerprint, load,
                                  tuple((s.src.op, s.dst.op, 10_000.0, 60.0) for s in graph.streams), 10_000.0)


@pytest.mark.parametrize("case,cores", [pytest.param("chain60", 8, marks=pytest.mark.slow),  # ~30 s
                                       ("chain60", 2), ("peer", 4)])
def test_the_chosen_plan_is_the_full_resolution_plan_of_its_widths_and_max_frac(case, cores):
    graph, prof = _bench_case(60) if case == "chain60" else _peer_case()
    auto = fuse_auto(graph, prof, COMM, nodes=1, cores=cores, rate="max")
    assert SCORE_STEPS < SEARCH_STEPS
    model = fit_production(graph, prof, DEFAULT_MODEL)
    ctx = SearchContext(graph, prof, COMM, 1, cores, 0.95, 1.0, True, model, collapse_fraction(graph, prof, model),
                        PhysicalCache(graph, prof, COMM, model))
    full = plan_physical(ctx, auto.plan.regions, auto.explain["max_frac"], "max")  # SEARCH_STEPS from scratch
    assert full.result.partitions == auto.result.partitions
    assert auto.explain["rate"]["factor"] == full.factor
    assert auto.explain["rate"]["search_tries"] == full.search.tries
    assert math.isclose(auto.explain["rate"]["planned"], prof.source_rate * full.factor)
