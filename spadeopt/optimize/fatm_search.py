"""FATM's search: the plan of a width vector, the width vectors' scores, the MaxFrac ladder.

For one width vector (the declared parallel regions with their widths)::

    physical graph + profile of the vector            (PhysicalCache, built once per vector)
    inlined operators costed at (1 - inlined_frac)    (what a collapsed run costs)
    --rate max: bisect the planning rate              (spadeopt.optimize.rate.max_rate)
        each rate: GreedyFuse (+ absorb) -> placement, refused when a PE is saturated
    otherwise: GreedyFuse + placement at the given or profiled rate
    -> FusedPlacement -> a trial Plan named as every strategy's -> predicted source rate

:func:`width_scorer` scores a vector by that predicted rate (``None`` when nothing fits)
and the tuples crossing its PE links (``WidthScorer.rated``) for
:func:`spadeopt.optimize.widths.choose_widths`, keeping each vector's :class:`Scored`
plan. :func:`best_over_max_frac` then plans the chosen vector at the user's MaxFrac and
the larger ones of :data:`MAX_FRAC_LADDER` (under ``--rate max``) and keeps the plan that
ranks best: the rate leader (a larger MaxFrac must beat the best so far by more than
``TIE``), then :func:`spadeopt.optimize.ranking.tie_break` (a rung predicted within the
model's error of it that sends fewer tuples across PE links).

Quotient ratings (issue 36): a vector with a region wider than ``quotient.KEEP`` and a
physical graph of :data:`QUOTIENT_MIN_OPERATORS` to :data:`GREEDY_MAX_OPERATORS`
operators is rated with each rung's GreedyFuse runs on its channel quotient
(:mod:`spadeopt.optimize.quotient`: channels 0 and 1 of each region, the others their
copies), expanded, costed, placed and predicted on the physical graph: every rung is a
real physical plan, and the rating a cheaper one than the full rating. The width search
confirms the vectors it may choose (the rate leader and those within ``TIE_WINDOW`` of
it) with :meth:`WidthScorer.confirm`, the full rating, so the chosen vector is ranked,
tie-broken and planned exactly as without quotients; quotient rungs are kept apart
(``(vector, (QUOTIENT, MaxFrac))``) and the MaxFrac ladder never reuses them. What may
differ: which vectors the ascent visits (it follows the quotient ratings). Hinted rate
searches (:data:`HINTS`, :mod:`spadeopt.optimize.rate_hint`): each rung's search of a
rating tries only the factors near where the previous rung, or the vector rated before,
stopped fitting; the answer is the plain search's while feasibility is monotone in the rate.

Invariants: every step is a pure function of the logical graph, the profile, ``comm``,
the fitted model and the settings in :class:`SearchContext`, so the caches change no
bit of the answer (``tests/optimize/test_fatm_caches.py`` plans with and without them):
a :class:`PhysicalCache` serves one call's vectors; :class:`ScaledProblems` rescales the
first problem of a rate search instead of rebuilding it; the ladder reuses the width
search's plan for the chosen vector at the user's MaxFrac.

Cost: under ``--rate max`` a candidate (a width vector, a MaxFrac rung) is scored with
a short rate search (:data:`spadeopt.optimize.rate.SCORE_STEPS`: 12 GreedyFuse +
placement runs on its physical graph instead of 18); :func:`refine` resumes the chosen
candidate's search to full resolution (6 more runs), which gives the very plan a full
search of that candidate gives (``tests/optimize/test_fatm_score_steps.py``). Which
candidate is chosen may differ from scoring at full resolution (issue 27 item 6). A
given or profiled rate costs one GreedyFuse + placement.

>>> max_frac_candidates(0.5, "max"), max_frac_candidates(0.9, "max"), max_frac_candidates(0.5, 100.0)
((0.5, 0.75, 1.0, 0.3), (0.9, 1.0, 0.3), (0.5,))
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from spadeopt.errors import OptimizeError, PlacementInfeasible, SpadeoptError
from spadeopt.model.graph import AppGraph
from spadeopt.optimize.cost import objective
from spadeopt.optimize.fatm_fit import collapse_fraction, fit_production, unattributed_call_s
from spadeopt.optimize.fatm_physical import (
    PhysicalCache,
    PhysicalEntry,
    Regions,
    predict_physical,
    prediction_inputs,
)
from spadeopt.optimize.fatm_problem import OperatorProfile, problem_for
from spadeopt.optimize.greedy_fuse import greedy_fuse, greedy_then_absorb
from spadeopt.optimize.placement import Placement, one_node_holds, pe_graph, place
from spadeopt.optimize.predict import PerfModel
from spadeopt.optimize.problem import CommModel, FusionProblem, with_rates
from spadeopt.optimize.quotient import KEEP, Quotient, quotient_fuse
from spadeopt.optimize.ranking import TIE, Rated, crossing_rate, tie_break
from spadeopt.optimize.rate import (
    SCORE_STEPS,
    SEARCH_STEPS,
    RateSearch,
    hinted_rate,
    max_rate,
    resume_rate,
    scale,
)
from spadeopt.optimize.rate_bound import capacity_bound, rate_bound
from spadeopt.optimize.rate_hint import PLACEMENT, SATURATED, Hint, rung_hint
from spadeopt.optimize.result import FusionResult
from spadeopt.optimize.symmetric import as_result, family
from spadeopt.plan.plan import Plan, make_plan
from spadeopt.plan.regions import choose_exchanges

MAX_FRAC_LADDER = (0.75, 1.0)
"""Under ``--rate max`` FATM also fuses the chosen widths with these MaxFrac values and
keeps the plan the prediction rates highest: MaxFrac leaves headroom for a planned rate,
which a flat-out run does not need, and GreedyFuse under a low MaxFrac must cut a channel
that needs a whole core into pipeline stages whose links cost more than they buy. The
width search fuses every width vector at every rung (:class:`WidthScorer`): which width
is best depends on how each is fused (wide vectors of big regions by the symmetric family
only: :data:`GREEDY_MAX_OPERATORS`)."""

MAX_FRAC_BELOW = (0.3,)
"""Under ``--rate max`` FATM also fuses at these smaller MaxFrac values: on few cores a
chain cut into more, lighter PEs can predict faster than the user's MaxFrac allows (the
oracle test found plans 2 % faster at MaxFrac 0.3 on 2 and 4 cores)."""


class ScaledProblems:
    """``problem_for(graph, scale(prof, k), comm, max_frac, min_util)`` for many factors ``k``.

    The first call builds it with :func:`problem_for` (checks, unfusable pairs, unseen
    streams, validation: every error as before), unless a ``base`` is given: a problem
    ``problem_for`` built of the graph and a profile with the same links (any numbers,
    MaxFrac and MinUtil; FATM's: the vector's prediction problem, :func:`base_problem`).
    Later calls (every call, with a base) take that problem's operators, link ends, sizes
    and annotations, which do not depend on ``k``, and only multiply the profile's loads
    and link rates by ``k`` as :func:`scale` does (:meth:`FusionProblem.rescaled`): the
    same problem, field for field, without rebuilding the graph's indexes for each rate
    the search tries, nor for each MaxFrac rung of a vector."""

    def __init__(self, graph: AppGraph, prof: OperatorProfile, comm: CommModel, max_frac: float,
                 min_util: float, memo: dict[str, Any] | None = None, base: FusionProblem | None = None) -> None:
        self.graph, self.prof, self.comm, self.max_frac, self.min_util = graph, prof, comm, max_frac, min_util
        self.memo = memo
        self.first: FusionProblem | None = None
        self.base = base

    def __call__(self, k: float) -> FusionProblem:
        if self.first is None and self.base is None:
            self.first = problem_for(self.graph, scale(self.prof, k), self.comm, self.max_frac, self.min_util,
                                     self.memo)
            return self.first
        first, prof = self.first or self.base, self.prof
        load = {n: prof.load[n] * k for n in first.operators}
        n = len(prof.links)  # problem_for's links: the profile's, then its zero-rate unseen streams
        links = with_rates(first.links, [r * k for _, _, r, _ in prof.links])  # Link(src, dst, r * k, size)
        if self.first is None:
            self.first = first.rescaled(load, links + first.links[n:], self.max_frac, self.min_util)
            return self.first
        return first.rescaled(load, links + first.links[n:])


def base_problem(ctx: SearchContext, entry: PhysicalEntry) -> FusionProblem | None:
    """The vector's prediction problem (built now if it was not: every plan of the vector
    is predicted on it), the :class:`ScaledProblems` base of its rate searches and
    channel-symmetric plans; ``None`` when it cannot be built (they then build their own,
    and fail as before)."""
    try:
        prediction_inputs(entry, ctx.comm, ctx.model)
    except SpadeoptError:
        return None
    return entry.predict_problem


@dataclass(frozen=True)
class FusedPlacement:
    """GreedyFuse and placement of one physical problem: PE ``i`` holds
    ``result.partitions[i]``, is called ``pe_ids[i]`` until the plan names it, and runs
    on node ``placement[pe_ids[i]]``. ``factor`` is the planning rate over the profiled
    rate; ``search`` what the ``--rate max`` search found (``None`` at a given rate)."""

    problem: FusionProblem
    result: FusionResult
    placement: Placement
    pe_ids: tuple[str, ...]
    factor: float = 1.0
    search: RateSearch | None = None


@dataclass(frozen=True)
class Scored:
    """A width vector's :class:`FusedPlacement`, its trial plan, the plan's predicted
    source rate (``None`` when nothing can be predicted) and the tuples per second crossing
    its PE links at the profiled source rate (what :mod:`spadeopt.optimize.ranking`
    breaks ties on)."""

    fused: FusedPlacement
    plan: Plan
    score: float | None
    crossing: float | None = None

    @property
    def rated(self) -> Rated:
        return Rated(self.score, self.crossing)


@dataclass(frozen=True)
class SearchContext:
    """What every plan of one ``fuse_auto`` call shares: the logical graph and profile,
    the cluster, GreedyFuse's settings but MaxFrac, the fitted ``model``, the collapse
    share ``inlined_frac`` (:func:`collapse_fraction`) and the call's physical graphs."""

    graph: AppGraph
    prof: OperatorProfile
    comm: CommModel
    nodes: int
    cores: int
    min_util: float
    capacity_frac: float
    absorb: bool
    model: PerfModel
    inlined_frac: float
    cache: PhysicalCache


