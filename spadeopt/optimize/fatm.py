"""FATM: the automatic strategy. Profile + comm-cost model -> fission -> GreedyFuse -> placement -> Plan.

This is the only place where the optimizer's pure algorithms meet the app graph: it
turns the graph's annotations into legality constraints (colocation, exlocation, and
feedback loops into tuple-generating ports, which may never be fused), chooses the
widths of the declared parallel regions (:mod:`spadeopt.optimize.widths`), runs
GreedyFuse on the physical graph (or the exact optimizer), places the PEs and names them through the same
``make_plan`` every strategy uses. It also records why the result looks as it does.

Cost (issue 12's optimizer speed). Under ``--rate max`` every width vector costs one rate
search (about 18 GreedyFuse + placement runs, :mod:`spadeopt.optimize.rate`) and the
MaxFrac ladder one more per larger MaxFrac. Work that does not depend on the rate is done
once: a rate search builds its first problem with :func:`problem_for` and rescales it for
the other rates (:class:`ScaledProblems`); one :class:`PhysicalCache` per call keeps each
vector's physical graph, profile and prediction problem; the ladder reuses the width
search's plan for the chosen widths at the user's MaxFrac. None of this changes a bit of
the answer (``tests/optimize/test_fatm_caches.py`` plans with and without them).
"""

from __future__ import annotations

import gc
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from spadeopt.errors import OptimizeError, PlacementInfeasible, UsageError
from spadeopt.model.graph import AppGraph, PortRef
from spadeopt.optimize.cost import metrics, objective
from spadeopt.optimize.exact import exact_fuse, gap
from spadeopt.optimize.greedy_fuse import greedy_fuse, greedy_then_absorb, why_not_merged
from spadeopt.optimize.placement import pe_graph, place
from spadeopt.optimize.predict import DEFAULT_MODEL, PerfModel, Prediction, predict
from spadeopt.optimize.problem import CommModel, FusionProblem, Link
from spadeopt.optimize.rate import max_rate, parse_rate, scale
from spadeopt.optimize.result import FusionResult
from spadeopt.optimize.widths import TIE, choose_widths, free_regions, physical_profile
from spadeopt.plan.fission import physical_graph
from spadeopt.plan.plan import Plan, make_plan
from spadeopt.plan.regions import Region, resolve_regions


@dataclass(frozen=True)
class OperatorProfile:
    """What the optimizer needs from a refined profile."""

    app: str
    fingerprint: str
    load: Mapping[str, float]  # u per operator (CPU fraction, in cores)
    links: tuple[tuple[str, str, float, float], ...]  # (src op, dst op, tuples/s, bytes/tuple)
    source_rate: float = 0.0  # aggregate source rate (tuples/s) the loads were measured at
    one_pe_run: bool = False  # profiled in one run of one PE (FALL, one node): that PE ran one core flat out
    production_fall_rate: float = 0.0  # steady source rate of the production FALL build (0: not measured)


def unfusable_pairs(graph: AppGraph) -> tuple[frozenset[str], ...]:
    """Both ends of every stream that closes a loop into a tuple-generating port."""
    import networkx as nx

    g = nx.DiGraph()
    g.add_nodes_from(op.name for op in graph.operators)
    for s in graph.streams:
        g.add_edge(s.src.op, s.dst.op)
    comp = {n: i for i, c in enumerate(nx.strongly_connected_components(g)) for n in c}
    pairs = set()
    for s in graph.streams:
        same_scc = comp[s.src.op] == comp[s.dst.op]
        if same_scc and graph.op(s.dst.op).in_port(s.dst.port).tuple_generating:
            if s.src.op == s.dst.op:
                continue  # a self-loop cannot be split by any partition; validation refuses it
            pairs.add(frozenset((s.src.op, s.dst.op)))
    return tuple(sorted(pairs, key=sorted))


def check_profile(graph: AppGraph, prof: OperatorProfile) -> None:
    """Refuse a profile of another graph, or one missing operators."""
    if prof.fingerprint != graph.fingerprint:
        raise OptimizeError(
            f"the profile is of app '{prof.app}' graph {prof.fingerprint}, but '{graph.name}' with these "
            f"parameters is graph {graph.fingerprint}; profile this app (same -p parameters) with "
            f"`spadeopt profile` and refine it again")
    names = [op.name for op in graph.operators]
    missing = [n for n in names if n not in prof.load]
    if missing:
        raise OptimizeError(f"the profile has no CPU load for operator(s) {', '.join(missing[:5])}; refine again")


