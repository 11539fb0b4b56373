"""The channel quotient (optimize/quotient.py) and the width search's confirmation step.

- the quotient's expansion is a legal physical partitioning, and every partition GreedyFuse
  formed on the quotient has the physical CompLoad it was fused with;
- FATM's rating of a width vector on its quotient equals the full rating on the
  benchmark chain (the vectors measured while building it);
- ``choose_widths(confirm=...)`` ranks the chosen vector and its tie window by ``confirm``.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from spadeopt.bench.fatm_speed import chain_app, chain_profile
from spadeopt.optimize.cost import metrics
from spadeopt.optimize.fatm import candidate_regions, fit_production, plan_batch, width_scorer
from spadeopt.optimize.fatm_problem import problem_for
from spadeopt.optimize.fatm_search import KEEP
from spadeopt.optimize.greedy_fuse import greedy_then_absorb
from spadeopt.optimize.predict import DEFAULT_MODEL
from spadeopt.optimize.problem import LinearCommModel
from spadeopt.optimize.quotient import Quotient, quotient_fuse
from spadeopt.optimize.ranking import Rated
from spadeopt.optimize.rate import scale
from spadeopt.optimize.symmetric import legal
from spadeopt.optimize.widths import choose_widths
from spadeopt.plan.regions import Region, choose_exchanges

COMM = LinearCommModel(2e-6, 1e-9)


def _scorer(cores: int):
    g = chain_app(200)
    prof = chain_profile(g)
    model = replace(fit_production(g, prof, DEFAULT_MODEL), run_batch=float(plan_batch(prof)))
    regions, _, _ = candidate_regions(g, None, True, True)
    return width_scorer(g, prof, COMM, 1, cores, 0.5, 0.95, 1.0, True, model), regions


def _vector(regions, widths):
    return tuple(replace(r, width=widths.get(r.name, 1)) for r in regions)


@pytest.mark.parametrize("widths,max_frac,k", [({"reg": 5, "auto_f0": 4, "auto_f110": 3}, 0.5, 10.0),
                                               ({"auto_f0": 5}, 1.0, 7.5), ({"reg": 3, "auto_f110": 6}, 0.75, 6.0)])
def test_expansion_is_legal_and_costed_as_fused(widths, max_frac, k):
    ev, regions = _scorer(64)
    entry = ev.ctx.cache.get(_vector(regions, widths))
    physical = problem_for(entry.graph, scale(entry.prof, k), COMM, max_frac, 0.95, entry.memo)
    quot = Quotient.of(physical)
    assert quot is not None and not quot.check  # no annotation group across channels: legal by construction
    q = quot.problem(physical)
    assert len(q.operators) < len(physical.operators)
    got = quotient_fuse(quot, physical)
    seen = [op for part in got.partitions for op in part]
    assert sorted(seen) == sorted(physical.operators)
    assert legal(got.partitions, physical)
    fused = greedy_then_absorb(q)
    for part in fused.partitions:  # the quotient's CompLoad of each partition is the physical one
        assert math.isclose(metrics(frozenset(part), q).comp_load, metrics(frozenset(part), physical).comp_load,
                            rel_tol=1e-12)
    assert got.comp_loads == tuple(metrics(frozenset(p), physical).comp_load for p in got.partitions)


def test_quotient_needs_a_region_wider_than_it_keeps():
    ev, regions = _scorer(16)
    entry = ev.ctx.cache.get(_vector(regions, {"reg": KEEP}))
    physical = problem_for(entry.graph, entry.prof, COMM, 0.5, 0.95, entry.memo)
    assert Quotient.of(physical) is None


@pytest.mark.parametrize("widths", [{"auto_f0": 5}, {"reg": 3, "auto_f0": 5, "auto_f110": 2}])
def test_quotient_rating_is_the_full_one_on_the_chain(widths):
    ev, regions = _scorer(16)
    vec = choose_exchanges(ev.ctx.graph, _vector(regions, widths))  # as rated() plans it
    assert ev._quotient_applies(vec)
    quick = ev._rated(vec, True)
    full = ev._rated(vec, False)
    assert quick == full
    assert ev.confirm(vec) == full


def test_confirm_ranks_the_chosen_vector_and_its_window():
    regions = (Region("r", ("a",), 1),)
    quick = {1: 100.0, 2: 150.0, 3: 149.0, 4: 90.0}
    true = {1: 100.0, 2: 120.0, 3: 148.0, 4: 90.0}
    asked = []

    def confirm(rs):
        asked.append(rs[0].width)
        return Rated(true[rs[0].width])

    chosen, record = choose_widths(regions, ("r",), 4, lambda rs: Rated(quick[rs[0].width]), confirm=confirm)
    assert chosen[0].width == 3
    assert sorted(asked) == [2, 3]  # 2 led, then 3 (within TIE_WINDOW of 150) and 2 were confirmed
    assert [v["r"] for v in record["confirmed"]] == [2, 3]
    assert record["rate_leader"] == {"r": 3}


def test_the_quotient_keeps_a_key_exchanges_sides_apart():
    """Two regions joined by a key exchange at widths 3 and 4: the quotient problem keeps
    the exchange's sides (their kept operators), so GreedyFuse on it never mixes them, and
    the expansion is legal on the physical problem (record 070)."""
    from spadeopt.optimize.fatm import OperatorProfile
    from spadeopt.optimize.legality import fusion_legal
    from spadeopt.optimize.strategies import plan_for
    from spadeopt.plan.fission import physical_graph
    from tests.apps.exchange import exchange

    g = exchange.build({"case": "keyed", "tuples": 100, "wprep": 3, "wdesk": 4})
    phys = physical_graph(g, plan_for(g, "manual").regions)
    (before, after), = phys.annotations.apart
    names = [op.name for op in phys.operators]
    prof = OperatorProfile(g.name, phys.fingerprint, {n: 0.02 for n in names},
                           tuple((s.src.op, s.dst.op, 1000.0, 40.0) for s in phys.streams), 1000.0)
    physical = problem_for(phys, prof, COMM, 1.0, 0.95)
    quot = Quotient.of(physical)
    assert quot is not None
    q = quot.problem(physical)
    (qa, qb), = q.apart
    assert qa == frozenset(before) & set(q.operators) and qb == frozenset(after) & set(q.operators)
    assert not fusion_legal(frozenset({"per_acct__0"}), frozenset({"per_sym__0"}), q).ok
    got = quotient_fuse(quot, physical)
    assert got is None or legal(got.partitions, physical)
    if got is not None:
        for part in got.partitions:
            assert not (set(part) & set(before) and set(part) & set(after)), part