def fuse_and_place(problem: FusionProblem, nodes: int, cores: int, capacity_frac: float,
                   absorb: bool) -> FusedPlacement:
    """GreedyFuse (then absorb, unless ``absorb`` is off) and placement of ``problem``."""
    result = greedy_then_absorb(problem) if absorb else greedy_fuse(problem)
    pe_ids = tuple(f"p{i}" for i in range(len(result.partitions)))
    # FATM places by itself: the developer's place() annotations are FMAN's.
    placement = place_result(result, problem, pe_ids, nodes, cores, capacity_frac)
    return FusedPlacement(problem, result, placement, pe_ids)


def place_result(result: FusionResult, problem: FusionProblem, pe_ids: tuple[str, ...], nodes: int, cores: int,
                 capacity_frac: float) -> Placement:
    """:func:`place` of ``result``'s PEs (:func:`pe_graph`); their links are not summed
    when one node holds them whatever they are (``placement.one_node_holds``)."""
    if result.comp_loads and one_node_holds(result.comp_loads, nodes, cores, capacity_frac):
        return place(tuple(zip(pe_ids, result.comp_loads, strict=True)), {}, nodes, cores, capacity_frac)
    pe_loads, pe_links = pe_graph(result.partitions, problem, pe_ids, result.comp_loads)
    return place(pe_loads, pe_links, nodes, cores, capacity_frac)


