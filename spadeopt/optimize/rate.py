"""The planning rate: at which source rate FATM plans, and the highest one a cluster sustains.

A profile measures every operator's CPU fraction ``u`` and every link's tuple rate at
the rate the sources reached in the profiling run (``R0``). In a system whose sources
read as fast as the rest keeps up (a file, a generator: the paper's workloads, and the
throughput metric of its §5), that rate is an accident of the fusion that was profiled,
not a property of the application. What is a property of the application is the cost
*per source tuple*: ``u / R0`` CPU seconds for each operator and ``rate / R0`` tuples on
each link. Loads and link rates grow linearly with the source rate ``R``.

So FATM plans at a chosen rate ``R``: it scales the profile by ``R / R0`` and runs
GreedyFuse and placement on the scaled problem. Three choices (``--rate``):

* ``profiled``: ``R = R0``, the paper's literal reading (loads as measured);
* a number: the rate the developer needs (e.g. the feed's real rate);
* ``max`` (the default): the highest rate at which GreedyFuse finds PEs that are not
  saturated (no PE above MaxFrac) and placement fits them on ``nodes x cores`` (times
  the capacity fraction). That rate is also FATM's predicted throughput.

``max`` is found by bisection on ``log R`` between an upper bound (every core busy with
operator work alone, no communication) and a rate 10^4 times lower. Feasibility is
not proven monotone in ``R`` (GreedyFuse is a heuristic), but more rate only ever means
more load on every operator and link, so in practice it is; the search keeps the best
feasible plan it saw.

A search may stop early (``steps`` < :data:`SEARCH_STEPS`: FATM scores candidate plans
with :data:`SCORE_STEPS`) and be resumed by :func:`resume_rate`, which takes the same
midpoints the uninterrupted search would have taken: a search of ``s`` steps resumed
to :data:`SEARCH_STEPS` gives the very plan and factor of one that never stopped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from spadeopt.errors import OptimizeError, UsageError

T = TypeVar("T")

RATE_CHOICES = ("max", "profiled")
SEARCH_STEPS = 16  # bisection steps on log R: 10^4 bracket -> under 0.02 % apart
SCORE_STEPS = 10
"""Bisection steps when FATM only scores a candidate (a width vector, a MaxFrac rung):
the bracket of a factor 100 is then resolved to 100^(1/1024), 0.45 %, under the ranking's
``TIE`` (1 %); the chosen candidate alone is resumed to :data:`SEARCH_STEPS` (issue 27
item 6: 10 + 2 GreedyFuse runs per candidate instead of 16 + 2)."""


def parse_rate(text: str | float) -> str | float:
    """``max``, ``profiled`` or a rate > 0 in source tuples/s; anything else is a UsageError."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        value = float(text)
    elif isinstance(text, str) and text.strip().lower() in RATE_CHOICES:
        return text.strip().lower()
    else:
        try:
            value = float(str(text).replace("_", ""))
        except ValueError:
            value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise UsageError(f"--rate must be 'max', 'profiled' or a source rate > 0 in tuples/s; got {text!r}")
    return value


@dataclass(frozen=True)
class RateSearch:
    """What the search found: the planning ``rate``, the ``factor`` R / R0, how many rates
    were tried, and whether ``rate`` is the capacity bound itself (communication free)."""

    rate: float
    factor: float
    tries: int
    at_upper_bound: bool
    steps: int = SEARCH_STEPS  # bisection steps taken (the bracket below is where they left it)
    lo: float = 0.0  # the highest factor that fitted
    hi: float = 0.0  # the lowest factor that did not fit (after the bisection's steps)

    @property
    def complete(self) -> bool:
        """Whether the search took all :data:`SEARCH_STEPS` (or ended at the upper bound)."""
        return self.at_upper_bound or self.steps >= SEARCH_STEPS


def max_rate(profiled_rate: float, oper_load: float, capacity: float,
             attempt: Callable[[float], T | None], steps: int = SEARCH_STEPS) -> tuple[T, RateSearch]:
    """The highest factor ``k`` (rate ``k x profiled_rate``) for which ``attempt(k)`` succeeds.

    ``oper_load`` is the summed operator load at the profiled rate and ``capacity`` the
    cluster's cores available to PEs; ``attempt(k)`` returns a plan or ``None`` when the
    scaled problem does not fit. The search steps down from the capacity bound by factors
    of 100 until a plan fits, then bisects geometrically. Raises ``OptimizeError`` when
    nothing fits even when the whole app needs less than a millionth of a core. ``steps``
    bisection steps are taken (:func:`resume_rate` takes the rest).
    """
    if not (profiled_rate > 0 and math.isfinite(profiled_rate)):
        raise OptimizeError("the profile's sources sent no tuples, so there is no rate to plan at; "
                            "profile a run whose sources emit tuples, or pass --rate profiled")
    if oper_load <= 0:
        raise OptimizeError("the profile measured no CPU load at all; profile a longer run (-p / --duration)")
    hi = capacity / oper_load  # every core busy with operator work alone
    tries = 1
    best = attempt(hi)
    if best is not None:
        return best, RateSearch(hi * profiled_rate, hi, tries, True)
    # Step down until a plan fits: on a large cluster the bound is one operator's MaxFrac,
    # many orders of magnitude below the cluster's capacity. Give up only once the whole
    # app needs less than a millionth of a core, where no load can be the obstacle.
    lo = hi
    while True:
        lo /= 100
        best = attempt(lo)
        tries += 1
        if best is not None:
            break
        if lo * oper_load < 1e-6:
            raise OptimizeError(f"no fusion fits the cluster even at {lo * profiled_rate:.3g} source tuples/s; "
                                f"an operator or colocated group alone needs more than MaxFrac or a node")
    hi = min(hi, lo * 100)
    return _bisect(profiled_rate, best, lo, hi, tries, 0, steps, attempt)


