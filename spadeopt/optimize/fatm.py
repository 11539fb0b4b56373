"""FATM: the automatic strategy. Profile + comm-cost model -> fission -> GreedyFuse -> placement -> Plan.

This is the only place where the optimizer's pure algorithms meet the app graph. The
driver, :func:`fuse_auto`::

    check the profile; fit the model to the app   (fatm_fit: oper_scale, collapse share)
    widths of the free parallel regions           (widths.choose_widths, scored by
                                                   fatm_search.width_scorer)
    plan the chosen widths over the MaxFrac ladder (fatm_search.best_over_max_frac)
    optionally the exact optimum of that problem  (exact.exact_fuse, for the gap)
    name the PEs through make_plan, as every strategy does; explain and predict it

The pieces live by concern: :mod:`spadeopt.optimize.fatm_problem` (the profile record,
the graph's annotations as legality constraints, the fusion problem),
:mod:`spadeopt.optimize.fatm_fit` (constants fitted on the profile and the production
probe) and :mod:`spadeopt.optimize.fatm_search` (the plan of one width vector, the
width scores, the MaxFrac ladder). Their public names are re-exported here, which is
where the rest of spadeopt imports them from.

Invariants: the plan depends only on the graph, the profile, ``comm``, the model and
the settings (no clock, no randomness); the caches of one call change no bit of it
(``tests/optimize/test_fatm_caches.py``); the driver runs with the cyclic garbage
collector paused and restored (:func:`gc_paused`).

Cost (issue 12's optimizer speed). Under ``--rate max`` every width vector costs one
short rate search (12 GreedyFuse + placement runs, ``rate.SCORE_STEPS``), the MaxFrac
ladder one more per larger MaxFrac, and the chosen plan 6 more (its search resumed to
full resolution, :func:`spadeopt.optimize.fatm_search.refine`). Work that does not
depend on the rate is done once: a rate search builds its first problem with
:func:`problem_for` and rescales it for the other rates (:class:`ScaledProblems`); one
:class:`PhysicalCache` per call keeps each vector's physical graph, profile and
prediction problem; the ladder reuses the width search's plan for the chosen widths at
the user's MaxFrac. A vector with a region wider than 2 and 256-1,200 physical
operators runs its rate searches' GreedyFuse on its channel quotient
(:mod:`spadeopt.optimize.quotient`), and the width search confirms the vectors it may
choose with the full rating (``widths.choose_widths``' ``confirm``). A width rating's
rate searches take hints (:mod:`spadeopt.optimize.rate_hint`): only the steps near where
the previous rung or the vector rated before stopped fitting run GreedyFuse (the same
answers while feasibility is monotone in the rate; 2-4 runs a rung instead of 12 when
the hint is right).

>>> from spadeopt.frontend.dsl import App
>>> from spadeopt.optimize.problem import LinearCommModel
>>> app = App("pipeline")
>>> parsed = app.functor("parse", app.source("read", "x:int", generator=range, args={"stop": 3}))
>>> app.sink("write", app.functor("score", parsed), mode="count")
>>> graph = app.build()
>>> load = {"read": 0.1, "parse": 0.2, "score": 0.2, "write": 0.05}  # cores at 1000 tuples/s
>>> links = tuple((s.src.op, s.dst.op, 1000.0, 20.0) for s in graph.streams)
>>> auto = fuse_auto(graph, OperatorProfile(graph.name, graph.fingerprint, load, links, 1000.0),
...                  LinearCommModel(1e-4), nodes=1, cores=2, rate="profiled", fission=False)
>>> [list(pe.operators) for pe in auto.plan.pes]  # MaxFrac 0.5 of a core: two PEs
[['read', 'parse'], ['score', 'write']]
"""

from __future__ import annotations