def _planning_profile(ctx: SearchContext, entry: PhysicalEntry) -> OperatorProfile:
    """The physical profile GreedyFuse plans with: collapsed operators at ``1 - ctx.inlined_frac``."""
    pprof = entry.prof
    if ctx.inlined_frac > 0:
        inlined = {b for _, b in entry.collapsible}
        pprof = replace(pprof, load={op: u * (1.0 - ctx.inlined_frac) if op in inlined else u
                                     for op, u in pprof.load.items()})
    return pprof


def quotient_and_place(problem: FusionProblem, quotient: Quotient, nodes: int, cores: int, capacity_frac: float,
                       absorb: bool) -> FusedPlacement | None:
    """:func:`fuse_and_place` with GreedyFuse run on ``problem``'s channel quotient and
    expanded onto it (:func:`spadeopt.optimize.quotient.quotient_fuse`); ``None`` when the
    expansion is not legal."""
    result = quotient_fuse(quotient, problem, absorb)
    if result is None:
        return None
    pe_ids = tuple(f"p{i}" for i in range(len(result.partitions)))
    return FusedPlacement(problem, result, place_result(result, problem, pe_ids, nodes, cores, capacity_frac), pe_ids)


def _attempt(ctx: SearchContext, entry: PhysicalEntry, pprof: OperatorProfile, max_frac: float, quotient: bool = False,
             failures: dict[float, str] | None = None) -> Callable[[float], FusedPlacement | None]:
    """The rate search's step: the plan at ``k`` times the profiled rate, ``None`` when it
    does not fit. With ``quotient``, GreedyFuse runs on the channel quotient
    (:func:`quotient_and_place`) where the vector has one. ``failures`` receives why a
    factor did not fit (``rate_hint``'s PLACEMENT, or SATURATED: MaxFrac, illegal expansion)."""
    problems = ScaledProblems(entry.graph, pprof, ctx.comm, max_frac, ctx.min_util, entry.memo,
                              base_problem(ctx, entry))
    failures = {} if failures is None else failures

    def attempt(k: float) -> FusedPlacement | None:
        problem = problems(k)
        quot = entry.quotient_of(problem) if quotient else None
        try:
            if quot is not None:
                got = quotient_and_place(problem, quot, ctx.nodes, ctx.cores, ctx.capacity_frac, ctx.absorb)
            else:
                got = fuse_and_place(problem, ctx.nodes, ctx.cores, ctx.capacity_frac, ctx.absorb)
        except PlacementInfeasible:
            failures[k] = PLACEMENT
            return None
        if got is None or got.result.warnings:
            failures[k] = SATURATED
            return None
        return got
    return attempt


