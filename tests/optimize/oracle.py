"""An exhaustive oracle for FATM's width and fusion search (tests only).

For a graph, a synthetic profile and a cluster, the oracle plans every integer width
vector (each free region from 1 to its cap, no ladder) and, for each vector, every
per-channel fusion of two families:

* GreedyFuse + placement at each MaxFrac of ``GRID`` (FATM's planner, finer rungs);
* explicit channel fusions: each region's operators cut into contiguous segments in
  declaration order (every one of the 2^(k-1) cuts up to 6 operators, every cut into at
  most 3 segments beyond), each segment one PE in every
  channel; everything outside the channels (sources and sinks outside regions, splits,
  merges, exchanges) either one PE each or one PE in all (when that is legal).

Every plan is scored by the same prediction FATM ranks with
(``fatm_search.predicted_rate``). The oracle's best is the rate FATM's choice must come
within ``tests/optimize/test_fatm_oracle.py``'s tolerance of.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import replace

from spadeopt import time_window
from spadeopt.errors import SpadeoptError
from spadeopt.frontend.dsl import App
from spadeopt.model.graph import AppGraph
from spadeopt.optimize.fatm import OperatorProfile, candidate_regions, fit_production
from spadeopt.optimize.fatm_fit import collapse_fraction
from spadeopt.optimize.fatm_physical import PhysicalCache
from spadeopt.optimize.fatm_search import SearchContext, predicted_rate, score_plan
from spadeopt.optimize.placement import place
from spadeopt.optimize.widths import region_caps
from spadeopt.plan.plan import make_plan
from spadeopt.plan.regions import Region, choose_exchanges
from spadeopt.toolkit.sources import splittable

GRID = (0.3, 0.5, 0.75, 1.0)


@splittable(64)
def rows(n: int, *, part: int = 0, parts: int = 1):
    for s in range(part, -(-n // 64), parts):
        yield [(i % 7, float(i), i) for i in range(s * 64, min(n, s * 64 + 64))]


def plain_rows(n: int):
    for i in range(n):
        yield (i % 7, float(i), i)


def identity(v: float) -> float:
    return v


def random_graph(rng: random.Random) -> AppGraph:
    """A small random app: a source (splittable or not), 1-4 functors (some filters), an
    optional keyed window, a counting sink."""
    a = App(f"rand{rng.randrange(10**6)}")
    split = rng.random() < 0.6
    s = a.source("src", "k:int, v:float, ts:int", generator=rows if split else plain_rows, args={"n": 100})
    for i in range(rng.randint(1, 4)):
        s = a.functor(f"f{i}", s, filter="v >= 0" if rng.random() < 0.3 else None,
                      output={"k": "k", "v:float": "identity(v)", "ts": "ts"}, functions=[identity])
    if rng.random() < 0.5:
        s = a.aggregate("win", s, window=time_window("ts", 100), by=["k"],
                        output={"k": "k", "start": "wstart()", "n": "count()"})
    a.sink("out", s, mode="count")
    return a.build()


def synthetic_profile(graph: AppGraph, per_tuple: dict[str, float], rate: float = 100_000.0,
                      selectivity: dict[str, float] | None = None, size: float = 48.0) -> OperatorProfile:
    """Loads ``rate x per_tuple`` (per input tuple) and link rates that follow the
    selectivities, in declaration order (a DAG declared in topological order)."""
    selectivity = selectivity or {}
    in_rate = {op.name: (rate if op.is_source else 0.0) for op in graph.operators}
    load, links = {}, []
    for op in graph.operators:
        r = in_rate[op.name]
        load[op.name] = r * per_tuple.get(op.name, 0.05e-6)
        out = r * selectivity.get(op.name, 1.0)
        for s in graph.streams:
            if s.src.op == op.name:
                links.append((op.name, s.dst.op, out, size))
                in_rate[s.dst.op] += out
    return OperatorProfile(graph.name, graph.fingerprint, load, tuple(links), rate)


def random_profile(graph: AppGraph, rng: random.Random) -> OperatorProfile:
    per = {op.name: 10 ** rng.uniform(-7.5, -5.7) for op in graph.operators}
    sel = {op.name: rng.choice((1.0, 1.0, 0.5, 0.1)) for op in graph.operators if not op.is_source}
    return synthetic_profile(graph, per, selectivity=sel, size=rng.choice((24.0, 48.0, 200.0)))


def _segmentations(ops: tuple[str, ...], max_cuts: int = 2):
    """Every cut of ``ops`` into contiguous segments when there are at most 6 operators;
    for longer regions every cut into at most ``max_cuts + 1`` segments."""
    n = len(ops)
    cut_sets = (itertools.chain.from_iterable(itertools.combinations(range(1, n), k) for k in range(n))
                if n <= 6 else
                itertools.chain.from_iterable(itertools.combinations(range(1, n), k) for k in range(max_cuts + 1)))
    for cuts in cut_sets:
        bounds = (0, *cuts, n)
        yield [list(ops[a:b]) for a, b in itertools.pairwise(bounds)]


def _explicit_plans(ctx: SearchContext, regions: tuple[Region, ...], max_cuts: int = 2):
    physical = ctx.cache.get(regions).graph
    in_channel = {Region.channel_op(o, c) for r in regions if r.width > 1 for o in r.operators for c in range(r.width)}
    wide = [r for r in regions if r.width > 1]
    outside = [op.name for op in physical.operators if op.name not in in_channel]
    for segs in itertools.product(*(list(_segmentations(r.operators, max_cuts)) for r in wide)):
        groups = [[Region.channel_op(o, c) for o in seg] for r, rsegs in zip(wide, segs, strict=True)
                  for c in range(r.width) for seg in rsegs]
        for together in (False, True):
            extra = [outside] if together and outside else [[o] for o in outside]
            yield groups + extra


def _place_anyhow(loads, plinks, nodes: int, cores: int) -> dict[str, int]:
    """The placement FATM's planner makes, or (when the PEs do not fit at the profiled rate)
    the PEs dealt round robin over the nodes: the prediction decides what fits."""
    from spadeopt.errors import PlacementInfeasible

    try:
        return place(loads, plinks, nodes, cores, 1.0)
    except PlacementInfeasible:
        return {pe: i % nodes for i, (pe, _) in enumerate(loads)}


def _predict_groups(ctx: SearchContext, regions, groups) -> float | None:
    from spadeopt.optimize.fatm_problem import problem_for
    from spadeopt.optimize.placement import pe_graph

    entry = ctx.cache.get(regions)
    try:
        problem = entry.predict_problem or problem_for(entry.graph, entry.prof, ctx.comm, 1.0, 1.0, entry.memo)
        ids = tuple(f"p{i}" for i in range(len(groups)))
        loads, plinks = pe_graph([sorted(g) for g in groups], problem, ids)
        placement = _place_anyhow(loads, plinks, ctx.nodes, ctx.cores)
        plan = make_plan(ctx.graph, "auto", groups, [placement[i] for i in ids], ctx.nodes, ctx.cores,
                         regions=regions)
    except SpadeoptError:
        return None
    return predicted_rate(ctx, plan)


def oracle(graph: AppGraph, prof: OperatorProfile, comm, model, nodes: int, cores: int,
           greedy_widths_up_to: int = 16, max_cuts: int = 2) -> tuple[float, dict]:
    """The best predicted rate over every plan of the module docstring's families, and
    the plan that reached it (widths, family). GreedyFuse's family is planned for every
    width up to ``greedy_widths_up_to`` (each is a rate search on the physical graph); the
    explicit family for every width, with every cut of a region of up to 6 operators and
    every cut into at most ``max_cuts + 1`` segments of a longer one."""
    model = fit_production(graph, prof, model)
    regions, free, _ = candidate_regions(graph, None, True, True)
    cache = PhysicalCache(graph, prof, comm, model)
    ctx = SearchContext(graph, prof, comm, nodes, cores, 0.95, 1.0, True, model,
                        collapse_fraction(graph, prof, model), cache)
    caps = region_caps(graph, regions, free)
    top = min(nodes * cores, 64)
    per = [range(1, min(top, caps.get(n, top)) + 1) for n in free]
    best, how = 0.0, {}
    names = [r.name for r in regions]
    for widths in itertools.product(*per):
        rs = list(regions)
        for n, w in zip(free, widths, strict=True):
            rs[names.index(n)] = replace(rs[names.index(n)], width=w)
        vec = choose_exchanges(graph, tuple(rs))
        if max(widths, default=1) <= greedy_widths_up_to:
            for mf in GRID:
                try:
                    rate = score_plan(ctx, vec, mf, "max").score
                except SpadeoptError:
                    continue
                if rate and rate > best:
                    best, how = rate, {"widths": widths, "fusion": f"GreedyFuse at MaxFrac {mf}"}
        for groups in _explicit_plans(ctx, vec, max_cuts):
            rate = _predict_groups(ctx, vec, groups)
            if rate and rate > best:
                best, how = rate, {"widths": widths, "fusion": [sorted(g) for g in groups][:6]}
    return best, how