import gc
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from spadeopt.errors import OptimizeError, UsageError
from spadeopt.model.graph import AppGraph
from spadeopt.optimize.batching import batch_doc, plan_batch
from spadeopt.optimize.cost import metrics, objective
from spadeopt.optimize.exact import exact_fuse, gap
from spadeopt.optimize.fatm_fit import (
    OPER_SCALE_FIT,
    collapse_fraction,
    collapse_loads,
    fit_production,
    unattributed_call_s,
)
from spadeopt.optimize.fatm_problem import (
    OperatorProfile,
    check_profile,
    collapsed_links,
    problem_for,
    unfusable_pairs,
)
from spadeopt.optimize.fatm_search import (
    MAX_FRAC_LADDER,
    FusedPlacement,
    PhysicalCache,
    Regions,
    ScaledProblems,
    SearchContext,
    best_over_max_frac,
    max_frac_candidates,
    predict_physical,
    predicted_rate,
    refine,
    trial_plan,
    width_scorer,
)
from spadeopt.optimize.greedy_fuse import why_not_merged
from spadeopt.optimize.predict import DEFAULT_MODEL, PerfModel, Prediction
from spadeopt.optimize.problem import CommModel, FusionProblem
from spadeopt.optimize.ranking import TIE, tie_break
from spadeopt.optimize.rate import parse_rate
from spadeopt.optimize.result import FusionResult
from spadeopt.optimize.widths import choose_widths, free_regions, region_caps
from spadeopt.plan.discover import Discovery, discover_regions
from spadeopt.plan.plan import Plan, make_plan
from spadeopt.plan.regions import (
    MAX_REGION_WIDTH,
    choose_exchanges,
    exchanges_json,
    resolve_regions,
)
from spadeopt.plan.static_runs import collapsible_links

__all__ = [
    "MAX_FRAC_LADDER",
    "OPER_SCALE_FIT",
    "AutoPlan",
    "OperatorProfile",
    "PhysicalCache",
    "ScaledProblems",
    "check_profile",
    "collapse_fraction",
    "collapse_loads",
    "collapsed_links",
    "candidate_regions",
    "collapsible_links",
    "fit_production",
    "fuse_auto",
    "gc_paused",
    "max_frac_candidates",
    "predict_plan",
    "problem_for",
    "unattributed_call_s",
    "unfusable_pairs",
    "width_scorer",
]


@dataclass(frozen=True)
class AutoPlan:
    plan: Plan
    result: FusionResult
    explain: dict[str, Any]