def plan_physical(ctx: SearchContext, regions: Regions, max_frac: float, rate: str | float,
                  steps: int = SEARCH_STEPS, quotient: bool = False, hint: Hint | None = None) -> FusedPlacement:
    """GreedyFuse + placement of the physical graph of ``regions`` at ``rate``. Operators
    that collapse into their predecessor's loop when fused with it are costed at
    ``1 - ctx.inlined_frac`` of their profiled load (:func:`collapse_fraction`):
    GreedyFuse sees what a collapsed run costs, so it does not cut a cheap run into
    pieces. Under ``--rate max`` the bisection takes ``steps`` steps (:func:`refine`
    takes the rest), each GreedyFuse run on the channel quotient with ``quotient``
    (:func:`quotient_and_place`; only under ``--rate max``, and never resumed by :func:`refine`).
    A ``hint`` (:func:`rung_hint`) gives brackets for :func:`spadeopt.optimize.rate.hinted_rate`
    and receives why the steps that did not fit failed (``hint.failures``)."""
    entry = ctx.cache.get(regions)
    physical, pprof = entry.graph, _planning_profile(ctx, entry)
    if rate == "max":
        attempt = _attempt(ctx, entry, pprof, max_frac, quotient, None if hint is None else hint.failures)
        capacity = ctx.nodes * ctx.cores * ctx.capacity_frac
        oper = math.fsum(pprof.load.values())
        if hint is None:
            fused, search = max_rate(ctx.prof.source_rate, oper, capacity, attempt, steps)
        else:
            brackets = hint.brackets(capacity / oper if oper > 0 else math.inf)
            fused, search = hinted_rate(ctx.prof.source_rate, oper, capacity, attempt, steps, brackets)
        return replace(fused, factor=search.factor, search=search)
    if rate == "profiled":
        factor = 1.0
    elif ctx.prof.source_rate > 0:
        factor = rate / ctx.prof.source_rate
    else:
        raise OptimizeError("the profile's sources sent no tuples, so it cannot be scaled to --rate; "
                            "profile a run whose sources emit tuples")
    problem = problem_for(physical, scale(pprof, factor), ctx.comm, max_frac, ctx.min_util, entry.memo)
    fused = fuse_and_place(problem, ctx.nodes, ctx.cores, ctx.capacity_frac, ctx.absorb)
    return replace(fused, factor=factor)


