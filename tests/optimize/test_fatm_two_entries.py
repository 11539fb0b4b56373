"""FATM on a region entered by two streams (issue 27 item 4): the profile maps onto each
entry's own split, so a keyed join of two feeds can be widened like any region.

Before the fix, the second entry's profile link fell through ``widths._map_region`` and
raised "more links ... than the graph has streams": every width above 1 failed to score
and FATM kept the region at width 1 whatever the work."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from spadeopt import App, api, count_window, time_window
from spadeopt.optimize.fatm import OperatorProfile, fuse_auto
from spadeopt.optimize.predict import DEFAULT_MODEL
from spadeopt.optimize.problem import LinearCommModel
from spadeopt.optimize.widths import physical_profile
from spadeopt.plan.fission import physical_graph
from spadeopt.plan.plan import check_plan
from spadeopt.plan.regions import resolve_regions
from tests.toolkit.gens import replay

COMM = LinearCommModel(2e-6, 1e-9)


def _profile(graph, region_u: float, rates: dict[str, float]) -> OperatorProfile:
    """Region operators cost ``region_u`` cores each, the rest 0.01; a stream leaving
    source ``s`` runs at ``rates[s]``, every other stream at the smallest of them."""
    members = {o for _, ops, _ in graph.annotations.parallel for o in ops}
    load = {op.name: (region_u if op.name in members else 0.01) for op in graph.operators}
    low = min(rates.values())
    links = tuple((s.src.op, s.dst.op, rates.get(s.src.op, low), 60.0) for s in graph.streams)
    return OperatorProfile(graph.name, graph.fingerprint, load, links, sum(rates.values()))


@pytest.fixture(scope="module")
def desk():
    graph, _ = api.load_graph("tests/apps/orders_fills.py", {"tuples": "100"})
    return graph


@pytest.mark.parametrize("width", [2, 3])
def test_each_entry_gets_its_own_split_in_the_mapped_profile(desk, width):
    prof = _profile(desk, 0.3, {"orders": 1000.0, "fills": 400.0})
    regions = tuple(dataclasses.replace(r, width=width) for r in resolve_regions(desk, {}))
    (region,) = regions
    phys = physical_graph(desk, regions)
    pprof = physical_profile(desk, prof, regions)
    assert pprof.fingerprint == phys.fingerprint
    assert set(pprof.load) == {op.name for op in phys.operators}
    assert Counter((a, b) for a, b, _, _ in pprof.links) == Counter((s.src.op, s.dst.op) for s in phys.streams)
    # each split costs its own entry's rate x the split cost
    split0, split1 = region.split_of(0), region.split_of(1)
    assert pprof.load[split0] == pytest.approx(1000 * DEFAULT_MODEL.split_dynamic_s)
    assert pprof.load[split1] == pytest.approx(400 * DEFAULT_MODEL.split_dynamic_s)
    rates = {(a, b): r for a, b, r, _ in pprof.links}
    assert rates[("orders", split0)] == 1000 and rates[("fills", split1)] == 400
    for c in range(width):
        assert rates[(split0, f"order__{c}")] == pytest.approx(1000 / width)
        assert rates[(split1, f"fill__{c}")] == pytest.approx(400 / width)
    for o in region.operators:
        assert sum(pprof.load[f"{o}__{c}"] for c in range(width)) == pytest.approx(prof.load[o])


def test_a_producer_entering_twice_feeds_both_splits():
    """A self-join: one source enters the region on both sides of the join, two streams of
    one (src, dst) pair, so two profile links; one goes to each split."""
    a = App("selfjoin")
    s = a.source("src", "k:int, ts:int, v:int", generator=replay, args={"rows": []})
    j = a.join("j", s, s, on="k", order="ts", window=(time_window("ts", 3), count_window(2)),
               output={"k": "left.k", "ts": "left.ts", "v:int": "left.v + right.v"})
    g = a.aggregate("agg", j, window=count_window(2), by=["k"], output={"k": "k", "n": "count()"})
    a.sink("out", g, mode="file")
    a.parallel("j", "agg", width=2, name="reg")
    graph = a.build()
    regions = tuple(dataclasses.replace(r, width=2) for r in resolve_regions(graph, {}))
    pprof = physical_profile(graph, _profile(graph, 0.2, {"src": 500.0}), regions)
    phys = physical_graph(graph, regions)
    assert Counter((a, b) for a, b, _, _ in pprof.links) == Counter((s.src.op, s.dst.op) for s in phys.streams)
    assert pprof.load["reg__split"] == pprof.load["reg__split1"] == pytest.approx(500 * DEFAULT_MODEL.split_dynamic_s)


def test_fatm_widens_a_two_entry_region_when_the_work_justifies_it(desk):
    """The join dominates (0.8 cores, everything else 0.01): pipelining cannot spread it,
    replication can, and every width of the ladder is scored (none fails to map)."""
    prof = _profile(desk, 0.01, {"orders": 1000.0, "fills": 1000.0})
    prof = dataclasses.replace(prof, load={**prof.load, "match": 0.8})
    auto = fuse_auto(desk, prof, COMM, nodes=1, cores=4, rate="max")
    (region,) = auto.plan.regions
    tried = {t["width"]: t["planned_rate"] for t in auto.explain["fission"]["search"]["regions"]["desk"]["tried"]}
    assert set(tried) == {1, 2, 3, 4} and all(r is not None for r in tried.values())
    assert tried[2] > 1.5 * tried[1]
    assert region.width >= 2 and tried[region.width] == max(tried.values())
    assert {region.split_of(0), region.split_of(1)} <= set(auto.plan.pe_of)
    check_plan(auto.plan, desk)


@pytest.mark.parametrize("where", ["inside", "before"])
def test_a_flushed_join_sides_exchange_is_in_the_mapped_profile(where):
    """A join side a tumbling count window reaches gets a side exchange (decision 067):
    the mapped profile has its splits and merges, and exactly the physical graph's links."""
    from tests.toolkit.test_fission_joins import flush_join

    graph = flush_join([], where).build()
    regions = tuple(dataclasses.replace(r, width=3) for r in resolve_regions(graph, {}))
    pprof = physical_profile(graph, _profile(graph, 0.2, {"src": 500.0}), regions)
    phys = physical_graph(graph, regions)
    assert pprof.fingerprint == phys.fingerprint
    assert set(pprof.load) == {op.name for op in phys.operators}
    assert Counter((a, b) for a, b, _, _ in pprof.links) == Counter((s.src.op, s.dst.op) for s in phys.streams)
    assert all(pprof.load[f"reg__j__left__wsplit{c}"] > 0 for c in range(3))
