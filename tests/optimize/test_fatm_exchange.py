"""FATM and key exchanges (issue 27 item 4, second part): the profile maps onto the
exchange's senders and receivers, FATM plans two adjacent widened regions with an
exchange between them (declared or discovered), --no-fission keeps width 1."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from spadeopt import App
from spadeopt.optimize.fatm import OperatorProfile, fuse_auto
from spadeopt.optimize.predict import DEFAULT_MODEL
from spadeopt.optimize.problem import LinearCommModel
from spadeopt.optimize.widths import physical_profile
from spadeopt.plan.explain import fission_text
from spadeopt.plan.fission import physical_graph
from spadeopt.plan.plan import check_plan
from spadeopt.plan.regions import EXCHANGE, resolve_regions
from tests.apps.exchange import SCHEMA, build, exchange, trades

COMM = LinearCommModel(2e-6, 1e-9)


def _profile(graph, heavy: dict[str, float], rate: float = 1000.0) -> OperatorProfile:
    load = {op.name: heavy.get(op.name, 0.01) for op in graph.operators}
    links = tuple((s.src.op, s.dst.op, rate, 60.0) for s in graph.streams)
    return OperatorProfile(graph.name, graph.fingerprint, load, links, rate)


@pytest.fixture(scope="module")
def keyed():
    return exchange.build({"case": "keyed", "tuples": "100"})


def test_the_profile_maps_onto_senders_and_receivers(keyed):
    prof = _profile(keyed, {"per_acct": 0.4, "per_sym": 0.4})
    regions = resolve_regions(keyed, {"prep": 3, "desk": 2})
    assert next(r for r in regions if r.name == "desk").fed == EXCHANGE
    phys = physical_graph(keyed, regions)
    pprof = physical_profile(keyed, prof, regions)
    assert pprof.fingerprint == phys.fingerprint
    assert set(pprof.load) == {op.name for op in phys.operators}
    assert Counter((a, b) for a, b, _, _ in pprof.links) == Counter((s.src.op, s.dst.op) for s in phys.streams)
    rate = {(a, b): r for a, b, r, _ in pprof.links}
    for c in range(3):  # each upstream channel sends a third of the stream, half of it to each receiver
        assert rate[(f"per_acct__{c}", f"desk__xsplit{c}")] == pytest.approx(1000 / 3)
        assert rate[(f"desk__xsplit{c}", "desk__xmerge1")] == pytest.approx(1000 / 6)
        assert pprof.load[f"desk__xsplit{c}"] == pytest.approx(1000 / 3 * DEFAULT_MODEL.split_dynamic_s)
    for d in range(2):
        assert rate[(f"desk__xmerge{d}", f"per_sym__{d}")] == pytest.approx(500)
        assert pprof.load[f"desk__xmerge{d}"] == pytest.approx(500 * DEFAULT_MODEL.merge_dynamic_s)
    assert "prep__merge" not in pprof.load and "desk__split" not in pprof.load


def _planned_with_exchange(graph, prof, up: str, down: str):
    """FATM's plan of ``graph``, checked to widen ``up`` and ``down`` with an exchange between."""
    auto = fuse_auto(graph, prof, COMM, nodes=1, cores=4, rate="max")
    rs = {r.name: r for r in auto.plan.regions}
    assert rs[up].width > 1 and rs[down].width > 1
    assert (rs[down].fed, rs[down].after) == (EXCHANGE, up)
    check_plan(auto.plan, graph)
    return auto


def test_fatm_plans_two_widened_regions_with_an_exchange_and_no_fission_keeps_width_1(keyed):
    prof = _profile(keyed, {"per_acct": 0.6, "per_sym": 0.6})
    auto = _planned_with_exchange(keyed, prof, "prep", "desk")
    assert auto.explain["fission"]["exchanges"] == [{"from": "prep", "to": "desk", "exchange": True}]
    assert ("regions 'prep' -> 'desk': key exchange (channel to channel, no merge and split between them)"
            in fission_text(auto.explain["fission"]))
    assert "desk__xmerge0" in auto.plan.pe_of and "prep__merge" not in auto.plan.pe_of
    # every vector FATM scored was planned as it would run: none failed to map
    assert all(v["planned_rate"] is not None for v in auto.explain["fission"]["search"]["vectors"])
    off = fuse_auto(keyed, prof, COMM, nodes=1, cores=4, rate="max", fission=False)
    assert all(r.width == 1 and r.fed != EXCHANGE for r in off.plan.regions)


def test_fatm_puts_an_exchange_between_discovered_regions():
    """The per-account window is the heavier (the early-stopping coordinate ascent widens
    one region at a time, so two equally heavy neighbours would each buy nothing alone)."""
    a = App("exd")
    src = a.source("trades", SCHEMA, generator=trades, args={"n": 100, "split": 50})
    build(a, src, "keyed", 2, 2, "trades")
    g = a.build()
    g = dataclasses.replace(g, annotations=dataclasses.replace(g.annotations, parallel=()))
    _planned_with_exchange(g, _profile(g, {"per_acct": 0.9, "per_sym": 0.5}), "auto_per_acct", "auto_per_sym")


def test_explain_json_with_exchanges_is_read_back_and_a_bad_record_is_named(keyed, tmp_path):
    import json

    from spadeopt.plan.artefacts import ArtefactError, read_explain

    auto = fuse_auto(keyed, _profile(keyed, {"per_acct": 0.6, "per_sym": 0.6}), COMM, nodes=1, cores=4, rate="max")
    path = tmp_path / "explain.json"
    path.write_text(json.dumps(auto.explain))
    assert read_explain(path)["fission"]["exchanges"][0]["exchange"] is True
    auto.explain["fission"]["exchanges"][0]["exchange"] = "yes"
    path.write_text(json.dumps(auto.explain))
    with pytest.raises(ArtefactError, match="exchanges"):
        read_explain(path)