def refine(ctx: SearchContext, regions: Regions, max_frac: float, fused: FusedPlacement) -> FusedPlacement:
    """``fused`` (a plan of ``regions`` at ``max_frac``) with its rate search resumed to
    :data:`SEARCH_STEPS` (:func:`spadeopt.optimize.rate.resume_rate`): the plan
    :func:`plan_physical` makes at full resolution. ``fused`` itself when its search is
    complete or there was none (a given or profiled rate)."""
    if fused.search is None or fused.search.complete:
        return fused
    entry = ctx.cache.get(regions)
    pprof = _planning_profile(ctx, entry)
    got, search = resume_rate(ctx.prof.source_rate, replace(fused, factor=1.0, search=None), fused.search,
                              _attempt(ctx, entry, pprof, max_frac))
    return replace(got, factor=search.factor, search=search)


def trial_plan(graph: AppGraph, fused: FusedPlacement, nodes: int, cores: int, regions: Regions) -> Plan:
    """The plan of one :class:`FusedPlacement`, named as every strategy's plans are."""
    return make_plan(graph, "auto", [list(p) for p in fused.result.partitions],
                     [fused.placement[t] for t in fused.pe_ids], nodes, cores, regions=regions)


def score_plan(ctx: SearchContext, regions: Regions, max_frac: float, rate: str | float,
               steps: int = SEARCH_STEPS, quotient: bool = False, hint: Hint | None = None) -> Scored:
    """:func:`plan_physical`, its trial plan and the plan's predicted rate."""
    fused = plan_physical(ctx, regions, max_frac, rate, steps, quotient, hint)
    plan = trial_plan(ctx.graph, fused, ctx.nodes, ctx.cores, regions)
    pe_of = plan.pe_of
    crossing = crossing_rate(((a, b, r) for a, b, r, _ in ctx.cache.get(regions).prof.links), pe_of)
    return Scored(fused, plan, predicted_rate(ctx, plan), crossing)


def vector_bound(ctx: SearchContext, regions: Regions) -> float:
    """:func:`spadeopt.optimize.rate_bound.rate_bound` of the physical problem of
    ``regions`` (as given: :meth:`WidthScorer.bound` applies the key exchanges first):
    no plan of it predicts a higher source rate."""
    entry = ctx.cache.get(regions)
    batches = prediction_inputs(entry, ctx.comm, ctx.model)
    return rate_bound(entry.predict_problem, ctx.nodes, ctx.cores, ctx.prof.source_rate, ctx.model,
                      unattributed_call_s(ctx.prof, ctx.model), frozenset(b for _, b in entry.collapsible),
                      ctx.inlined_frac, batches)


def predicted_rate(ctx: SearchContext, plan: Plan) -> float | None:
    """:func:`predict_physical`'s rate under the context's model; ``None`` when nothing
    can be predicted."""
    try:
        return predict_physical(ctx.graph, ctx.prof, plan, ctx.comm, ctx.model, ctx.inlined_frac, ctx.cache).rate
    except OptimizeError:
        return None