def problem_for(graph: AppGraph, prof: OperatorProfile, comm: CommModel, max_frac: float,
                min_util: float, memo: dict[str, Any] | None = None) -> FusionProblem:
    """The fusion problem of ``graph`` under ``prof``. ``memo`` (a dict owned by the
    caller) keeps what depends only on the graph and on which operators and links the
    profile names: pass the same one only for profiles derived from one another by
    :func:`scale` or new loads of the same operators (the profile check, unseen streams
    and unfusable pairs are then done once)."""
    if memo is None or "unseen" not in memo:
        check_profile(graph, prof)
        parts = {"unseen": _unseen_streams(graph, prof), "unfusable": list(unfusable_pairs(graph))}
        if memo is not None:
            memo.update(parts)
    else:
        parts = memo
    names = [op.name for op in graph.operators]
    return FusionProblem.build(
        names, {n: prof.load[n] for n in names}, list(prof.links) + parts["unseen"], comm,
        max_frac=max_frac, min_util=min_util,
        colocate=[frozenset(g) for g in graph.annotations.colocate],
        exlocate=[frozenset(g) for g in graph.annotations.exlocate],
        unfusable=parts["unfusable"],
        channels=graph.annotations.channels,
    )


class PhysicalCache:
    """One ``fuse_auto`` call's physical graphs: for each width vector (a regions tuple)
    its physical graph and profile (:func:`physical_profile`), the memo of
    :func:`problem_for`, its collapsible links and the problem predictions are made on.
    The search visits a vector to score it, again in the MaxFrac ladder and for the final
    prediction; all are pure functions of the logical graph, profile and ``comm``, so
    each is built once."""

    def __init__(self, graph: AppGraph, prof: OperatorProfile, comm: CommModel,
                 model: PerfModel = DEFAULT_MODEL) -> None:
        self.graph, self.prof, self.comm, self.model = graph, prof, comm, model
        self._entries: dict[tuple[Region, ...], _PhysicalEntry] = {}

    def serves(self, comm: CommModel, model: PerfModel) -> bool:
        """Whether this cache's physical profiles are the ones ``comm`` and ``model`` give."""
        return self.comm is comm and self.model.fission_costs == model.fission_costs

    def get(self, regions: tuple[Region, ...]) -> _PhysicalEntry:
        entry = self._entries.get(regions)
        if entry is None:
            physical = physical_graph(self.graph, regions)
            entry = _PhysicalEntry(physical, physical_profile(self.graph, self.prof, regions, physical, self.model))
            self._entries[regions] = entry
        return entry


class _PhysicalEntry:
    __slots__ = ("graph", "prof", "memo", "_collapsible", "predict_problem")

    def __init__(self, graph: AppGraph, prof: OperatorProfile) -> None:
        self.graph, self.prof = graph, prof
        self.memo: dict[str, Any] = {}
        self._collapsible: frozenset[tuple[str, str]] | None = None
        self.predict_problem: FusionProblem | None = None

    @property
    def collapsible(self) -> frozenset[tuple[str, str]]:
        if self._collapsible is None:
            self._collapsible = collapsible_links(self.graph)
        return self._collapsible


def _unseen_streams(graph: AppGraph, prof: OperatorProfile) -> list[tuple[str, str, float, float]]:
    """Streams of the graph that carried no tuple while profiling (the profile has no link
    for them), as zero-rate links: they still connect their operators."""
    from collections import Counter

    seen = Counter((a, b) for a, b, _, _ in prof.links)
    out = []
    for s in graph.streams:
        key = (s.src.op, s.dst.op)
        if seen[key] > 0:
            seen[key] -= 1
        elif s.src.op != s.dst.op:
            out.append((s.src.op, s.dst.op, 0.0, 0.0))
    return out


@dataclass(frozen=True)
class AutoPlan:
    plan: Plan
    result: FusionResult
    explain: dict[str, Any]


