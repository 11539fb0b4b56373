"""The physical graphs of FATM's width search share what does not depend on the vector
(issue 36, 200 operators on 64 cores): a region's channel copies at one width are made
once per logical graph (``plan.fission.channel_copies``) and every physical graph gets
its fingerprint from what it is rewritten from, exchanges included, instead of hashing
thousands of copies. The graphs are the ones built without the memo, field for field."""

from __future__ import annotations

from dataclasses import replace

from spadeopt.bench.fatm_speed import chain_app
from spadeopt.model.graph import AppGraph
from spadeopt.plan.fission import physical_graph
from spadeopt.plan.regions import EXCHANGE, Region, choose_exchanges, resolve_regions
from tests.apps.exchange import exchange


def _regions(graph, widths):
    regions = resolve_regions(graph, widths)
    return choose_exchanges(graph, tuple(replace(r, width=widths.get(r.name, r.width)) for r in regions))


def _same(a, b) -> None:
    assert a.operators == b.operators and a.streams == b.streams and a.annotations == b.annotations


def test_vectors_sharing_a_region_width_share_its_channel_copies_and_equal_fresh_builds():
    g = chain_app(40)
    reg = _regions(g, {"reg": 3})
    at3 = physical_graph(g, reg)
    _same(at3, physical_graph(replace(g), reg))  # a fresh graph, no memo: built anew, equal
    names = [Region.channel_op(o, c) for r in reg for o in r.operators for c in range(3)]
    assert len(names) == 30
    for key in [k for k in g.memo if k != "channel_copies"]:
        del g.memo[key]  # the physical graphs go; the channel copies stay
    rebuilt = physical_graph(g, reg)
    assert rebuilt is not at3
    _same(rebuilt, at3)
    assert all(rebuilt.op(n) is at3.op(n) for n in names), "the copies at width 3 are made once"
    at5 = physical_graph(g, _regions(g, {"reg": 5}))
    assert not any(at5.op(n) is at3.op(n) for n in names), "another width, other copies"


def test_a_physical_graph_with_a_key_exchange_is_fingerprinted_without_hashing_its_operators(monkeypatch):
    g = exchange.build({"case": "keyed", "tuples": 100, "wprep": 2, "wdesk": 3})
    regions = _regions(g, {"prep": 2, "desk": 3})
    assert any(r.fed == EXCHANGE for r in regions)
    want = g.fingerprint
    hashed = []
    real = AppGraph.fingerprint_with
    monkeypatch.setattr(AppGraph, "fingerprint_with", lambda self, *a, **k: hashed.append(self) or real(self, *a, **k))
    phys = physical_graph(g, regions)
    assert phys.fingerprint != want and not hashed
    other = physical_graph(g, _regions(g, {"prep": 2, "desk": 4}))
    assert other.fingerprint != phys.fingerprint and not hashed
