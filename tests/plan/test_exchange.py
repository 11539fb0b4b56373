"""Key exchanges between two parallel regions (plan.regions.choose_exchanges,
plan.fission._exchange): when they are chosen, what refuses one (merge and split kept,
with the reason), plan.json and explain. The runs are in
tests/toolkit/test_fission_exchange.py and tests/e2e/test_fission_exchange_spark.py."""

from __future__ import annotations

import dataclasses
import json

import pytest

from spadeopt import App, api, count_window, time_window
from spadeopt.connectors import redis_source
from spadeopt.errors import PlanError
from spadeopt.optimize.strategies import plan_for
from spadeopt.plan.explain import explain_text
from spadeopt.plan.fission import physical_graph
from spadeopt.plan.plan import Plan, check_plan
from spadeopt.plan.regions import (
    EXCHANGE,
    choose_exchanges,
    exchange_problem,
    exchanges_json,
    feeding_region,
    resolve_regions,
)
from tests.apps.exchange import exchange
from tests.toolkit.gens import replay

SCHEMA = "k:int, j:int, ts:int, v:int"


def _graph(case: str = "keyed", wprep: int = 2, wdesk: int = 3):
    return exchange.build({"case": case, "tuples": 100, "wprep": wprep, "wdesk": wdesk})


def test_fman_declared_regions_get_an_exchange_and_plan_json_records_it(tmp_path):
    g = _graph()
    plan = plan_for(g, "manual")
    desk = next(r for r in plan.regions if r.name == "desk")
    assert (desk.fed, desk.after, desk.width) == (EXCHANGE, "prep", 3)
    doc = plan.to_json()
    rdoc = next(r for r in doc["regions"] if r["name"] == "desk")
    assert rdoc["fed"] == "exchange" and rdoc["after"] == "prep" and rdoc["routing"] == "exchange_hash"
    assert [s["operator"] for s in rdoc["exchange"]["splits"]] == ["desk__xsplit0", "desk__xsplit1"]
    assert [m["operator"] for m in rdoc["exchange"]["merges"]] == [f"desk__xmerge{d}" for d in range(3)]
    assert "split" not in rdoc and "merge" not in next(r for r in doc["regions"] if r["name"] == "prep")
    # FMAN: each sender in its upstream channel's PE, each receiver in its downstream channel's
    pe_of = plan.pe_of
    for c in range(2):
        assert pe_of[f"desk__xsplit{c}"] == pe_of[f"per_acct__{c}"]
    for d in range(3):
        assert pe_of[f"desk__xmerge{d}"] == pe_of[f"per_sym__{d}"]
    back = Plan.from_json(json.loads(json.dumps(doc)))
    assert back.regions == plan.regions
    check_plan(back, g)
    api.build("tests/apps/exchange.py", "manual", {"case": "keyed", "tuples": "100", "wprep": "2", "wdesk": "3"},
              out=tmp_path / "b")
    text = explain_text(tmp_path / "b")
    assert "region 'desk': width 3, key exchange from region 'prep'" in text
    assert "region 'prep': width 2, hash of acct, no merge (its channels send to region 'desk' by key exchange)" in text
    assert "xsplit   desk__xsplit0 in pe" in text and "xmerge   desk__xmerge0 in pe" in text


def test_no_exchange_at_width_1_on_either_side_and_none_and_fall_default_to_width_1():
    for wprep, wdesk in ((1, 3), (2, 1), (1, 1)):
        rs = resolve_regions(_graph(wprep=wprep, wdesk=wdesk), None, declared_widths=True)
        assert all(r.fed != EXCHANGE and not r.after for r in rs)
    assert all(r.width == 1 and r.fed != EXCHANGE for r in resolve_regions(_graph(), None))
    # a static-rate upstream region is numbered for the exchange, and back to static without it
    rs = {r.name: r for r in resolve_regions(_graph("static"), None, declared_widths=True)}
    assert (rs["prep"].ordering, rs["desk"].fed) == ("dynamic", EXCHANGE)
    rs = {r.name: r for r in resolve_regions(_graph("static", wdesk=1), None, declared_widths=True)}
    assert (rs["prep"].ordering, rs["desk"].fed) == ("static", "split")


def _two_regions(window=None, also=False, src_region=False, connector=None) -> App:
    a = App("t")
    s = (a.source("src", SCHEMA, connector=connector) if connector
         else a.source("src", SCHEMA, generator=replay, args={"rows": []}))
    f = a.functor("f", s, filter="v > 1")
    g = a.aggregate("g", f, window=count_window(2), by=["k"],
                    output={"k": "k", "j": "last(j)", "ts": "last(ts)", "v:int": "sum(v)"})
    h = a.aggregate("h", g, window=window or count_window(3), by=["j"],
                    output={"j": "j", "n": "count()"})
    a.sink("out", h)
    if also:
        a.sink("tap", g)
    a.parallel(*(["src"] if src_region else []), "f", "g", width=2, name="up")
    a.parallel("h", width=2, name="down")
    return a


