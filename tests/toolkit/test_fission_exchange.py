"""Key exchanges between two parallel regions (issue 27 item 4, second part), end to end
in this process: the generated exchange splits at the end of the upstream channels and
exchange merges at the head of the downstream ones, simulated deliveries (random batch
boundaries, random interleavings between PEs). Every pair of widths gives the width-1
rows in the width-1 order, under every fusion; a merge that does not wait for every
upstream channel's number gives another answer."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spadeopt import App, count_window
from spadeopt.model.graph import PortRef
from spadeopt.plan.fission import physical_graph
from spadeopt.plan.regions import resolve_regions
from spadeopt.runtime import merges as rt_fission
from tests.apps.exchange import SCHEMA, build, rows_in_splits
from tests.toolkit.gens import replay
from tests.toolkit.harness import simulate

CASES = ("source", "keyed", "static", "join", "joined")


def records(n: int, seed: int, accounts: int = 6, symbols: int = 5) -> list[tuple]:
    r = random.Random(seed)
    return [(i, r.randrange(accounts), r.randrange(symbols), r.randrange(1, 60), round(r.uniform(1, 9), 2))
            for i in range(n)]


def exchange_app(data: list[tuple], case: str, split: int = 5) -> App:
    """``tests/apps/exchange.py``'s regions over ``data``; ``join``: region ``prep`` split by
    account holds a join of the stream's two halves (several matches per probe, so several
    rows share an upstream number), region ``desk`` counts per symbol; ``joined``: region
    ``prep`` led by the source and stateless, region ``desk`` joins the stream's two halves
    per symbol (its join packs the exchange's numbers) and counts per symbol."""
    a = App("xch")
    if case == "joined":
        src = a.source("src", SCHEMA, generator=rows_in_splits, args={"rows": data, "split": split})
        f = a.functor("clean", src, filter="qty % 5 != 1")
        buy, sell = a.split("side", f, predicates=["qty % 2 == 0", "qty % 2 == 1"])
        m = a.join("pair", buy, sell, on="sym", order="id", window=(count_window(3), count_window(2)),
                   output={"id": "left.id", "sym": "left.sym", "qty:int": "left.qty * 1000 + right.qty"})
        g = a.aggregate("per_sym", m, window=count_window(2), by=["sym"],
                        output={"sym": "sym", "id": "last(id)", "n": "count()", "qty:int": "sum(qty)"})
        a.sink("sink", g)
        a.parallel("src", "clean", width=2, name="prep")
        a.parallel("side", "pair", "per_sym", width=2, name="desk")
        return a
    if case in ("source", "static"):
        src = a.source("src", SCHEMA, generator=rows_in_splits, args={"rows": data, "split": split})
    else:
        src = a.source("src", SCHEMA, generator=replay, args={"rows": data})
    if case != "join":
        build(a, src, case, 2, 2, "src")
        return a
    buy, sell = a.split("side", src, predicates=["qty % 2 == 0", "qty % 2 == 1"])
    m = a.join("pair", buy, sell, on="acct", order="id", window=(count_window(0), count_window(3)),
               output={"id": "left.id", "acct": "left.acct", "sym": "right.sym", "qty:int": "left.qty + right.qty",
                       "px": "right.px"})
    g = a.aggregate("per_sym", m, window=count_window(2), by=["sym"],
                    output={"sym": "sym", "id": "last(id)", "n": "count()", "qty:int": "sum(qty)"})
    a.sink("sink", a.functor("fmt", g, filter="qty % 3 != 0"))
    a.parallel("side", "pair", width=2, name="prep")
    a.parallel("per_sym", "fmt", width=2, name="desk")
    return a


@pytest.mark.parametrize("case", CASES)
def test_the_regions_are_joined_by_an_exchange_at_widths_above_one(case):
    g = exchange_app(records(20, 1), case).build()
    regions = {r.name: r for r in resolve_regions(g, {"prep": 3, "desk": 2})}
    assert (regions["desk"].fed, regions["desk"].after, regions["desk"].routing) == ("exchange", "prep", "exchange_hash")
    assert regions["prep"].ordering == "dynamic"  # numbered for the exchange, even when static-rate
    phys = physical_graph(g, tuple(regions.values()))
    kinds = [op.kind for op in phys.operators]
    assert kinds.count("exchange_split") == 3 and kinds.count("exchange_merge") == 2
    assert "prep__merge" not in phys.by_name and "desk__split" not in phys.by_name
    assert kinds.count("fission_merge") == 1  # desk's, before the sink
    # each sender sends to every receiver; each receiver feeds its channel's first operator
    for c in range(3):
        assert [str(d) for d in phys.subscribers(PortRef(f"desk__xsplit{c}", "out0"))] == [f"desk__xmerge0.in{c}"]
    first = "side" if case == "joined" else "per_sym"
    assert [str(d) for d in phys.subscribers(PortRef("desk__xmerge1", "out"))] == [f"{first}__1.in"]
    chans = [c for group in phys.annotations.channels for c in group]
    assert next(c for c in chans if "desk__xmerge0" in c)[:2] == ("desk__xmerge0", f"{first}__0")
    # width 1 on either side: merge and split as before
    for widths in ({"prep": 1, "desk": 3}, {"prep": 3, "desk": 1}):
        rs = resolve_regions(g, widths)
        assert all(r.fed != "exchange" for r in rs)
        assert "exchange_merge" not in [op.kind for op in physical_graph(g, rs).operators]


@pytest.mark.parametrize("case", CASES)
def test_every_pair_of_widths_gives_the_width_1_rows(case, tmp_path_factory):
    app = exchange_app(records(300, 7), case)
    base = simulate(app, "all", tmp_path_factory.mktemp("w1"), widths={"prep": 1, "desk": 1}, chunks=[13])
    assert len(base["sink"]) > 10
    for w1, w2 in ((2, 2), (3, 2), (2, 4), (4, 3)):
        for fusion in ("none", "all", "mixed"):
            got = simulate(app, fusion, tmp_path_factory.mktemp(f"w{w1}{w2}"), seed=w1 * 7 + w2,
                           widths={"prep": w1, "desk": w2}, chunks=[5, 17, 2])
            assert got == base, (case, w1, w2, fusion)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.sampled_from(CASES), n=st.integers(0, 160), seed=st.integers(0, 10**6),
       w1=st.integers(1, 4), w2=st.integers(1, 4), split=st.integers(1, 9),
       chunks=st.lists(st.integers(1, 40), min_size=1, max_size=3), fusion=st.sampled_from(["none", "all", "mixed"]),
       accounts=st.integers(1, 8), symbols=st.integers(1, 8))