def fuse_auto(graph: AppGraph, prof: OperatorProfile, comm: CommModel, nodes: int, cores: int,
              max_frac: float = 0.5, min_util: float = 0.95, exact: bool = False,
              capacity_frac: float = 1.0, rate: str | float = "profiled", absorb: bool = True,
              widths: Mapping[str, int] | None = None, fission: bool = True,
              model: PerfModel | None = None, discover: bool = True, acyclic: bool = False) -> AutoPlan:
    """Fission x GreedyFuse x placement at the planning ``rate`` (see :mod:`spadeopt.optimize.rate`).

    The regions are the declared ones and, with ``discover`` (default), those discovered
    from the graph alone among the other operators (:func:`candidate_regions`,
    :mod:`spadeopt.plan.discover`). Every region not pinned by ``widths`` (``--width``)
    gets the width that gives the highest planned rate (``--rate max`` search on the
    physical graph; :mod:`spadeopt.optimize.widths`); ``fission=False`` keeps them all at
    width 1 (the candidates are still found and recorded in ``explain``). Then the
    physical graph of the chosen widths is fused and placed at ``rate``. Width vectors are
    scored, and the plan's throughput predicted, by :func:`predict_plan` under ``model``
    (:mod:`spadeopt.optimize.predict`; default constants when ``None``). Runs with the
    cyclic garbage collector paused (:func:`gc_paused`). ``acyclic``: the build takes
    aligned checkpoints, so every plan considered has an acyclic PE graph
    (``FusionProblem.acyclic``, record 074).
    """
    with gc_paused():
        return _fuse_auto(graph, prof, comm, nodes, cores, max_frac, min_util, exact, capacity_frac, rate, absorb,
                          widths, fission, model, discover, acyclic)


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector paused, if it runs, and restored on exit (exceptions
    included). A search allocates about a million short-lived objects, nearly all freed by
    reference counting (a 200-operator call leaves under 100 in cycles), yet the allocations
    trigger collections, and each of the oldest generation walks every live object
    (the search's own graphs and plans included): about 10 % of a call. It changes no
    result."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def _fuse_auto(graph: AppGraph, prof: OperatorProfile, comm: CommModel, nodes: int, cores: int, max_frac: float,
               min_util: float, exact: bool, capacity_frac: float, rate: str | float, absorb: bool,
               widths: Mapping[str, int] | None, fission: bool, model: PerfModel | None,
               discover: bool, acyclic: bool = False) -> AutoPlan:
    """:func:`fuse_auto`'s body."""
    rate = parse_rate(rate)
    check_profile(graph, prof)  # before searching
    batch = plan_batch(prof)  # every candidate is predicted with the batch the plan will run with
    model = replace(fit_production(graph, prof, model or DEFAULT_MODEL), run_batch=float(batch))
    if nodes < 1 or cores < 1:
        raise OptimizeError(f"nodes and cores must be >= 1 (got {nodes}, {cores})")
    regions, free, discovery = candidate_regions(graph, widths, fission, discover)
    fission_doc: dict[str, Any] = {"enabled": fission, "pinned": dict(sorted((widths or {}).items())),
                                   "search": None, "discovered": discovery.to_json() if discovery else None}
    frac = collapse_fraction(graph, prof, model)
    cache = PhysicalCache(graph, prof, comm, model, acyclic)
    searched: dict[tuple[Regions, Any], Any] = {}
    found = {r.name for r in discovery.regions} if discovery else set()
    if found & set(free):
        free, fission_doc["not_searched"] = _worth_searching(regions, free, found, prof)
    unsearched = regions
    if free:
        evaluate = width_scorer(graph, prof, comm, nodes, cores, max_frac, min_util, capacity_frac, absorb, model,
                                cache)
        if found & set(free):  # heaviest first: the ascent widens what matters most first
            weight = {r.name: math.fsum(prof.load.get(o, 0.0) for o in r.operators) for r in regions}
            free = tuple(sorted(free, key=lambda n: (-weight[n], n)))
        regions, free = _search_widths(graph, prof, regions, free, nodes * cores, evaluate, fission_doc)
        searched = evaluate.rungs
    ctx = SearchContext(graph, prof, comm, nodes, cores, min_util, capacity_frac, absorb, model, frac, cache)
    choice = best_over_max_frac(ctx, regions, max_frac, rate, searched)
    if regions != unsearched:
        # the widths were scored at the user's MaxFrac only: the ladder of the unwidened
        # vector may still plan faster, and then fission does not pay (declared regions
        # as much as discovered ones: keyed_window's width-2 region predicted 0.83 of its
        # unwidened 3-PE pipeline, chain's width 2 within TIE of a 2-PE pipeline)
        narrow = best_over_max_frac(ctx, unsearched, max_frac, rate, searched)
        s_wide, s_narrow = choice.scored.score, narrow.scored.score
        leader = narrow if s_narrow is not None and (s_wide is None or s_wide <= s_narrow * (1 + TIE)) else choice
        if tie_break(leader, (narrow, choice), lambda c: c.scored.rated) is narrow:
            choice, regions = narrow, unsearched
            fission_doc["kept_unwidened"] = {"widened": s_wide, "unwidened": s_narrow}
    fused, max_frac = _resumed(ctx, regions, choice, fission_doc), choice.max_frac
    exact_doc = _exact_doc(fused) if exact else None
    groups = [list(p) for p in fused.result.partitions]
    plan = replace(make_plan(graph, "auto", groups, [fused.placement[p] for p in fused.pe_ids], nodes, cores,
                             regions=regions), batch=batch)
    explain = _explain(plan, fused, exact_doc, max_frac, min_util)
    search = fused.search
    explain["rate"] = {"mode": rate if isinstance(rate, str) else "given", "profiled": prof.source_rate,
                       "planned": prof.source_rate * fused.factor, "factor": fused.factor,
                       "capacity_cores": nodes * cores * capacity_frac,
                       "search_tries": search.tries if search else 0,
                       "at_upper_bound": search.at_upper_bound if search else False}
    try:
        predicted = predict_physical(graph, prof, plan, comm, model, frac, cache)
    except OptimizeError as exc:  # e.g. a profile whose sources sent nothing: no rate to predict
        explain["rate"]["predicted"] = None
        explain["prediction"] = {"error": str(exc), "model": model.to_json()}
    else:
        explain["rate"]["predicted"] = predicted.rate
        explain["prediction"] = predicted.to_json()
    explain["collapse"] = {"inlined_frac": frac, "production_fall_rate": prof.production_fall_rate,
                           "fitted": frac > 0}
    explain["max_frac_search"] = choice.tried
    explain["absorb_leftovers"] = absorb
    if acyclic:
        explain["acyclic"] = True  # planned for checkpoints: no cycle of PEs
    explain["batch"] = batch_doc(prof)
    fission_doc["widths"] = {r.name: r.width for r in regions}
    fission_doc["exchanges"] = exchanges_json(graph, regions)
    explain["fission"] = fission_doc
    return AutoPlan(plan, fused.result, explain)


