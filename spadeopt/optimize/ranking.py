"""How FATM ranks candidate plans (width vectors, MaxFrac rungs, widened or not): one rule.

A plan is ranked by its predicted source rate and, when predictions are closer than
the model can tell apart, by the tuples it sends across PE links (issue 27 item 6):
fewer crossing tuples wins, because a cut stream costs a send and a receive per tuple
at each end whatever the model says, and the plan that cuts the lighter stream is the
one that holds up when the prediction is off (the 0.91x case of issue 27: FATM cut a
200 k tuples/s stream where the hand layout cut a 3 k rows/s one, both predicted close).

Each comparison site first finds its *rate leader* as before (the highest predicted
rate, where a challenger must beat the incumbent by more than :data:`TIE`), then calls
:func:`tie_break` with every candidate it evaluated: among the candidates whose rate is
within :data:`TIE_WINDOW` of the leader's, the one with the fewest crossing tuples is
chosen (the leader keeps its place on equal crossing). The tie-break picks among the
plans a search made; it does not steer the search (a width search that followed
crossing tuples along a 12 % plateau would try several times the vectors).
Sites: ``widths.choose_widths`` (the width vectors tried), ``fatm_search.best_over_max_frac``
(the MaxFrac rungs), ``fatm._fuse_auto`` (the widened plan against the unwidened one).

>>> a, b, c = Rated(100.0, 900.0), Rated(98.5, 300.0), Rated(95.0, 100.0)
>>> tie_break(a, [a, b, c], lambda r: r) == b   # b is within 2 % of the leader and crosses less; c is not
True
>>> tie_break(a, [a, Rated(98.5, 900.0)], lambda r: r) == a   # equal crossing: the leader stays
True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

MODEL_ERROR = 0.12
"""The model's error when it compares two plans: predicted rates closer than this
(relative to the larger) are ties, broken by fewer crossing tuples.

Where it comes from: the plan-relative prediction error of FATM's plans in the last
quiet-machine compares (``docs/results/compare/{peer,outlier,bargain,chain}-r10.json``
and ``-r10b.json``, docs/decisions/019-one-prediction-model-for-every-plan.md): each FATM
plan's ``versus_fall`` (predicted over measured, divided by FALL's predicted over measured in
the same compare, so the machine's speed during the probe cancels) lies in 0.88-1.09;
the largest deviation from 1 is 0.118 (outlier, r10b), rounded up to 0.12.
``tests/optimize/test_ranking.py`` recomputes it from those files. FMAN's 10-PE chain
(0.40, more PEs than cores; an open diagnosis) is not an FATM plan and not counted."""

TIE = 0.01
"""The rate leader's rule: a plan must predict more than ``1 + TIE`` times the incumbent's
rate to replace it (the rate search's bisection resolves 0.02 %; a 1 % margin keeps the
simpler plan on noise)."""

TIE_WINDOW = 0.02
"""Predicted rates closer than this (relative to the larger) are ties for :func:`tie_break`.

It was :data:`MODEL_ERROR` (12 %) until FATM had to return the best plan under its own
model: a tie-break over a 12 % plateau chose plans its model ranked up to 12 % lower, and
at 16 cores the plans it ranked higher ran faster
(docs/decisions/022-width-search-and-tie-break.md). Within 2 % (the oracle test's
tolerance) fewer crossing tuples still win; what
a crossing costs belongs in the prediction (the learned link cost), not in a wide tie."""

CROSSING_REL_TOL = 1e-9  # crossing tuples this close (relative) are equal: the leader stays

T = TypeVar("T")


@dataclass(frozen=True)
class Rated:
    """A candidate plan as ranked: its predicted source rate (``None``: nothing fits or
    nothing can be predicted) and the tuples per second crossing its PE links at the
    profiled source rate (``None``: unknown; then only the rate counts)."""

    rate: float | None
    crossing: float | None = None


def close(a: float, b: float) -> bool:
    """Whether two predicted rates differ by less than :data:`TIE_WINDOW` of the larger."""
    return abs(a - b) < TIE_WINDOW * max(abs(a), abs(b))


def tie_break(leader: T, candidates: Iterable[T], rated: Callable[[T], Rated]) -> T:
    """The candidate chosen over the rate ``leader``: of ``candidates`` whose predicted
    rate is :func:`close` to the leader's, the one with the fewest crossing tuples (the
    first of equals in ``candidates`` order; the leader itself on a tie with it).
    Candidates with no rate or no crossing are not considered; nor is any when the
    leader has none."""
    lead = rated(leader)
    if lead.rate is None or lead.crossing is None:
        return leader
    best, best_cross = leader, lead.crossing
    for cand in candidates:
        r = rated(cand)
        if r.rate is None or r.crossing is None or not close(r.rate, lead.rate):
            continue
        if r.crossing < best_cross and not math.isclose(r.crossing, best_cross, rel_tol=CROSSING_REL_TOL):
            best, best_cross = cand, r.crossing
    return best


def crossing_rate(links: Iterable[tuple[str | None, str | None, float]], pe_of: Mapping[str, str]) -> float:
    """Tuples per second on the links ``(src, dst, rate)`` whose ends are in different PEs
    (``pe_of``: operator -> PE); links with an end outside the app are not PE links."""
    return math.fsum(r for a, b, r in links if a is not None and b is not None and pe_of[a] != pe_of[b])
