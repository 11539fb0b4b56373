"""Hints for the width ratings' rate searches: where a MaxFrac rung will fit, and where not.

Every width vector FATM rates (on its channel quotient, :mod:`spadeopt.optimize.quotient`,
or in full) runs one short rate search per MaxFrac rung (:mod:`spadeopt.optimize.
fatm_search`): a bisection of a factor-100 bracket under the cores' bound, ~12 GreedyFuse
runs, most of them far from where the rung stops fitting. :func:`spadeopt.optimize.rate.
hinted_rate` takes the same steps but tries only the factors inside a bracket it is
given: at or below its lower end a step is assumed to fit, at or above its upper end
assumed not to, and one try on each side checks the assumptions (a wrong bracket gives
way to the next one, the last to the plain search).

The brackets of a rung (:func:`rung_hint`, in the order tried):

1. after a rung of the same vector whose search stopped at a PE over MaxFrac
   (:data:`SATURATED`: *PE-bound*): loads and link rates scale with the factor, so
   GreedyFuse at factor ``k x r`` and MaxFrac ``m x r`` meets the same limits as at
   ``k`` and ``m`` (up to rounding, while the cores are not the limit): the previous
   rung's final bracket times ``m' / m``;
2. else the final bracket of the same rung of the vector rated before the same way
   (quotient or full; ``neighbour``): the ascent moves one or two regions by one width,
   and the rung often stops within the same bracket, or a few per cent off (the bracket
   is then tried again :data:`WIDEN` wider);
3. always last: a step at a tenth of the cores' bound fits (:data:`FIRST_FITS`: the bound
   has every core busy with operator work alone), or, after a rung of the same vector,
   one at :data:`CORES_FITS` of its factor (times ``m' / m`` when smaller); and one at
   :data:`LAST_SHARE` of bracket 1 or 2's lower end, when that is less.

Invariant: a hint never changes what a search returns when feasibility is monotone in
the factor (:func:`spadeopt.optimize.rate.hinted_rate`); only how many GreedyFuse runs
it takes. Cost: O(1) per rung.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from spadeopt.optimize.rate import RateSearch

FIRST_FITS = 1 / 9.9
"""Every search assumes that a step at or below this share of the cores' bound fits (the
step down to 1/100 of it and the first midpoint, ~1/10): on the benchmark's chain they
fit in every search at 16 and 64 cores."""

CORES_FITS = 0.7
"""After a rung stopped by the cores, the next one assumes it fits at this share of the
previous rung's factor (times the MaxFrac ratio when it is below 1): a larger MaxFrac
fuses more, so it fits at least as far (16 cores: 0.5 -> 0.75 -> 1.0 went 5.2 -> 6.4 -> 7.0)."""

PLACEMENT, SATURATED = "placement", "saturated"  # why a search's step did not fit (fatm_search._attempt)
WIDEN = 1.05
"""A first bracket that fails its checks is tried again this much wider each way before
the last bracket: neighbouring vectors' rungs stopped within a few per cent of each other
(16 cores: 53 of 76 quick searches missed the neighbour's bracket itself)."""

LAST_SHARE = 0.5
"""The last bracket assumes no fit above this share of the first bracket's lower end:
where a rung stops far under a tenth of the cores' bound (one heavy operator at MaxFrac:
apps/outlier.py at 16 cores stops at 0.05-0.09 of it), :data:`FIRST_FITS` is wrong."""

SLACK = 1e-9  # relative room around a scaled bracket for rounding (the bracket is ~0.45 % wide)


@dataclass
class Hint:
    """A rung's brackets: ``first`` (``(below, above)`` factors, or ``None``), then the
    last one with no upper end, fitting up to ``below`` (``None``: :data:`FIRST_FITS` of
    the cores' bound), and never above half of ``first``'s lower end; ``failures``
    receives why each tried factor did not fit."""

    first: tuple[float, float] | None = None
    below: float | None = None
    failures: dict[float, str] = field(default_factory=dict)

    def brackets(self, top: float) -> list[tuple[float, float]]:
        """The ``(below, above)`` brackets for a search under the cores' bound ``top``:
        ``first``, ``first`` widened by :data:`WIDEN` each way, then the last one."""
        below = top * FIRST_FITS if self.below is None else self.below
        if self.first is None:
            return [(below, math.inf)]
        lo, hi = self.first
        return [(lo, hi), (lo / WIDEN, hi * WIDEN), (min(below, lo * LAST_SHARE), math.inf)]


def rung_hint(prev: RateSearch | None, failures: dict[float, str], prev_frac: float, frac: float,
              neighbour: RateSearch | None = None) -> Hint:
    """The hint for a rung at MaxFrac ``frac`` after a search ``prev`` at ``prev_frac``
    (``None``: the vector's first rung) whose failed factors ``failures`` maps to their
    reason (:data:`PLACEMENT` or :data:`SATURATED`), and the same rung's search of the
    vector rated before (``neighbour``; module docstring)."""
    near = None if neighbour is None or neighbour.at_upper_bound else (neighbour.lo, neighbour.hi)
    if prev is None or prev.at_upper_bound:
        return Hint(near)
    r = frac / prev_frac
    if failures.get(prev.hi) == SATURATED:  # PE-bound: the bracket scales with MaxFrac
        near = (prev.lo * r * (1 - SLACK), prev.hi * r * (1 + SLACK))
    return Hint(near, below=prev.lo * min(1.0, r) * CORES_FITS)