def _resumed(ctx: SearchContext, regions: Regions, choice, fission_doc: dict[str, Any]) -> FusedPlacement:
    """The chosen candidate with its rate search resumed to full resolution (candidates
    were scored with ``fatm_search.SCORE_STEPS``), so its plan is the full search's;
    unless the prediction ranks that plan below the one the candidate was scored by: the
    bisection maximises the rate GreedyFuse can plan for, and at a higher planned rate
    GreedyFuse may cut the graph into a plan the prediction rates lower (keyed_window on
    2 cores: 3 PEs predicted 137 k/s became 5 PEs predicted 125 k/s). FATM returns the
    best plan under its own model, so then it keeps the scored one (noted in explain's
    ``fission.kept_scored``)."""
    scored = choice.scored
    fused = refine(ctx, regions, choice.max_frac, scored.fused)
    if fused is scored.fused or scored.score is None:
        return fused
    got = predicted_rate(ctx, trial_plan(ctx.graph, fused, ctx.nodes, ctx.cores, regions))
    if got is not None and got >= scored.score:
        return fused
    fission_doc["kept_scored"] = {"scored": scored.score, "resumed": got}
    return scored.fused


def candidate_regions(graph: AppGraph, widths: Mapping[str, int] | None, fission: bool,
                      discover: bool = True) -> tuple[Regions, tuple[str, ...], Discovery | None]:
    """The regions FATM plans (the declared ones, then the discovered ones), the names of
    those whose width it chooses, and the discovery (``None`` when ``discover`` is off).

    A declared region (``App.parallel``) pins its operators: discovery forms regions only
    from the others (:func:`spadeopt.plan.discover.discover_regions`). ``widths``
    (``--width``) pins any region's width, declared or discovered; every other region is
    free unless ``fission`` is off (then all stay at width 1)."""
    widths = dict(widths or {})
    names = {n for n, _, _ in graph.annotations.parallel}
    declared = resolve_regions(graph, {n: w for n, w in widths.items() if n in names})
    discovery = None
    found: Regions = ()
    if discover:
        discovery = discover_regions(graph, exclude=[o for r in declared for o in r.operators], taken=names)
        found = discovery.regions
    unknown = sorted(set(widths) - names - {r.name for r in found})
    if unknown:
        have = ", ".join([*sorted(names), *(r.name for r in found)]) or "none"
        raise UsageError(f"--width names unknown region(s) {', '.join(unknown)}; app '{graph.name}' has "
                         f"(declared, then discovered): {have}")
    for r in found:
        w = widths.get(r.name, 1)
        if isinstance(w, bool) or not isinstance(w, int) or not 1 <= w <= MAX_REGION_WIDTH:
            raise UsageError(f"region '{r.name}': width must be an integer from 1 to {MAX_REGION_WIDTH}, got {w!r}")
    regions = choose_exchanges(graph, (*declared, *(replace(r, width=widths.get(r.name, 1)) for r in found)))
    free = () if not fission else (*free_regions(graph, widths, fission),
                                   *(r.name for r in found if r.name not in widths))
    return regions, free, discovery


