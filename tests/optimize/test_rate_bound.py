"""``rate_bound`` is never below the prediction of a plan it bounds.

Random apps from the oracle's generators (``tests/optimize/oracle.py``), random width
vectors and clusters: the bound (``fatm_search.vector_bound``, itself under the cores'
bound ``rate_bound.capacity_bound``) is checked against
every plan the width search scores for the vector (each MaxFrac rung's GreedyFuse plan
and each channel-symmetric plan) and against random plans whose PEs hold at most one
channel of each region (any such plan, not only the search's).
"""

from __future__ import annotations

import random
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spadeopt.errors import SpadeoptError
from spadeopt.optimize.fatm import candidate_regions
from spadeopt.optimize.fatm_search import (
    SYMMETRIC,
    predicted_rate,
    prediction_inputs,
    vector_bound,
    width_scorer,
)
from spadeopt.optimize.predict import DEFAULT_MODEL
from spadeopt.optimize.problem import LinearCommModel
from spadeopt.plan.plan import make_plan
from spadeopt.plan.regions import choose_exchanges
from tests.optimize.oracle import random_graph, random_profile

COMM = LinearCommModel(per_tuple_s=0.4e-6, per_byte_s=1e-9)
CLUSTERS = ((1, 2), (1, 4), (1, 16), (2, 4))


def _case(seed: int, cluster: int, max_width: int = 8):
    rng = random.Random(seed)
    graph = random_graph(rng)
    prof = random_profile(graph, rng)
    nodes, cores = CLUSTERS[cluster]
    regions, free, _ = candidate_regions(graph, None, True, True)
    widths = {n: rng.randint(1, max_width) for n in free}
    vec = choose_exchanges(graph, tuple(replace(r, width=widths.get(r.name, r.width)) for r in regions))
    scorer = width_scorer(graph, prof, COMM, nodes, cores, 0.5, 0.95, 1.0, True, DEFAULT_MODEL)
    return rng, graph, scorer, vec


def _bound(scorer, vec) -> float:
    """The full bound (``vector_bound``), checked to be under the cores' bound
    (``WidthScorer.bound`` with no floor): a plan under the first is under both."""
    full, cheap = vector_bound(scorer.ctx, vec), scorer.bound(vec)
    assert full <= cheap * (1 + 1e-9)  # equal when the cores bind (sums in another order)
    return full


def _random_groups(rng: random.Random, problem) -> list[list[str]]:
    """A random partition of ``problem``'s operators in which no PE holds two channels of
    one region: PE ``p`` may hold channel ``p mod w`` of a region of width ``w`` only."""
    widest = max((len(r) for r in problem.channels), default=1)
    pes = max(widest, rng.randint(1, len(problem.operators)))
    width = {op: len(problem.channels[r]) for op, (r, _) in problem.channel_of.items()}
    groups: dict[int, list[str]] = {}
    for op in problem.operators:
        rc = problem.channel_of.get(op)
        choices = range(pes) if rc is None else range(rc[1], pes, width[op])
        groups.setdefault(rng.choice(choices), []).append(op)
    return list(groups.values())


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), cluster=st.integers(0, len(CLUSTERS) - 1))
def test_the_bound_is_above_every_plan_the_search_scores(seed, cluster):
    _, _, scorer, vec = _case(seed, cluster)
    scorer.rated(vec)
    bound = _bound(scorer, vec)
    scored = [s for (v, key), got in scorer.rungs.items() if v == vec
              for s in ([x for x, _ in got] if key == SYMMETRIC else [got])]
    assert scored
    for s in scored:
        assert s.score is None or s.score <= bound, (s.score, bound, [pe.operators for pe in s.plan.pes])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), cluster=st.integers(0, len(CLUSTERS) - 1), plans=st.integers(1, 6))
def test_the_bound_is_above_random_plans(seed, cluster, plans):
    rng, graph, scorer, vec = _case(seed, cluster)
    ctx = scorer.ctx
    entry = ctx.cache.get(vec)
    prediction_inputs(entry, ctx.comm, ctx.model)
    bound = _bound(scorer, vec)
    for _ in range(plans):
        groups = _random_groups(rng, entry.predict_problem)
        try:
            plan = make_plan(graph, "auto", groups, [rng.randrange(ctx.nodes) for _ in groups], ctx.nodes,
                             ctx.cores, regions=vec)
        except SpadeoptError:
            continue
        rate = predicted_rate(ctx, plan)
        assert rate is None or rate <= bound, (rate, bound, groups)