def fuse_auto(graph: AppGraph, prof: OperatorProfile, comm: CommModel, nodes: int, cores: int,
              max_frac: float = 0.5, min_util: float = 0.95, exact: bool = False,
              capacity_frac: float = 1.0, rate: str | float = "profiled", absorb: bool = True,
              widths: Mapping[str, int] | None = None, fission: bool = True,
              model: PerfModel | None = None) -> AutoPlan:
    """Fission x GreedyFuse x placement at the planning ``rate`` (see :mod:`spadeopt.optimize.rate`).

    Every declared parallel region not pinned by ``widths`` (``--width``) gets the width
    that gives the highest planned rate (``--rate max`` search on the physical graph;
    :mod:`spadeopt.optimize.widths`); ``fission=False`` keeps them at width 1. Then the
    physical graph of the chosen widths is fused and placed at ``rate``. Width vectors are
    scored, and the plan's throughput predicted, by :func:`predict_plan` under ``model``
    (:mod:`spadeopt.optimize.predict`; default constants when ``None``). Runs with the
    cyclic garbage collector paused (:func:`gc_paused`).
    """
    with gc_paused():
        return _fuse_auto(graph, prof, comm, nodes, cores, max_frac, min_util, exact, capacity_frac, rate, absorb,
                          widths, fission, model)


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
               widths: Mapping[str, int] | None, fission: bool, model: PerfModel | None) -> AutoPlan:
    """:func:`fuse_auto`'s body."""
    rate = parse_rate(rate)
    check_profile(graph, prof)  # before searching
    model = fit_production(graph, prof, model or DEFAULT_MODEL)
    if nodes < 1 or cores < 1:
        raise OptimizeError(f"nodes and cores must be >= 1 (got {nodes}, {cores})")
    regions = resolve_regions(graph, "auto", dict(widths or {}))
    free = free_regions(graph, widths, fission)
    fission_doc: dict[str, Any] = {"enabled": fission, "pinned": dict(sorted((widths or {}).items())),
                                   "search": None}
    frac = collapse_fraction(graph, prof, model)
    cache = PhysicalCache(graph, prof, comm, model)
    searched: dict[tuple, tuple] = {}
    if free:
        evaluate = width_scorer(graph, prof, comm, nodes, cores, max_frac, min_util, capacity_frac, absorb, model,
                                cache)
        regions, fission_doc["search"] = choose_widths(regions, free, nodes * cores, evaluate)
        searched = evaluate.plans
    tried_frac = []
    best = None
    for mf in max_frac_candidates(max_frac, rate):
        if mf == max_frac and rate == "max" and regions in searched:
            got, trial, score = searched[regions]  # the width search made this very plan
        else:
            got = _plan_physical(graph, prof, regions, comm, nodes, cores, mf, min_util, capacity_frac, rate,
                                 absorb, frac, cache)
            trial = _trial_plan(graph, got, nodes, cores, regions)
            score = _predicted_rate(graph, prof, trial, comm, model, frac, cache)
        tried_frac.append({"max_frac": mf, "pes": len(trial.pes), "predicted": score})
        if best is None or (score is not None and (best[0] is None or score > best[0] * (1 + TIE))):
            best = (score, mf, got)
    _, max_frac, (problem, result, placement, tmp_ids, factor, search) = best
    exact_doc = None
    if exact:
        try:
            best = exact_fuse(problem)
        except UsageError as exc:  # too many units; fission may have widened a small app past the limit
            exact_doc = {"skipped": f"no exact optimum for the {len(problem.operators)}-operator physical graph: "
                                    f"{str(exc).split(';')[0]}"}
        else:
            exact_doc = {"objective": best.objective, "greedy_objective": result.objective,
                         "gap": gap(result, best), "partitions": [list(p) for p in best.partitions]}
    groups = [list(p) for p in result.partitions]
    plan = make_plan(graph, "auto", groups, [placement[p] for p in tmp_ids], nodes, cores, regions=regions)
    explain = _explain(plan, problem, result, placement, exact_doc, max_frac, min_util)
    explain["rate"] = {"mode": rate if isinstance(rate, str) else "given", "profiled": prof.source_rate,
                       "planned": prof.source_rate * factor, "factor": factor,
                       "capacity_cores": nodes * cores * capacity_frac,
                       "search_tries": search.tries if search else 0,
                       "at_upper_bound": search.at_upper_bound if search else False}
    try:
        predicted = _predict(graph, prof, plan, comm, model, frac, cache)
    except OptimizeError as exc:  # e.g. a profile whose sources sent nothing: no rate to predict
        explain["rate"]["predicted"] = None
        explain["prediction"] = {"error": str(exc), "model": model.to_json()}
    else:
        explain["rate"]["predicted"] = predicted.rate
        explain["prediction"] = predicted.to_json()
    explain["collapse"] = {"inlined_frac": frac, "production_fall_rate": prof.production_fall_rate,
                           "fitted": frac > 0}
    explain["max_frac_search"] = tried_frac
    explain["absorb_leftovers"] = absorb
    fission_doc["widths"] = {r.name: r.width for r in regions}
    explain["fission"] = fission_doc
    return AutoPlan(plan, result, explain)