def _search_widths(graph: AppGraph, prof: OperatorProfile, regions: Regions, free: tuple[str, ...], max_width: int,
                   evaluate, fission_doc: dict[str, Any]) -> tuple[Regions, tuple[str, ...]]:
    """The widths of the ``free`` regions (``widths.choose_widths``), then again with every
    region left out as too light (``_worth_searching``) whose operators sit in a PE the
    chosen plan saturates: widening the others made it the bottleneck (at most
    ``BOTTLENECK_ROUNDS`` times). Records the search and the regions added in ``fission_doc``."""
    skipped = dict(fission_doc.get("not_searched") or {})
    added: list[str] = []
    for _ in range(BOTTLENECK_ROUNDS + 1):
        chosen, fission_doc["search"] = choose_widths(regions, free, max_width, evaluate.rated,
                                                      caps=region_caps(graph, regions, free),
                                                      bound=evaluate.bound if BOUND_WIDTHS else None,
                                                      confirm=evaluate.confirm)
        chosen = choose_exchanges(graph, chosen)  # as the scorer planned them (fatm_search.WidthScorer)
        hot = _bottleneck_regions(evaluate, chosen, skipped) if skipped and len(added) < MAX_SEARCHED else []
        if not hot:
            break
        added += hot
        free = (*free, *hot)
        for n in hot:
            del skipped[n]
        regions = chosen
    if added:
        fission_doc["not_searched"] = skipped
        fission_doc["searched_as_bottleneck"] = added
    return chosen, free


BOTTLENECK_ROUNDS = 3
BOUND_WIDTHS = True
"""Branch and bound in the width search (``choose_widths``' ``bound``: a vector whose
:func:`spadeopt.optimize.rate_bound.rate_bound` cannot win is not fused). It changes no
decision of the search; off, every vector compared is fused
(``tests/optimize/test_width_bound.py`` plans both ways)."""


def _bottleneck_regions(evaluate, chosen: Regions, skipped: Mapping[str, float]) -> list[str]:
    """The unsearched regions with an operator in a PE that the chosen plan loads to within
    1 % of its busiest PE's load (the prediction's PE loads at its rate)."""
    scored = evaluate.plans.get(chosen)
    if scored is None or scored.score is None:
        return []
    ctx = evaluate.ctx
    try:
        pred = predict_physical(ctx.graph, ctx.prof, scored.plan, ctx.comm, ctx.model, ctx.inlined_frac, ctx.cache)
    except OptimizeError:
        return []
    top = max(pred.pe_load.values(), default=0.0)
    hot_ops = {op for pe in scored.plan.pes if pred.pe_load.get(pe.pe_id, 0.0) >= 0.99 * top for op in pe.operators}
    by_name = {r.name: r for r in chosen}
    return sorted(n for n in skipped if n in by_name and hot_ops & set(by_name[n].operators))


MIN_REGION_SHARE = 0.05  # a discovered region lighter than this share of the app's load stays at width 1
MAX_SEARCHED = 8  # discovered regions whose widths are searched (the heaviest)


def _worth_searching(regions: Regions, free: tuple[str, ...], found: set[str],
                     prof: OperatorProfile) -> tuple[tuple[str, ...], dict[str, float]]:
    """The free regions whose widths FATM searches, and the discovered ones it leaves at
    width 1 with their share of the profiled load: paper 000's cost threshold (a region
    forms only when ComputeCost > alpha). A discovered region below ``MIN_REGION_SHARE`` of
    the load, or beyond the ``MAX_SEARCHED`` heaviest, cannot buy much by replication and
    would cost a rate search per width tried (bargain's 204 operators make 88 small ones)."""
    total = math.fsum(prof.load.values()) or 1.0
    share = {r.name: math.fsum(prof.load.get(o, 0.0) for o in r.operators) / total for r in regions}
    heavy = sorted((n for n in free if n in found and share[n] >= MIN_REGION_SHARE), key=lambda n: (-share[n], n))
    keep = set(heavy[:MAX_SEARCHED])
    out = tuple(n for n in free if n not in found or n in keep)
    return out, {n: share[n] for n in sorted(free) if n in found and n not in keep}