def test_random_records_at_random_widths_match_width_1(tmp_path_factory, case, n, seed, w1, w2, split, chunks,
                                                      fusion, accounts, symbols):
    app = exchange_app(records(n, seed, accounts, symbols), case, split)
    base = simulate(app, "all", tmp_path_factory.mktemp("w1"), widths={"prep": 1, "desk": 1}, chunks=chunks)
    got = simulate(app, fusion, tmp_path_factory.mktemp("wx"), seed=seed, widths={"prep": w1, "desk": w2},
                   chunks=chunks)
    assert got == base


class _ArrivalMerge(rt_fission.ExchangeMerge):
    """Wrong: passes each upstream channel's tuples on as they come (no merge by number)."""

    def push(self, channel, batch):
        if len(batch[-1]) == 1:
            batch = batch[:-1]
        return [*batch, (0,)] if batch else []


class _OwnFloorMerge(rt_fission.ExchangeMerge):
    """Wrong: releases up to the *largest* channel mark instead of the smallest, so it does
    not wait for a slow upstream channel's numbers."""

    def _take(self):
        marks = [(q[-1][-1] if len(q) > h else f) for q, h, f, live in
                 zip(self.queues, self.heads, self.floor, self.live, strict=True) if live]
        if not marks:
            return super()._take()
        mark = max(marks)
        out = sorted((t for q, h in zip(self.queues, self.heads, strict=True) for t in q[h:] if t[-1] <= mark),
                     key=lambda t: t[-1])
        for i, q in enumerate(self.queues):
            self.queues[i] = [t for t in q[self.heads[i]:] if t[-1] > mark]
            self.heads[i] = 0
        return out, mark