class WidthScorer:
    """:func:`width_scorer`'s callable. Each width vector is fused again at every rung of
    :func:`max_frac_candidates` (the user's MaxFrac and the larger ones of
    :data:`MAX_FRAC_LADDER`) and scored by its best rung (:func:`best_rung`): a channel
    that needs a whole core runs as one PE at MaxFrac 1 where the user's MaxFrac would
    cut it into a pipeline whose links cost more than they relieve, so which width wins
    depends on how each width is fused (on 16 cores a 16-call chain at width 8 with two PEs
    per channel was chosen over width 16 with one). ``plans`` maps each scored vector to
    its best rung's :class:`Scored`; ``rungs`` maps ``(vector, MaxFrac)`` to every rung's."""

    def __init__(self, ctx: SearchContext, max_frac: float, quotient: bool = True) -> None:
        self.ctx, self.max_frac, self.quotient = ctx, max_frac, quotient
        self.plans: dict[Regions, Scored] = {}
        self.rungs: dict[tuple[Regions, Any], Any] = {}  # (vector, MaxFrac) -> Scored; (vector, SYMMETRIC) -> list
        self.best_frac: dict[Regions, float] = {}
        self.full: dict[Regions, Rated] = {}  # vectors scored as the final plan is made (confirm)
        self.quick: dict[Regions, Rated] = {}  # vectors rated on their channel quotient
        self.by_quotient: set[Regions] = set()  # vectors rated with quotient rungs, not yet confirmed
        self.near: dict[tuple[bool, float], RateSearch | None] = {}  # (quotient, MaxFrac) -> last search (rate_hint)

    def bound(self, regions: Regions, floor: float = 0.0) -> float:
        """An upper bound on :meth:`rated`'s rate for ``regions``, without fusing it: the
        cores' bound (:func:`spadeopt.optimize.rate_bound.capacity_bound`) when it is below
        ``floor`` or above ``BOUND_GATE x floor``, else the least of it and
        :func:`vector_bound` of the vector :meth:`rated` plans (which builds the vector's
        prediction problem: worth it only where it may fall below ``floor``). It bounds
        every plan whose PEs hold at most one channel per region: quotient rungs too."""
        ctx = self.ctx
        regions = choose_exchanges(ctx.graph, regions)
        try:
            cheap = capacity_bound(ctx.cache.get(regions).prof.load, ctx.nodes, ctx.cores, ctx.prof.source_rate,
                                   ctx.model, ctx.inlined_frac)
            if cheap < floor or cheap > BOUND_GATE * floor:
                return cheap
            return min(cheap, vector_bound(ctx, regions))
        except OptimizeError:  # e.g. a communication model that fails: no bound, the vector is fused
            return math.inf

    def __call__(self, regions: Regions) -> float | None:
        """The vector's predicted rate (``None`` when nothing fits)."""
        return self.rated(regions).rate

    def rated(self, regions: Regions) -> Rated:
        """The vector's predicted rate and crossing tuples at its best rung, as
        :mod:`spadeopt.optimize.ranking` ranks it. Two adjacent regions both wider than 1
        are planned with a key exchange between them when it is legal
        (``plan.regions.choose_exchanges``), as the final plan runs them. A vector with a
        region wider than 1 and at least :data:`QUOTIENT_MIN_OPERATORS` physical operators
        is fused on its channel quotient (``quotient`` on): :meth:`confirm` scores it in full."""
        regions = choose_exchanges(self.ctx.graph, regions)
        got = self.full.get(regions)
        got = self.quick.get(regions) if got is None else got
        if got is not None:  # rated before (a later round of the width search): the same answer
            return got
        if self.quotient and self._quotient_applies(regions):
            self.by_quotient.add(regions)
            got = self.quick[regions] = self._rated(regions, True)
            return got
        got = self.full[regions] = self._rated(regions, False)
        return got

    def confirm(self, regions: Regions) -> Rated:
        """The vector's rating as the final plan is made (GreedyFuse on the full physical
        problem at every rung, and the channel-symmetric plans): :meth:`rated`'s unless it
        was rated on the channel quotient. ``plans`` then holds the full rating's plan."""
        regions = choose_exchanges(self.ctx.graph, regions)
        got = self.full.get(regions)
        if got is None:
            got = self.full[regions] = self._rated(regions, False)
            self.by_quotient.discard(regions)
        return got

    def _quotient_applies(self, regions: Regions) -> bool:
        """Whether :meth:`rated` fuses ``regions`` on its channel quotient: a region wider
        than the quotient keeps (``quotient.KEEP`` channels), and a physical graph of
        :data:`QUOTIENT_MIN_OPERATORS` to :data:`GREEDY_MAX_OPERATORS` operators."""
        if all(r.width <= KEEP for r in regions):
            return False
        n = len(self.ctx.cache.get(regions).graph.operators)
        return QUOTIENT_MIN_OPERATORS <= n <= GREEDY_MAX_OPERATORS

    def _rated(self, regions: Regions, quotient: bool) -> Rated:
        """:meth:`rated`'s body: every rung fused in full, or on the channel quotient
        (kept under ``(vector, (QUOTIENT, MaxFrac))``: the MaxFrac ladder never reuses
        them), and the channel-symmetric plans."""
        rungs: list[tuple[Scored, float]] = []
        greedy = (all(r.width == 1 for r in regions)
                  or len(self.ctx.cache.get(regions).graph.operators) <= GREEDY_MAX_OPERATORS)
        prev: tuple[RateSearch | None, dict[float, str], float] = (None, {}, self.max_frac)
        for mf in max_frac_candidates(self.max_frac, "max") if greedy else ():
            hint = rung_hint(*prev, mf, self.near.get((quotient, mf))) if HINTS[quotient] else None
            try:
                scored = score_plan(self.ctx, regions, mf, "max", SCORE_STEPS, quotient, hint)
            except OptimizeError:
                continue
            if hint is not None:
                prev = (scored.fused.search, hint.failures, mf)
                self.near[(quotient, mf)] = scored.fused.search
            self.rungs[(regions, (QUOTIENT, mf) if quotient else mf)] = scored
            rungs.append((scored, mf))
        built = self.rungs.get((regions, SYMMETRIC))
        if built is None:
            built = self.rungs[(regions, SYMMETRIC)] = symmetric_scored(self.ctx, regions)
        rungs += [(scored, 1.0) for scored, _ in built]
        if not rungs:
            return Rated(None)
        best, mf = best_rung(rungs)
        self.plans[regions], self.best_frac[regions] = best, mf
        return best.rated