def _exact_doc(fused: FusedPlacement) -> dict[str, Any]:
    """The exact optimum of the chosen plan's problem against GreedyFuse's, for explain."""
    problem, result = fused.problem, fused.result
    try:
        best = exact_fuse(problem)
    except UsageError as exc:  # too many units; fission may have widened a small app past the limit
        return {"skipped": f"no exact optimum for the {len(problem.operators)}-operator physical graph: "
                           f"{str(exc).split(';')[0]}"}
    doc = {"objective": best.objective, "greedy_objective": result.objective,
           "gap": gap(result, best), "partitions": [list(p) for p in best.partitions]}
    if problem.acyclic:  # its blocks are legal one by one; a cycle of PEs is a property of the whole plan
        doc["ignores"] = "the acyclic rule (checkpoints): the optimum may have a cycle of PEs"
    return doc


def _explain(plan: Plan, fused: FusedPlacement, exact_doc: dict[str, Any] | None, max_frac: float,
             min_util: float) -> dict[str, Any]:
    problem, result, placement = fused.problem, fused.result, fused.placement
    pe_of_part = {frozenset(pe.operators): pe for pe in plan.pes}
    pes = []
    for pe in plan.pes:
        m = metrics(frozenset(pe.operators), problem)
        pes.append({"pe": pe.pe_id, "node": pe.node, "operators": list(pe.operators),
                    "oper_load": m.oper_load, "comm_load": m.comm_load, "comp_load": m.comp_load,
                    "effective_util": m.effective_util, "rate": m.rate, "size": m.size,
                    "saturated": m.saturated, "underutilized": m.underutilized})
    refusals = []
    for (a, b), why in sorted(why_not_merged(result, problem).items()):
        refusals.append({"pes": [pe_of_part[frozenset(a)].pe_id, pe_of_part[frozenset(b)].pe_id], "why": why})
    return {
        "schema_version": 1, "max_frac": max_frac, "min_util": min_util,
        "objective": objective([frozenset(p.operators) for p in plan.pes], problem),
        "objective_none": result.objective_initial,
        "merges": len(result.steps), "warnings": list(result.warnings),
        "pes": pes, "not_merged": refusals,
        "node_load": list(placement.node_load), "inter_node_rate": placement.inter_node_rate,
        "exact": exact_doc, "pe_links": _pe_links(plan, problem),
    }


def _pe_links(plan: Plan, problem: FusionProblem) -> list[dict[str, Any]]:
    """Planned tuple rate of every directed PE -> PE connection (for explain's picture)."""
    owner = plan.pe_of
    acc: dict[tuple[str, str], float] = {}
    for lk in problem.links:
        if lk.src is None or lk.dst is None or owner[lk.src] == owner[lk.dst]:
            continue
        key = (owner[lk.src], owner[lk.dst])
        acc[key] = acc.get(key, 0.0) + lk.rate
    return [{"src": a, "dst": b, "rate": r} for (a, b), r in sorted(acc.items())]


def predict_plan(graph: AppGraph, prof: OperatorProfile, plan: Plan, comm: CommModel,
                 model: PerfModel) -> Prediction:
    """The predicted source rate of any strategy's ``plan`` of ``graph`` from the profile
    (:mod:`spadeopt.optimize.predict`): its parallel regions are mapped onto the physical
    graph as FATM maps them, then the plan's PEs and nodes are evaluated."""
    check_profile(graph, prof)
    model = fit_production(graph, prof, model)
    return predict_physical(graph, prof, plan, comm, model, collapse_fraction(graph, prof, model))