@pytest.mark.parametrize("wrong", [_ArrivalMerge, _OwnFloorMerge])
def test_a_merge_that_does_not_wait_for_every_upstream_number_gives_another_answer(wrong, tmp_path_factory,
                                                                                  monkeypatch):
    app = exchange_app(records(400, 3), "keyed")
    base = simulate(app, "all", tmp_path_factory.mktemp("w1"), widths={"prep": 1, "desk": 1}, chunks=[7])
    good = simulate(app, "none", tmp_path_factory.mktemp("ok"), seed=5, widths={"prep": 3, "desk": 2}, chunks=[7])
    assert good == base
    monkeypatch.setattr(rt_fission, "ExchangeMerge", wrong)
    bad = [simulate(app, "none", tmp_path_factory.mktemp("bad"), seed=s, widths={"prep": 3, "desk": 2}, chunks=[7])
           for s in range(3)]
    assert any(b != base for b in bad)


def test_numbering_without_the_index_of_rows_sharing_a_number_gives_another_answer(tmp_path_factory, tmp_path,
                                                                                   monkeypatch):
    """The join in region ``prep`` emits several matches per probe, all numbered alike; an
    exchange split that renumbers them ``n << bits`` without their index makes ties that
    the downstream merge breaks by channel, not by the width-1 order."""
    import dataclasses

    from spadeopt.codegen.render import template_dir
    from spadeopt.kinds import KINDS

    app = exchange_app(records(300, 7), "join")
    base = simulate(app, "all", tmp_path_factory.mktemp("w1"), widths={"prep": 1, "desk": 1}, chunks=[13])
    text = (template_dir() / "ops" / "exchange_split.py.j2").read_text()
    wrong = text.replace("((s << {{ c.bits }}) | i,)", "((s << {{ c.bits }}),)")
    assert wrong.count("c.bits }}),)") == 3  # the hash, clock and round-robin branches
    path = tmp_path / "exchange_split_no_index.py.j2"
    path.write_text(wrong)
    monkeypatch.setitem(KINDS, "exchange_split", dataclasses.replace(KINDS["exchange_split"], template=str(path)))
    bad = [simulate(app, f, tmp_path_factory.mktemp("bad"), seed=w1 * 7 + w2, widths={"prep": w1, "desk": w2},
                    chunks=[5, 17, 2]) for w1, w2 in ((2, 2), (3, 2), (2, 4)) for f in ("none", "all")]
    assert any(b != base for b in bad)


def chain_app(data: list[tuple], split: int = 4) -> App:
    """Three regions, two exchanges: the source's splits (filter), per account, per symbol."""
    a = App("xchain")
    src = a.source("src", SCHEMA, generator=rows_in_splits, args={"rows": data, "split": split})
    f = a.functor("clean", src, filter="qty % 4 != 1")
    p = a.aggregate("per_acct", f, window=count_window(2), by=["acct"],
                    output={"id": "last(id)", "acct": "acct", "sym": "last(sym)", "qty:int": "sum(qty)"})
    g = a.aggregate("per_sym", p, window=count_window(2), by=["sym"],
                    output={"sym": "sym", "id": "last(id)", "n": "count()", "qty:int": "sum(qty)"})
    a.sink("sink", g)
    a.parallel("src", "clean", width=2, name="a")
    a.parallel("per_acct", width=2, name="b")
    a.parallel("per_sym", width=2, name="c")
    return a


def test_a_chain_of_two_exchanges_matches_width_1(tmp_path_factory):
    app = chain_app(records(300, 11))
    g = app.build()
    rs = {r.name: r for r in resolve_regions(g, {"a": 2, "b": 3, "c": 2})}
    assert (rs["b"].fed, rs["b"].after, rs["c"].fed, rs["c"].after) == ("exchange", "a", "exchange", "b")
    phys = physical_graph(g, tuple(rs.values()))
    assert [op.kind for op in phys.operators].count("fission_merge") == 1
    assert not {"a__merge", "b__split", "b__merge", "c__split"} & set(phys.by_name)
    base = simulate(app, "all", tmp_path_factory.mktemp("w1"), widths={"a": 1, "b": 1, "c": 1}, chunks=[9])
    assert len(base["sink"]) > 10
    for widths in ({"a": 2, "b": 3, "c": 2}, {"a": 4, "b": 2, "c": 3}, {"a": 3, "b": 1, "c": 4}):
        for fusion in ("none", "all", "mixed"):
            got = simulate(app, fusion, tmp_path_factory.mktemp("wx"), seed=sum(widths.values()), widths=widths,
                           chunks=[4, 11])
            assert got == base, (widths, fusion)
