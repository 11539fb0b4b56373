"""Hinted rate searches (issue 36): the quick ratings' searches try only the factors a hint
leaves open, and answer as the plain search does while feasibility is monotone.

``rate.hinted_rate`` takes :func:`max_rate`'s steps, assumes the outcome outside the
hint's bracket and checks each assumption with one try; a wrong hint falls back to the
plain search. FATM with and without hints plans the benchmark chain identically,
searched vectors and their rates included."""

from __future__ import annotations

import math
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spadeopt.bench.fatm_speed import chain_app, chain_profile
from spadeopt.optimize import fatm_search
from spadeopt.optimize.fatm import fuse_auto
from spadeopt.optimize.problem import LinearCommModel
from spadeopt.optimize.rate import SCORE_STEPS, SEARCH_STEPS, RateSearch, hinted_rate, max_rate
from spadeopt.optimize.rate_hint import PLACEMENT, SATURATED, Hint, rung_hint


@settings(max_examples=300, deadline=None, derandomize=True)
@given(threshold=st.floats(1e-6, 1e3), below=st.floats(0.0, 2e3), width=st.floats(1.0, 1e4),
       steps=st.integers(0, SEARCH_STEPS), noise=st.integers(0, 2**31), monotone=st.booleans())
def test_a_hinted_search_is_the_plain_one_when_feasibility_is_monotone(threshold, below, width, steps, noise,
                                                                       monotone):
    """Monotone: bit for bit (plan, factor, tries), whatever the hint, right or wrong.
    Not monotone: a plan the attempt returned, at the factor reported."""
    calls: list[float] = []

    def attempt(k: float):
        calls.append(k)
        if monotone:
            return ("plan", k) if k <= threshold else None
        return ("plan", k) if zlib.crc32(repr((k, noise)).encode()) % 3 else None

    try:
        plain = max_rate(100.0, 2.0, 8.0, attempt, steps)
    except Exception as exc:  # nothing fits: the hinted search says so too
        try:
            hinted_rate(100.0, 2.0, 8.0, attempt, steps, [(below, below * width)])
        except type(exc):
            return
        raise AssertionError("the hinted search found a plan the plain one did not") from exc
    n_plain = len(calls)
    calls.clear()
    got = hinted_rate(100.0, 2.0, 8.0, attempt, steps, [(below, below * width), (below / 3, math.inf)])
    if monotone:
        assert got == plain
    else:
        plan, search = got
        assert plan == ("plan", search.factor)
    assert len(set(calls)) == len(calls)  # no factor tried twice
    assert n_plain > 0


def test_a_right_hint_saves_tries():
    """A bracket around the threshold: the steps outside it are not tried."""
    calls: list[float] = []

    def attempt(k: float):
        calls.append(k)
        return ("plan", k) if k <= 1.7 else None

    plain = max_rate(100.0, 2.0, 8.0, attempt, SCORE_STEPS)
    n_plain = len(calls)
    calls.clear()
    assert hinted_rate(100.0, 2.0, 8.0, attempt, SCORE_STEPS, [(1.69, 1.71)]) == plain
    assert len(calls) <= 4 < n_plain


def test_rung_hints():
    """The last bracket assumes a tenth of the cores' bound fits, or 0.7 of the previous
    rung's factor, or half the first bracket's lower end, the least; a PE-bound rung
    scales its bracket by the MaxFrac ratio; otherwise the same rung of the vector rated
    before gives the first bracket."""
    assert rung_hint(None, {}, 0.5, 0.5).brackets(10.0) == [(10.0 / 9.9, math.inf)]
    prev = RateSearch(1000.0, 10.0, 12, False, SCORE_STEPS, 10.0, 10.05)
    near = RateSearch(1000.0, 5.0, 12, False, SCORE_STEPS, 5.0, 5.02)
    (below, above), _, last = rung_hint(prev, {10.05: SATURATED}, 0.5, 1.0, near).brackets(40.0)
    assert math.isclose(below, 20.0, rel_tol=1e-8) and math.isclose(above, 20.1, rel_tol=1e-8)
    assert last == (7.0, math.inf)  # 0.7 x the previous factor
    assert rung_hint(prev, {10.05: PLACEMENT}, 1.0, 0.3, near).brackets(40.0) == [
        (5.0, 5.02), (5.0 / 1.05, 5.02 * 1.05), (10.0 * 0.3 * 0.7, math.inf)]
    assert rung_hint(None, {}, 0.5, 0.5, near).brackets(100.0)[-1] == (2.5, math.inf)  # half of 5.0
    assert rung_hint(prev, {10.05: PLACEMENT}, 0.5, 0.75).brackets(1.0) == [(7.0, math.inf)]
    assert Hint(below=9.0).brackets(40.0) == [(9.0, math.inf)]


@pytest.mark.slow  # ~17 s: two plans of 200 operators for 16 cores
def test_fatm_plans_the_chain_alike_with_and_without_hints(monkeypatch):
    """The 200-operator chain at 1 x 16 cores (quotient ratings): plan, widths, rate and
    every searched vector's rating identical."""
    g = chain_app(200)

    def plan():
        auto = fuse_auto(g, chain_profile(g), LinearCommModel(2e-6, 1e-9), nodes=1, cores=16, rate="max")
        return auto.plan.to_json(), auto.explain["fission"], auto.explain["rate"]

    with_hints = plan()
    monkeypatch.setattr(fatm_search, "HINTS", {True: False, False: False})
    assert plan() == with_hints
