"""Automatic regions (plan.discover): candidates from the graph alone, each legal per
plan.regions and maximal, every boundary with its operator and rule; and every plan of
discovered regions gives the width-1 sinks (simulated deliveries, under several fusions)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spadeopt import App, api, count_window
from spadeopt.errors import UsageError
from spadeopt.model.graph import AppGraph
from spadeopt.plan.discover import discover_regions
from spadeopt.plan.fission import physical_graph, rewrite_region
from spadeopt.plan.plan import make_plan
from spadeopt.plan.regions import Region, Shape, check_region
from spadeopt.toolkit.sources import counter
from tests.apps.loop import loop
from tests.apps.splits import numbered
from tests.toolkit import harness
from tests.toolkit.gens import replay

SCHEMA = "k:int, j:int, v:int, ts:int"


def rows(n: int, seed: int = 1) -> list[tuple]:
    x = seed
    out = []
    for i in range(n):
        x = (x * 1103515245 + 12345) % 2**31
        out.append((x % 5, (x >> 4) % 3, (x >> 8) % 100, i))
    return out


def ops_of(found) -> list[tuple[str, tuple[str, ...]]]:
    return [(c.region.name, c.region.operators) for c in found.candidates]


def reasons(found, region: str) -> dict[str, str]:
    (c,) = [c for c in found.candidates if c.region.name == region]
    return {b.outside: b.reason for b in c.boundaries}


def legal(graph: AppGraph, ops) -> bool:
    order = {op.name: i for i, op in enumerate(graph.operators)}
    ops = tuple(sorted(set(ops), key=order.__getitem__))
    try:
        shape = check_region(graph, "probe", ops)
        rewrite_region(graph, Region("probe", ops, 2, shape.key, shape.ordering, shape.fed))
    except UsageError:
        return False
    return True


def test_a_chain_is_one_region_cut_at_a_plain_source_and_a_file_sink():
    a = App("c")
    s = a.source("src", SCHEMA, generator=replay, args={"rows": rows(10)})
    for i in range(3):
        s = a.functor(f"f{i}", s, filter="v >= 0" if i == 1 else None)
    a.sink("out", s)
    found = discover_regions(a.build())
    assert ops_of(found) == [("auto_f0", ("f0", "f1", "f2"))]
    why = reasons(found, "auto_f0")
    assert "not splittable" in why["src"] and "file sink" in why["out"]
    assert found.candidates[0].region.ordering == "dynamic"  # a filter: sequence numbers
    assert [o for o, _ in found.outside] == ["src", "out"]


def test_a_splittable_source_and_a_counting_sink_join_the_region():
    graph, _ = api.load_graph("apps/peer_auto.py", {"tuples": "100", "n": "16"})
    (c,) = discover_regions(graph).candidates
    assert c.region.operators == ("src", *(f"f{i}" for i in range(16)), "sink")
    assert c.region.fed == "source" and c.region.ordering == "static" and c.boundaries == ()


def test_a_stateful_operator_cuts_and_each_side_is_a_region():
    a = App("s")
    s = a.functor("pre", a.source("src", SCHEMA, generator=replay, args={"rows": rows(10)}))
    g = a.aggregate("tot", s, window=count_window(3), output={"k": "last(k)", "j": "last(j)", "v": "sum(v)",
                                                                "ts": "last(ts)"})
    a.sink("out", a.functor("post", g), mode="count")
    found = discover_regions(a.build())
    assert ops_of(found) == [("auto_pre", ("pre",)), ("auto_post", ("post", "out"))]
    assert "stateful" in reasons(found, "auto_pre")["tot"] and "stateful" in reasons(found, "auto_post")["tot"]


def test_incompatible_keys_cut_between_two_keyed_regions():
    a = App("keys")
    s = a.source("src", SCHEMA, generator=replay, args={"rows": rows(10)})
    g1 = a.aggregate("byk", s, window=count_window(2), by=["k"],
                     output={"k": "k", "j": "last(j)", "v": "sum(v)", "ts": "last(ts)"})
    f = a.functor("mid", g1)
    g2 = a.aggregate("byj", f, window=count_window(2), by=["j"],
                     output={"k": "last(k)", "j": "j", "v": "sum(v)", "ts": "last(ts)"})
    a.sink("out", g2)
    found = discover_regions(a.build())
    assert ops_of(found) == [("auto_byk", ("byk", "mid")), ("auto_byj", ("byj",))]
    assert found.candidates[0].region.key == ("k",) and found.candidates[1].region.key == ("j",)
    assert "do not intersect" in reasons(found, "auto_byk")["byj"]
    assert "formed first" in reasons(found, "auto_byj")["mid"] or "intersect" in reasons(found, "auto_byj")["mid"]


def test_a_diamond_joins_whole_though_no_half_of_it_is_legal():
    """a -> (b, c) -> join d: {a, b} has two exits, {a, b, c} too; only all four is legal,
    which growing one operator at a time cannot reach and the gallop does."""
    a = App("dia")
    s = a.source("src", SCHEMA, generator=replay, args={"rows": rows(30)})
    x = a.functor("a", s)
    b = a.functor("b", x, output={"k": "k", "ts": "ts", "bv": "v"})
    c = a.functor("c", x, output={"k": "k", "ts": "ts", "cv:int": "v * 2"})
    d = a.join("d", b, c, on="k", order="ts", window=(count_window(2), count_window(2)),
               output={"k": "left.k", "ts": "left.ts", "bv": "bv", "cv": "cv"})
    a.sink("out", d)
    graph = a.build()
    assert not legal(graph, ["a", "b"]) and not legal(graph, ["a", "b", "c"])
    found = discover_regions(graph)
    assert ops_of(found) == [("auto_a", ("a", "b", "c", "d"))]
    assert found.candidates[0].region.key == ("k",)


def test_a_feedback_loop_is_never_in_a_region():
    graph = loop.build({"tuples": 10})
    found = discover_regions(graph)
    assert found.candidates == ()
    why = dict(found.outside)
    assert "feedback loop" in why["echo"] and "stateful" in why["tag"]


def test_a_declared_region_pins_its_operators_and_the_rest_is_discovered():
    a = App("pin")
    s = a.source("src", SCHEMA, generator=replay, args={"rows": rows(10)})
    for i in range(4):
        s = a.functor(f"f{i}", s)
    a.sink("out", s, mode="count")
    a.parallel("f1", "f2", width=2, name="mine")
    graph = a.build()
    found = discover_regions(graph, exclude=["f1", "f2"], taken=["mine"])
    assert ops_of(found) == [("auto_f0", ("f0",)), ("auto_f3", ("f3", "out"))]
    assert "declared region 'mine'" in reasons(found, "auto_f0")["f1"]


def test_discovery_depends_on_the_graph_only():
    g, _ = api.load_graph("apps/bargain.py")
    assert discover_regions(g).to_json() == discover_regions(g).to_json()


# ---- properties on random graphs -------------------------------------------------------

AGG_OUT = {"k": {"k": "k", "j": "last(j)", "v": "sum(v)", "ts": "last(ts)"},
           "j": {"k": "last(k)", "j": "j", "v": "sum(v)", "ts": "last(ts)"},
           "": {"k": "last(k)", "j": "last(j)", "v": "sum(v)", "ts": "last(ts)"}}


@st.composite
def random_apps(draw, sinks=("count", "file"), union: bool = True) -> App:
    """A random DAG over ``k, j, v, ts`` streams: functors (pass, filter, recompute,
    overwrite a key), keyed and unkeyed count-window aggregates, joins on k, unions, a
    predicate split; a plain or splittable source; every loose stream to a file or
    counting sink."""
    a = App("rnd")
    split_src = draw(st.booleans())
    if split_src:
        s0 = a.source("src", "id:int, k:int, v:float", generator=numbered, args={"n": 200, "split": 9})
        streams = [a.functor("conv", s0, output={"k": "k", "j:int": "id % 3", "v:int": "int(v)", "ts": "id"})]
    else:
        streams = [a.source("src", SCHEMA, generator=replay, args={"rows": rows(60, draw(st.integers(1, 99)))})]
    used: set[int] = set()
    for i in range(draw(st.integers(1, 9))):
        pick = draw(st.integers(0, len(streams) - 1))
        inp = streams[pick]
        used.add(pick)
        kind = draw(st.sampled_from(["pass", "filter", "calc", "rekey", "aggk", "aggj", "agg", "join", "split",
                                     *(["union"] if union else [])]))
        name = f"o{i}"
        if kind == "pass":
            streams.append(a.functor(name, inp))
        elif kind == "filter":
            streams.append(a.functor(name, inp, filter="v % 3 != 0"))
        elif kind == "calc":
            streams.append(a.functor(name, inp, output={"k": "k", "j": "j", "v:int": "v * 2 + 1", "ts": "ts"}))
        elif kind == "rekey":
            streams.append(a.functor(name, inp, output={"k:int": "(k + v) % 5", "j": "j", "v": "v", "ts": "ts"}))
        elif kind in ("aggk", "aggj", "agg"):
            by = {"aggk": ["k"], "aggj": ["j"], "agg": []}[kind]
            streams.append(a.aggregate(name, inp, window=count_window(draw(st.integers(1, 3))), by=by,
                                       output=AGG_OUT[by[0] if by else ""]))
        elif kind == "split":
            lo, hi = a.split(name, inp, predicates=["v % 2 == 0", "v % 2 == 1"])
            streams += [lo, hi]
        else:
            other_pick = draw(st.integers(0, len(streams) - 1))
            used.add(other_pick)
            other = streams[other_pick]
            if kind == "union":
                streams.append(a.union(name, [inp, other]))
            else:
                streams.append(a.join(name, inp, other, on="k", order="ts",
                                      window=(count_window(1), count_window(2)),
                                      output={"k": "left.k", "j": "left.j", "v:int": "left.v + right.v",
                                              "ts": "left.ts"}))
    for i, s in enumerate(streams):
        if i not in used:
            a.sink(f"sink{i}", s, mode=draw(st.sampled_from(sinks)))
    return a


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_apps())
def test_every_discovered_region_is_legal_disjoint_and_maximal(app):
    graph = app.build()
    found = discover_regions(graph)
    owner: dict[str, str] = {}
    for c in found.candidates:
        r = c.region
        assert legal(graph, r.operators), r
        shape = check_region(graph, r.name, r.operators)
        assert (shape.key, shape.ordering, shape.fed) == (r.key, r.ordering, r.fed)
        for o in r.operators:
            assert o not in owner, f"{o} in {owner.get(o)} and {r.name}"
            owner[o] = r.name
    near = {}
    for s in graph.streams:
        near.setdefault(s.src.op, set()).add(s.dst.op)
        near.setdefault(s.dst.op, set()).add(s.src.op)
    for c in found.candidates:
        ops = set(c.region.operators)
        outside = {n for o in ops for n in near.get(o, ())} - ops
        assert {b.outside for b in c.boundaries} == outside
        for n in outside - set(owner):
            assert not legal(graph, [*ops, n]), f"{c.region.name} + {n} is legal: not maximal"


# ---- answers: every plan of discovered regions gives the width-1 sinks -------------------


def discovered_plan(graph: AppGraph, width: int, fusion: str):
    regions = tuple(Region(r.name, r.operators, width, r.key, r.ordering, r.fed)
                    for r in discover_regions(graph).regions)
    phys = physical_graph(graph, regions)
    names = [op.name for op in phys.operators]
    apart = {frozenset((a, b)) for group in phys.annotations.exlocate for a in group for b in group if a != b}
    if fusion == "none":
        groups = [[n] for n in names]
    else:  # all: as few PEs as the exlocations allow; mixed: consecutive pairs, split where exlocated
        size = len(names) if fusion == "all" else 2
        groups = []
        for n in names:  # the first group it may join (an exchange in front of a join side or a window
            # keeps each channel's part before it apart from its part after it: decisions 035, 067)
            fit = [g for g in groups if len(g) < size and not any(frozenset((n, m)) in apart for m in g)]
            if fit:
                fit[0].append(n)
            else:
                groups.append([n])
    return make_plan(graph, "auto", groups, [0] * len(groups), 1, 2, regions=regions)


def simulate_plan(graph, plan, out_dir, seed, chunks, monkeypatch):
    """harness.simulate with this plan (it picks the plan through harness.plan)."""
    with monkeypatch.context() as m:
        m.setattr(harness, "plan", lambda g, fusion, widths=None: plan)
        return harness.simulate(graph, "all", out_dir, seed=seed, chunks=chunks)


@pytest.mark.slow
@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(app=random_apps(sinks=("file",), union=False), seed=st.integers(0, 10**6), chunks=st.lists(st.integers(1, 30), min_size=1, max_size=3))
def test_every_automatic_plan_gives_the_width_1_sinks(tmp_path_factory, monkeypatch, app, seed, chunks):
    """File sinks only: the in-process harness has no counting sink inside a region (the
    run reports the channels' sum); those run on Spark (tests/e2e/test_discover_spark.py).
    No union: it interleaves in arrival order, which differs between fusions at width 1."""
    graph = app.build()
    base = simulate_plan(graph, discovered_plan(graph, 1, "all"), tmp_path_factory.mktemp("w1"), seed, chunks,
                         monkeypatch)
    for width in (2, 3, 4):
        for fusion in ("none", "all", "mixed"):
            p = discovered_plan(graph, width, fusion)
            got = simulate_plan(graph, p, tmp_path_factory.mktemp(f"w{width}{fusion}"), seed + width, chunks,
                                monkeypatch)
            assert got == base, (width, fusion)


def test_a_source_led_chain_gives_the_width_1_sinks_at_width_3(tmp_path, monkeypatch):
    a = App("srcled")
    s = a.source("src", "id:int, k:int, v:float", generator=numbered, args={"n": 500, "split": 16})
    for i in range(4):
        s = a.functor(f"f{i}", s, filter="id % 7 != 3" if i == 2 else None)
    a.sink("sink", s)
    graph = a.build()
    (r,) = discover_regions(graph).regions
    assert r.operators == ("src", "f0", "f1", "f2", "f3") and r.fed == "source"
    base = simulate_plan(graph, discovered_plan(graph, 1, "all"), tmp_path / "w1", 0, [7], monkeypatch)
    got = simulate_plan(graph, discovered_plan(graph, 3, "mixed"), tmp_path / "w3", 5, [7], monkeypatch)
    assert len(base["sink"]) == 500 - 71 and got == base


def test_a_deliberately_wrong_region_makes_the_comparison_fail(tmp_path, monkeypatch):
    """The check can fail: a region over a stateful aggregate (not discovered, forced
    past the legality check) changes the sinks at width 2."""
    a = App("wrong")
    s = a.source("src", "seq:int, payload:bytes", generator=counter, args={"n": 300, "size": 20})
    g = a.aggregate("tot", s, window=count_window(5), output={"n": "count()", "last:int": "last(seq)"})
    a.sink("out", g)
    graph = a.build()
    regions = (Region("bad", ("tot",), 2, (), "dynamic", "split"),)
    monkeypatch.setattr("spadeopt.plan.fission.check_region", lambda gr, name, ops: _shape_ignoring_state(gr, ops))
    names = [op.name for op in physical_graph(graph, regions).operators]
    plan = make_plan(graph, "auto", [names], [0], 1, 2, regions=regions)
    base = simulate_plan(graph, discovered_plan(graph, 1, "all"), tmp_path / "w1", 0, [7], monkeypatch)
    got = simulate_plan(graph, plan, tmp_path / "bad", 0, [7], monkeypatch)
    assert got != base


def _shape_ignoring_state(graph, ops):

    (entry,) = [s for s in graph.streams if s.dst.op in ops and s.src.op not in ops]
    (exit_,) = sorted({s.src for s in graph.streams if s.src.op in ops and s.dst.op not in ops})
    return Shape(entry, exit_, (), "dynamic")


# ---- check_region's index (region_index.RegionIndex) changes no verdict -----------------------
# The index prunes two walks with the graph's strongly connected components (the
# feedback-loop walk skips what comes after every target; the inner-loop check runs only
# when two operators share a cycle). With every operator in one component nothing is
# pruned: the checks must give the same verdicts either way. (Checked at 155f7a1 against
# a verbatim copy of the rule before the index, too.)

def _verdict(check, graph, ops):
    try:
        return check(graph, "r", tuple(ops))
    except UsageError as exc:
        return str(exc)


def _subsets(graph, rnd, n):
    names = [op.name for op in graph.operators]
    near = {o: set() for o in names}
    for s in graph.streams:
        near[s.src.op].add(s.dst.op)
        near[s.dst.op].add(s.src.op)
    for _ in range(n):
        if rnd.random() < 0.3:
            yield rnd.sample(names, rnd.randint(1, min(len(names), 6)))
            continue
        got = [rnd.choice(names)]  # a connected walk, most of the time
        for _ in range(rnd.randint(0, len(names))):
            nxt = sorted(near[rnd.choice(got)] - set(got))
            if nxt:
                got.append(rnd.choice(nxt))
        order = {o: i for i, o in enumerate(names)}
        yield sorted(got, key=order.__getitem__)


def _unpruned(monkeypatch):
    from spadeopt.plan import region_index

    monkeypatch.setattr(region_index, "_components", lambda succ: ({n: 0 for n in succ}, frozenset(succ)))


def _same_verdicts(graph, ops_list, monkeypatch):
    import dataclasses

    fast = [_verdict(check_region, graph, ops) for ops in ops_list]
    with monkeypatch.context() as m:
        _unpruned(m)
        plain = dataclasses.replace(graph)  # a fresh memo: its index is built unpruned
        slow = [_verdict(check_region, plain, ops) for ops in ops_list]
    for ops, a, b in zip(ops_list, fast, slow, strict=True):
        assert a == b, ops


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_apps(), st.integers(0, 2**32))
def test_the_pruned_check_gives_the_unpruned_verdict_on_random_graphs(app, seed):
    import random

    graph = app.build()
    with pytest.MonkeyPatch.context() as mp:
        _same_verdicts(graph, list(_subsets(graph, random.Random(seed), 25)), mp)


@pytest.mark.parametrize("ref", ["apps/bargain.py", "apps/outlier.py", "apps/orders.py", "apps/notional.py",
                                 "tests/apps/loop.py", "tests/apps/sensors.py", "tests/apps/twosrc.py"])
def test_the_pruned_check_gives_the_unpruned_verdict_on_apps(ref, monkeypatch):
    import random

    graph, _ = api.load_graph(ref)
    _same_verdicts(graph, list(_subsets(graph, random.Random(7), 300)), monkeypatch)