def width_scorer(graph: AppGraph, prof: OperatorProfile, comm: CommModel, nodes: int, cores: int,
                 max_frac: float, min_util: float, capacity_frac: float, absorb: bool,
                 model: PerfModel, cache: PhysicalCache | None = None) -> _WidthScorer:
    """The score of a width vector (regions with their widths): the predicted source rate
    of the plan FATM makes for it at ``--rate max``, or ``None`` when nothing fits. The
    scorer keeps each vector's plan (``plans``): the MaxFrac ladder starts with the
    chosen vector at the user's MaxFrac, which is the plan the search already made.
    (No plan puts two channels of one region in one PE: the physical graph's
    ``annotations.channels`` reach GreedyFuse as a legality rule, see
    :mod:`spadeopt.optimize.legality`.)"""
    model = fit_production(graph, prof, model)
    return _WidthScorer(graph, prof, comm, nodes, cores, max_frac, min_util, capacity_frac, absorb, model,
                        collapse_fraction(graph, prof, model), cache or PhysicalCache(graph, prof, comm, model))


class _WidthScorer:
    """:func:`width_scorer`'s callable; ``plans`` maps a regions tuple to its
    (:func:`_plan_physical` result, trial plan, score) once scored."""

    def __init__(self, graph, prof, comm, nodes, cores, max_frac, min_util, capacity_frac, absorb, model,
                 frac, cache: PhysicalCache) -> None:
        self.args = (graph, prof, comm, nodes, cores, max_frac, min_util, capacity_frac, absorb, model, frac, cache)
        self.plans: dict[tuple, tuple] = {}

    def __call__(self, rs) -> float | None:
        graph, prof, comm, nodes, cores, max_frac, min_util, capacity_frac, absorb, model, frac, cache = self.args
        try:
            got = _plan_physical(graph, prof, rs, comm, nodes, cores, max_frac, min_util, capacity_frac,
                                 "max", absorb, frac, cache)
        except OptimizeError:
            return None
        trial = _trial_plan(graph, got, nodes, cores, rs)
        score = _predicted_rate(graph, prof, trial, comm, model, frac, cache)
        self.plans[rs] = (got, trial, score)
        return score


def _trial_plan(graph: AppGraph, got, nodes: int, cores: int, regions) -> Plan:
    """The plan of one :func:`_plan_physical` result, named as every strategy's plans are."""
    _, result, placement, tmp_ids, _, _ = got
    return make_plan(graph, "auto", [list(p) for p in result.partitions], [placement[t] for t in tmp_ids],
                     nodes, cores, regions=regions)


def _predicted_rate(graph: AppGraph, prof: OperatorProfile, plan: Plan, comm: CommModel, model: PerfModel,
                    frac: float, cache: PhysicalCache | None = None) -> float | None:
    """:func:`predict_plan`'s rate under an already fitted ``model`` and ``frac``; None when
    nothing can be predicted."""
    try:
        return _predict(graph, prof, plan, comm, model, frac, cache).rate
    except OptimizeError:
        return None


MAX_FRAC_LADDER = (0.75, 1.0)
"""Under ``--rate max`` FATM also fuses the chosen widths with these MaxFrac values and
keeps the plan the prediction rates highest: MaxFrac leaves headroom for a planned rate,
which a flat-out run does not need, and GreedyFuse under a low MaxFrac must cut a channel
that needs a whole core into pipeline stages whose links cost more than they buy. The
width search itself scores at the user's MaxFrac (the ladder in every width evaluation
tripled the optimizer's time)."""