def test_what_refuses_an_exchange_keeps_merge_and_split_and_says_why():
    # an upstream region led by a partitioned broker source: arrival order, no numbers
    arrival = _two_regions(connector=redis_source(["a", "b", "c"], partitioned_by="k"), src_region=True).build()
    rs = resolve_regions(arrival, None, declared_widths=True)
    up, down = sorted(rs, key=lambda r: r.name != "up")
    assert up.ordering == "arrival" and down.fed == "split"
    why = exchange_problem(arrival, up, down)
    assert "led by partitioned source 'src'" in why and "carry no sequence numbers" in why
    (doc,) = exchanges_json(arrival, rs)
    assert doc["from"] == "up" and doc["to"] == "down" and not doc["exchange"] and "arrival" in doc["why"]
    kinds = [op.kind for op in physical_graph(arrival, rs).operators]
    assert "exchange_split" not in kinds and kinds.count("fission_merge") == 2 and kinds.count("fission_split") == 1
    # an event-time window downstream (refused until 2026-11-28): every sender sends its
    # watermark frames, every receiver orders them (plan.eventtime)
    timed = _two_regions(window=time_window("ts", 10)).build()
    rs = resolve_regions(timed, None, declared_widths=True)
    down = next(r for r in rs if r.name == "down")
    assert down.fed == EXCHANGE and exchange_problem(timed, feeding_region(timed, rs, down), down) is None
    phys = physical_graph(timed, rs)
    assert phys.op("down__xsplit0").params.clock[0] == "ts" and phys.op("down__xmerge1").params.clocked
    assert "down__split" not in phys.by_name and "up__merge" not in phys.by_name
    # the upstream output also feeds another operator, which needs the merge
    tap = _two_regions(also=True).build()
    rs = resolve_regions(tap, None, declared_widths=True)
    down = next(r for r in rs if r.name == "down")
    assert down.fed == "split"
    assert "also feeds tap.in" in exchange_problem(tap, feeding_region(tap, rs, down), down)
    # the plain case is an exchange
    rs = resolve_regions(_two_regions().build(), None, declared_widths=True)
    assert next(r for r in rs if r.name == "down").fed == EXCHANGE


def test_a_plan_that_claims_an_exchange_it_cannot_have_is_refused():
    g = _two_regions(also=True).build()
    plan = plan_for(g, "manual")
    forged = dataclasses.replace(plan, regions=tuple(
        dataclasses.replace(r, fed=EXCHANGE, after="up") if r.name == "down" else r for r in plan.regions))
    with pytest.raises(PlanError, match="fed by an exchange from region 'up', but region 'up''s output .* also feeds"):
        check_plan(forged, g)
    # a plan that keeps merge and split between two exchange-able regions is honoured
    g = _graph()
    plan = plan_for(g, "manual")
    kept = dataclasses.replace(plan, regions=tuple(
        dataclasses.replace(r, fed="split", after="") for r in plan.regions))
    kinds = [op.kind for op in physical_graph(g, kept.regions).operators]
    assert "exchange_split" not in kinds and "fission_split" in kinds
    assert choose_exchanges(g, kept.regions) == plan.regions


def test_no_pe_holds_both_sides_of_a_key_exchange():
    """A PE of upstream channel c and downstream channel d sends to every receiver and
    hears every sender, so two such PEs send to each other: single-threaded PEs in a cycle
    with bounded queues deadlocked (YSB at 8 M events on 16 cores, 8 channels fused across
    the exchange). The physical graph keeps the sides apart, fusion refuses to mix them and
    check_plan refuses a plan that does."""
    from spadeopt.optimize.fatm import OperatorProfile, fuse_auto
    from spadeopt.optimize.fatm_problem import problem_for
    from spadeopt.optimize.legality import fusion_legal
    from spadeopt.optimize.problem import LinearCommModel

    g = _graph()
    plan = plan_for(g, "manual")
    phys = physical_graph(g, plan.regions)
    (before, after), = phys.annotations.apart
    assert {"desk__xsplit0", "desk__xsplit1", "per_acct__0", "per_acct__1"} <= set(before)
    assert {"desk__xmerge0", "desk__xmerge2", "per_sym__0", "per_sym__2"} <= set(after)
    names = [op.name for op in phys.operators]
    prof = OperatorProfile(g.name, phys.fingerprint, {n: 0.01 for n in names},
                           tuple((s.src.op, s.dst.op, 1000.0, 40.0) for s in phys.streams), 1000.0)
    problem = problem_for(phys, prof, LinearCommModel(1e-6, 1e-9), 0.9, 0.1)
    verdict = fusion_legal(frozenset({"per_acct__0", "desk__xsplit0"}), frozenset({"desk__xmerge0", "per_sym__0"}),
                           problem)
    assert not verdict.ok and "both sides of a key exchange" in verdict.reason
    assert fusion_legal(frozenset({"per_acct__0"}), frozenset({"desk__xsplit0"}), problem).ok
    # a plan that fuses channel 0 across the exchange is refused, naming the PE and what to do
    pes = []
    for pe in plan.pes:
        ops = pe.operators
        if "desk__xmerge0" in ops:
            continue
        if "desk__xsplit0" in ops:
            merged = next(p for p in plan.pes if "desk__xmerge0" in p.operators)
            ops = (*ops, *merged.operators)
        pes.append(dataclasses.replace(pe, operators=ops))
    bad = dataclasses.replace(plan, pes=tuple(pes))
    with pytest.raises(PlanError, match="holds both sides of a key exchange .*different PEs"):
        check_plan(bad, g)
    # FATM on many cores keeps them apart too
    logical = [op.name for op in g.operators]
    lprof = OperatorProfile(g.name, g.fingerprint, {n: 0.2 for n in logical},
                            tuple((s.src.op, s.dst.op, 1000.0, 40.0) for s in g.streams), 1000.0)
    auto = fuse_auto(g, lprof, LinearCommModel(1e-6, 1e-9), 1, 16, rate="max")
    check_plan(auto.plan, g)
    aphys = physical_graph(g, auto.plan.regions)
    for before, after in aphys.annotations.apart:
        assert not {auto.plan.pe_of[o] for o in before} & {auto.plan.pe_of[o] for o in after}