HINTS = {True: True, False: True}  # quotient / full ratings' searches take hints (optimize.rate_hint); off: plain

QUOTIENT = "quotient"  # WidthScorer.rungs key: (vector, (QUOTIENT, MaxFrac)) for a rung fused on the quotient

QUOTIENT_MIN_OPERATORS = 256
"""A width vector whose physical graph has at least this many operators (and a region
wider than ``quotient.KEEP``) is rated with its rungs' GreedyFuse runs on the channel
quotient (:mod:`spadeopt.optimize.quotient`); the width search confirms in full the
vectors that can still be chosen (``widths.choose_widths``' ``confirm``). Below it a
full rating costs little (GreedyFuse on a few hundred operators), and small apps are
rated exactly as before."""


GREEDY_MAX_OPERATORS = 1200
"""A width vector whose physical graph has more operators than this is scored by its
channel-symmetric plans only (:func:`symmetric_scored`), not by a GreedyFuse rate search
per MaxFrac rung: by symmetry GreedyFuse fuses every channel alike, and its rate search
on thousands of operators was most of a many-core search (a 200-operator app on 64 cores
took minutes). The chosen vector is still fused by GreedyFuse over the ladder too
(:func:`best_over_max_frac`)."""

BOUND_GATE = 2.0
""":meth:`WidthScorer.bound` builds a vector's full bound only when the cores' bound is
within this factor of what it must fall below: the full bound was never under half the
cores' bound where it pruned (at 64 cores the chain's cores' bound is 2.1 x the
incumbent, its full bounds 1.2-1.3 x: nothing to prune, and building them cost 10 %).
A cost rule only: any bound it returns is valid."""

SYMMETRIC = "symmetric"  # the key of a vector's channel-symmetric plans in WidthScorer.rungs


def symmetric_scored(ctx: SearchContext, regions: Regions) -> list[tuple[Scored, int]]:
    """The vector's channel-symmetric plans (:mod:`spadeopt.optimize.symmetric`), each
    scored by the prediction, with its segments per channel."""
    entry = ctx.cache.get(regions)
    pprof = _planning_profile(ctx, entry)
    problems = ScaledProblems(entry.graph, pprof, ctx.comm, 1.0, 1.0, entry.memo, base_problem(ctx, entry))
    out = []
    try:
        members = list(family(entry, pprof, ctx.prof.load, ctx.comm, ctx.nodes, ctx.cores, ctx.capacity_frac,
                              regions, problems))
    except SpadeoptError:
        return []
    initial: dict[int, float] = {}  # the objective of one operator per PE, once per problem (members share one)
    for p, groups, problem, k, ids, where, loads in members:
        if id(problem) not in initial:
            initial[id(problem)] = objective([[op] for op in problem.operators], problem)
        fused = FusedPlacement(problem, as_result(groups, problem, loads, initial[id(problem)]), where, ids, factor=k)
        try:
            plan = trial_plan(ctx.graph, fused, ctx.nodes, ctx.cores, regions)
        except SpadeoptError:
            continue
        crossing = crossing_rate(((a, b, r) for a, b, r, _ in entry.prof.links), plan.pe_of)
        out.append((Scored(fused, plan, predicted_rate(ctx, plan), crossing), p))
    return out