def max_frac_candidates(max_frac: float, rate) -> tuple[float, ...]:
    """The user's MaxFrac, and under ``--rate max`` the larger ones of :data:`MAX_FRAC_LADDER`."""
    if rate != "max":
        return (max_frac,)
    return (max_frac, *(m for m in MAX_FRAC_LADDER if m > max_frac))


def _plan_physical(graph: AppGraph, prof: OperatorProfile, regions, comm: CommModel, nodes: int, cores: int,
                   max_frac: float, min_util: float, capacity_frac: float, rate: str | float, absorb: bool,
                   inlined_frac: float, cache: PhysicalCache):
    """GreedyFuse + placement of the physical graph of ``regions`` at ``rate``; returns
    (problem, result, placement, tmp_ids, factor, RateSearch or None). Operators that
    collapse into their predecessor's loop when fused with it are costed at
    ``1 - inlined_frac`` of their profiled load (:func:`collapse_fraction`): GreedyFuse
    sees what a collapsed run costs, so it does not cut a cheap run into pieces."""
    entry = cache.get(regions)
    physical, pprof = entry.graph, entry.prof
    if inlined_frac > 0:
        inlined = {b for _, b in entry.collapsible}
        pprof = replace(pprof, load={op: u * (1.0 - inlined_frac) if op in inlined else u
                                     for op, u in pprof.load.items()})
    if rate == "max":
        problems = ScaledProblems(physical, pprof, comm, max_frac, min_util, entry.memo)

        def attempt(k: float):
            try:
                got = _fuse_and_place(problems(k), nodes, cores, capacity_frac, absorb)
            except PlacementInfeasible:
                return None
            return None if got[1].warnings else got
        capacity = nodes * cores * capacity_frac
        (problem, result, placement, tmp_ids), search = max_rate(
            prof.source_rate, math.fsum(pprof.load.values()), capacity, attempt)
        return problem, result, placement, tmp_ids, search.factor, search
    if rate == "profiled":
        factor = 1.0
    elif prof.source_rate > 0:
        factor = rate / prof.source_rate
    else:
        raise OptimizeError("the profile's sources sent no tuples, so it cannot be scaled to --rate; "
                            "profile a run whose sources emit tuples")
    problem, result, placement, tmp_ids = _fuse_and_place(
        problem_for(physical, scale(pprof, factor), comm, max_frac, min_util, entry.memo), nodes, cores,
        capacity_frac, absorb)
    return problem, result, placement, tmp_ids, factor, None


class ScaledProblems:
    """``problem_for(graph, scale(prof, k), comm, max_frac, min_util)`` for many factors ``k``.

    The first call builds it with :func:`problem_for` (checks, unfusable pairs, unseen
    streams, validation: every error as before). Later calls take that problem's
    operators, link ends, sizes and annotations, which do not depend on ``k``, and only
    multiply the profile's loads and link rates by ``k`` as :func:`scale` does
    (:meth:`FusionProblem.rescaled`): the same problem, field for field, without
    rebuilding the graph's indexes for each rate the search tries."""

    def __init__(self, graph: AppGraph, prof: OperatorProfile, comm: CommModel, max_frac: float,
                 min_util: float, memo: dict[str, Any] | None = None) -> None:
        self.graph, self.prof, self.comm, self.max_frac, self.min_util = graph, prof, comm, max_frac, min_util
        self.memo = memo
        self.first: FusionProblem | None = None

    def __call__(self, k: float) -> FusionProblem:
        if self.first is None:
            self.first = problem_for(self.graph, scale(self.prof, k), self.comm, self.max_frac, self.min_util,
                                     self.memo)
            return self.first
        first, prof = self.first, self.prof
        load = {n: prof.load[n] * k for n in first.operators}
        n = len(prof.links)  # problem_for's links: the profile's, then its zero-rate unseen streams
        links = tuple(Link(lk.src, lk.dst, r * k, lk.size) for lk, (_, _, r, _) in zip(first.links, prof.links,
                                                                                        strict=False))
        return first.rescaled(load, links + first.links[n:])