def resume_rate(profiled_rate: float, best: T, search: RateSearch, attempt: Callable[[float], T | None],
                steps: int = SEARCH_STEPS) -> tuple[T, RateSearch]:
    """Continue the bisection of a :func:`max_rate` search that took fewer than ``steps``
    steps (``best``: the plan it returned; ``attempt``: the same function of the factor)
    up to ``steps``. The result is the one :func:`max_rate` with ``steps`` gives."""
    if search.at_upper_bound or search.steps >= steps:
        return best, search
    return _bisect(profiled_rate, best, search.lo, search.hi, search.tries, search.steps, steps, attempt)


def _bisect(profiled_rate: float, best: T, lo: float, hi: float, tries: int, done: int, steps: int,
            attempt: Callable[[float], T | None]) -> tuple[T, RateSearch]:
    """Bisection steps ``done + 1 .. steps`` on ``[lo, hi]`` (``best`` fits at ``lo``)."""
    for _ in range(done, steps):
        mid = math.sqrt(lo * hi)
        got = attempt(mid)
        tries += 1
        if got is None:
            hi = mid
        else:
            lo, best = mid, got
    return best, RateSearch(lo * profiled_rate, lo, tries, False, max(done, steps), lo, hi)


def scale(profile, factor: float):
    """An ``OperatorProfile`` at ``factor`` times its source rate."""
    return replace(profile, load={k: u * factor for k, u in profile.load.items()},
                   links=tuple((a, b, r * factor, size) for a, b, r, size in profile.links), source_rate=profile.source_rate * factor)


class _Assumed:
    """A factor :func:`hinted_rate` assumed to fit without trying it."""

    __slots__ = ("k",)

    def __init__(self, k: float) -> None:
        self.k = k


def hinted_rate(profiled_rate: float, oper_load: float, capacity: float, attempt: Callable[[float], T | None],
                steps: int, brackets: Sequence[tuple[float, float]]) -> tuple[T, RateSearch]:
    """:func:`max_rate` with hints: for a bracket ``(below, above)``, a factor ``<= below``
    is assumed to fit and one ``>= above`` assumed not to, without calling ``attempt``.

    Algorithm: for each bracket in turn, :func:`max_rate`'s very steps (the same
    midpoints: they depend only on the outcomes), ``attempt`` called only strictly
    inside the bracket (each factor at most once over all brackets). Then the
    assumptions are checked against one tried factor each: the highest factor assumed to
    fit is tried unless a higher one fitted (it is the plan returned when no tried
    factor above it fitted), and the lowest assumed not to fit is tried unless a lower
    one failed. A bracket whose checks fail gives way to the next; after the last, the
    plain :func:`max_rate` search runs (tried factors are not tried again).

    Invariant: when feasibility is monotone in the factor (more rate, more load on every
    operator and link: :func:`max_rate`'s own premise, not a theorem for GreedyFuse),
    the answer is :func:`max_rate`'s, plan and :class:`RateSearch` alike (``tries``
    counts every step, assumed or tried); otherwise it is still a plan ``attempt``
    returned at the factor reported. Cost: the tries inside a bracket and at most two
    checks, instead of every step; a wrong bracket costs those on top."""
    done: dict[float, T | None] = {}

    def tried(k: float) -> T | None:
        if k not in done:
            done[k] = attempt(k)
        return done[k]

    for below, above in brackets:
        got = _bracketed(profiled_rate, oper_load, capacity, tried, steps, below, above, done)
        if got is not None:
            return got
    return max_rate(profiled_rate, oper_load, capacity, tried, steps)


def _bracketed(profiled_rate: float, oper_load: float, capacity: float, tried: Callable[[float], T | None],
               steps: int, below: float, above: float, done: dict[float, T | None]) -> tuple[T, RateSearch] | None:
    """:func:`hinted_rate` with one bracket: its answer, or ``None`` when a check fails
    (``done``: every factor ``tried`` so far, with its outcome)."""
    assumed_ok: list[float] = []
    assumed_fail: list[float] = []

    def step(k: float) -> T | _Assumed | None:
        if k in done:  # tried under an earlier bracket: known
            return done[k]
        if k <= below:
            assumed_ok.append(k)
            return _Assumed(k)
        if k >= above:
            assumed_fail.append(k)
            return None
        return tried(k)

    try:
        best, search = max_rate(profiled_rate, oper_load, capacity, step, steps)
    except OptimizeError:
        return None
    fitted = [k for k, got in done.items() if got is not None]
    failed = [k for k, got in done.items() if got is None]
    if assumed_fail and not (failed and min(failed) <= min(assumed_fail)) and tried(min(assumed_fail)) is not None:
        return None
    if assumed_ok and not (fitted and max(fitted) >= max(assumed_ok)) and tried(max(assumed_ok)) is None:
        return None
    if isinstance(best, _Assumed):  # the plan at the highest factor assumed to fit (tried above, when checked)
        best = tried(best.k)
        if best is None:  # not monotone: a higher factor fitted, this one does not
            return None
    return best, search  # type: ignore[return-value]