def best_rung(rungs: list[tuple[Scored, float]]) -> tuple[Scored, float]:
    """The rung (a plan and its MaxFrac, in ladder order) that ranks best: a later rung
    leads only when it beats the best so far by more than ``TIE`` (or the best has no
    score); then :func:`spadeopt.optimize.ranking.tie_break` among them all."""
    best, best_frac = rungs[0]
    for scored, mf in rungs[1:]:
        score = scored.score
        if score is not None and (best.score is None or score > best.score * (1 + TIE)):
            best, best_frac = scored, mf
    return tie_break((best, best_frac), rungs, lambda rung: rung[0].rated)


def width_scorer(graph: AppGraph, prof: OperatorProfile, comm: CommModel, nodes: int, cores: int,
                 max_frac: float, min_util: float, capacity_frac: float, absorb: bool,
                 model: PerfModel, cache: PhysicalCache | None = None) -> WidthScorer:
    """The score of a width vector (regions with their widths): the predicted source rate
    of the plan FATM makes for it at ``--rate max``, or ``None`` when nothing fits. The
    scorer keeps each vector's plan (``plans``): the MaxFrac ladder starts with the
    chosen vector at the user's MaxFrac, which is the plan the search already made.
    (No plan puts two channels of one region in one PE: the physical graph's
    ``annotations.channels`` reach GreedyFuse as a legality rule, see
    :mod:`spadeopt.optimize.legality`.)"""
    model = fit_production(graph, prof, model)
    ctx = SearchContext(graph, prof, comm, nodes, cores, min_util, capacity_frac, absorb, model,
                        collapse_fraction(graph, prof, model), cache or PhysicalCache(graph, prof, comm, model))
    return WidthScorer(ctx, max_frac)


def max_frac_candidates(max_frac: float, rate: str | float) -> tuple[float, ...]:
    """The user's MaxFrac, and under ``--rate max`` the larger ones of :data:`MAX_FRAC_LADDER`
    and the smaller ones of :data:`MAX_FRAC_BELOW` (in that order: earlier rungs win ties)."""
    if rate != "max":
        return (max_frac,)
    return (max_frac, *(m for m in MAX_FRAC_LADDER if m > max_frac), *(m for m in MAX_FRAC_BELOW if m < max_frac))


@dataclass(frozen=True)
class LadderChoice:
    """The MaxFrac ladder's pick: its plan and MaxFrac, and every rung for ``explain.json``
    (``{"max_frac", "pes", "predicted"}``)."""

    scored: Scored
    max_frac: float
    tried: list[dict[str, Any]]


def best_over_max_frac(ctx: SearchContext, regions: Regions, max_frac: float, rate: str | float,
                       searched: dict[tuple[Regions, Any], Any]) -> LadderChoice:
    """The best predicted plan of ``regions`` over :func:`max_frac_candidates`; a rung the
    width search already planned (``searched``, keyed by vector and MaxFrac) is reused
    under ``--rate max``. A later rung leads only when its score beats the best by more
    than ``TIE``, or the best has none; then :func:`spadeopt.optimize.ranking.tie_break`
    picks among the rungs (:func:`best_rung`). Errors of :func:`plan_physical` propagate."""
    tried: list[dict[str, Any]] = []
    rungs: list[tuple[Scored, float]] = []
    for mf in max_frac_candidates(max_frac, rate):
        scored = searched.get((regions, mf)) if rate == "max" else None
        if scored is None:
            scored = score_plan(ctx, regions, mf, rate, SCORE_STEPS)
        tried.append({"max_frac": mf, "pes": len(scored.plan.pes), "predicted": scored.score})
        rungs.append((scored, mf))
    if rate == "max":  # the channel-symmetric plans, as the width search ranked them
        built = searched.get((regions, SYMMETRIC))
        for scored, p in built if built is not None else symmetric_scored(ctx, regions):
            tried.append({"max_frac": 1.0, "symmetric_segments": p, "pes": len(scored.plan.pes),
                          "predicted": scored.score})
            rungs.append((scored, 1.0))
    best, best_frac = best_rung(rungs)
    return LadderChoice(best, best_frac, tried)