def _fuse_and_place(problem: FusionProblem, nodes: int, cores: int, capacity_frac: float, absorb: bool):
    result = greedy_then_absorb(problem) if absorb else greedy_fuse(problem)
    tmp_ids = [f"p{i}" for i in range(len(result.partitions))]
    pe_loads, pe_links = pe_graph(result.partitions, problem, tmp_ids, result.comp_loads)
    # FATM places by itself: the developer's place() annotations are FMAN's.
    placement = place(pe_loads, pe_links, nodes, cores, capacity_frac)
    return problem, result, placement, tmp_ids


def _explain(plan: Plan, problem: FusionProblem, result: FusionResult, placement, exact_doc,
             max_frac: float, min_util: float) -> dict[str, Any]:
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
    return _predict(graph, prof, plan, comm, model, collapse_fraction(graph, prof, model))


def _predict(graph: AppGraph, prof: OperatorProfile, plan: Plan, comm: CommModel, model: PerfModel,
             frac: float, cache: PhysicalCache | None = None) -> Prediction:
    """:func:`predict_plan` once ``model`` is fitted and the collapse fraction known."""
    entry = (cache if cache is not None and cache.serves(comm, model)
             else PhysicalCache(graph, prof, comm, model)).get(plan.regions)
    if entry.predict_problem is None:
        entry.predict_problem = problem_for(entry.graph, entry.prof, comm, 1.0, 1.0, entry.memo)
    collapsing = plan.collapse and (model.collapse_saves_s > 0 or frac > 0)
    if collapsing:
        pe_of = plan.pe_of
        collapsed = frozenset((a, b) for a, b in entry.collapsible if pe_of.get(a) == pe_of.get(b))
    else:
        collapsed = frozenset()
    return predict(entry.predict_problem, [(pe.pe_id, pe.operators, pe.node) for pe in plan.pes], plan.nodes,
                   plan.cores, prof.source_rate, model, unattributed_call_s(prof, model), collapsed, frac)


def collapsible_links(graph: AppGraph) -> frozenset[tuple[str, str]]:
    """Links ``a -> b`` that codegen compiles into one loop when ``a`` and ``b`` share a PE
    (``spadeopt.codegen.collapse``'s run rule, read off the graph): ``a`` and ``b``
    functors, ``a`` with one output port whose only subscriber is ``b``, ``b`` without a
    filter and with no other publisher."""
    out = set()
    for op in graph.operators:
        if op.kind != "functor" or len(op.outputs) != 1:
            continue
        subs = graph.subscribers(PortRef(op.name, op.outputs[0].name))
        if len(subs) != 1:
            continue
        nxt = graph.op(subs[0].op)
        if (nxt.kind == "functor" and not getattr(nxt.params, "filter", None)
                and len(graph.publishers(subs[0])) == 1):
            out.add((op.name, nxt.name))
    return frozenset(out)


def collapsed_links(graph: AppGraph, plan: Plan) -> frozenset[tuple[str, str]]:
    """The :func:`collapsible_links` of ``graph`` whose two ends share a PE of ``plan``."""
    pe_of = plan.pe_of
    return frozenset((a, b) for a, b in collapsible_links(graph) if pe_of.get(a) == pe_of.get(b))


OPER_SCALE_FIT = (0.2, 2.0)  # a fitted oper_scale outside this is a broken run, not a fit: clamped


def fit_production(graph: AppGraph, prof: OperatorProfile, model: PerfModel) -> PerfModel:
    """``model`` with ``oper_scale`` fitted on the app's production FALL run, unless
    :func:`collapse_fraction` spends that one measurement.

    FALL is one PE whose sources read flat out: ``pe_cap * R0 / R`` cores at the profiled
    rate ``R0``, against the model's ``oper_scale * (Σu + call_s * internal)``; the
    ``oper_scale`` that makes them equal replaces the constant (it is what instrumentation
    costs *this* app). An app with collapsible functors spends the measurement on the
    share collapsing saves instead, as long as that share comes out in [0, 1]. Outside,
    the share is clamped and ``oper_scale`` fitted with it: production FALL ran slower
    than the model says it would with nothing saved (share 0; the constant is too low
    for this app, as on the chain of busy functors), or faster than with the inlined
    operators free (share 1; the constant is too high for what is left, the sources and
    sinks, as on peer: predictions were 0.6 of measured for every strategy, round 6).
    Idempotent; unchanged without a probe.
    """
    if not (prof.production_fall_rate > 0 and prof.source_rate > 0):
        return model
    raw = _raw_collapse_fraction(graph, prof, model)
    if raw is not None and 0 <= raw <= 1 + 1e-9:
        return model
    call_s = unattributed_call_s(prof, model)
    if raw is None or raw < 0:  # nothing inlined, or slower than with nothing saved: share 0
        internal = math.fsum(r for a, b, r, _ in prof.links if a is not None and b is not None)
        base = math.fsum(prof.load.values()) + call_s * internal
    else:  # faster than with the inlined operators free: share 1, the rest is oper_scale's
        base, _ = _collapse_loads(graph, prof, call_s)
    if base <= 0:
        return model
    measured = model.pe_cap * prof.source_rate / prof.production_fall_rate
    lo, hi = OPER_SCALE_FIT
    scale_ = min(hi, max(lo, measured / base))
    src = model.source.split(" + oper_scale fitted")[0]
    return replace(model, oper_scale=scale_, source=f"{src} + oper_scale fitted on the production FALL run")


def collapse_fraction(graph: AppGraph, prof: OperatorProfile, model: PerfModel) -> float:
    """The share of an inlined operator's profiled load that collapsing saves, fitted on
    the app's production FALL run (``prof.production_fall_rate``; 0 when none was made).

    FALL is one PE whose sources read flat out, so its production run costs ``pe_cap / R``
    CPU seconds per source tuple at its steady rate ``R``. The model without collapsing
    says ``A + B`` per source tuple: ``A`` for every operator not inlined plus ``call_s``
    on the links collapsing keeps, ``B`` for the inlined ones (both ``oper_scale``
    times the profiled loads, over the profiled rate). The fraction ``f`` with
    ``A + (1 - f) B`` equal to the measurement, clamped to [0, 1], is charged to the
    inlined operators alone: the code collapsing removes (a call, a tuple and a list per
    operator and batch, overwritten expressions) is theirs.
    """
    raw = _raw_collapse_fraction(graph, prof, model)
    return 0.0 if raw is None else min(1.0, max(0.0, raw))


def _raw_collapse_fraction(graph: AppGraph, prof: OperatorProfile, model: PerfModel) -> float | None:
    """:func:`collapse_fraction` before clamping; ``None`` without a probe or inlined operators."""
    if not (prof.production_fall_rate > 0 and prof.source_rate > 0):
        return None
    if not collapsible_links(graph):
        return None
    a_load, b_load = _collapse_loads(graph, prof, unattributed_call_s(prof, model))
    a_part, b_part = model.oper_scale * a_load, model.oper_scale * b_load
    if b_part <= 0:
        return None
    measured = model.pe_cap * prof.source_rate / prof.production_fall_rate  # load at factor 1, in cores
    return 1.0 - (measured - a_part) / b_part


def _collapse_loads(graph: AppGraph, prof: OperatorProfile, call_s: float) -> tuple[float, float]:
    """Profiled cores per source tuple of FALL, split for collapsing: (the operators not
    inlined plus ``call_s`` on the links collapsing keeps, the inlined operators)."""
    links = collapsible_links(graph)
    inlined = {b for _, b in links}
    kept = math.fsum(r for a, b, r, _ in prof.links if a is not None and b is not None and (a, b) not in links)
    return (math.fsum(u for op, u in prof.load.items() if op not in inlined) + call_s * kept,
            math.fsum(prof.load.get(op, 0.0) for op in inlined))


def unattributed_call_s(prof: OperatorProfile, model: PerfModel) -> float:
    """CPU seconds per fused tuple delivery that no operator's timer saw.

    A profile of one PE whose sources read flat out (``one_pe_run``) measured a process
    that was busy ``model.pe_cap`` cores at the profiled rate; what the operators' own
    loads do not account for is the generated code between them (submits, calls, batching,
    the PE's loop), spread over every tuple delivered inside that PE. Otherwise (or when
    the operators account for it all) ``model.call_s``.
    """
    if not prof.one_pe_run:
        return model.call_s
    spare = model.pe_cap - math.fsum(prof.load.values())
    internal = math.fsum(r for a, b, r, _ in prof.links if a is not None and b is not None)
    return spare / internal if spare > 0 and internal > 0 else model.call_s
