"""Random parallel regions with keyed event-time windows and keyed custom operators
(issue 27, items 2 and 3): generated split, channels and merge in this process (random
batch boundaries and interleavings, ``harness.simulate``), every width from 2 to 4 under
every fusion gives the width-1 sink rows in the width-1 order; a deliberately wrong
merge or numbering rule makes the same comparison fail."""

from __future__ import annotations

import dataclasses
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spadeopt import App, count_window, time_window
from spadeopt.errors import UsageError
from spadeopt.kinds import KINDS, aggregate
from spadeopt.kinds.aggregate import AggOutput
from spadeopt.optimize.strategies import plan_for
from spadeopt.protocol import SEQ
from spadeopt.runtime import merges as fission
from tests.toolkit.fission_ops import Echo, Smooth, Threaded
from tests.toolkit.gens import replay
from tests.toolkit.harness import assert_every_width_matches, simulate

SCHEMA = "k:int, ts:int, v:int"
OUT = {"k": "k", "ts": "last(ts)", "v:int": "sum(v)"}  # aggregates keep the schema


def rows(n: int, keys: int, seed: int, late: float = 0.1) -> list[tuple]:
    """Event times mostly ascending in random steps, a share ``late`` of them older."""
    r = random.Random(seed)
    out, ts = [], 0
    for _ in range(n):
        ts += r.choice((0, 0, 1, 2, 5, 11))
        t = ts - r.randint(1, 40) if r.random() < late else ts
        out.append((r.randrange(keys), t, r.randrange(1000)))
    return out


# one operator of a random region: (kind, option); the chain is built in order
PRE = st.sampled_from([("ident", 0), ("calc", 0)])  # static, forward k and ts
POST = st.sampled_from([("filter", 3), ("filter", 8), ("count", 2), ("count", 3), ("slide", 3),
                        ("smooth", 4), ("smooth", 3), ("echo", 0), ("calc", 0)])


@st.composite
def regions(draw):
    """A chain region: static functors, optionally a keyed event-time window (tumbling or
    sliding), then
    filters, keyed count windows, keyed and stateless custom operators (nothing keyed after
    a stateless custom operator, which does not keep the key)."""
    pre = draw(st.lists(PRE, max_size=2))
    window = draw(st.sampled_from([None, 7, 20, 60, (20, 5), (12, 4), (30, 10)]))  # (size, slide): sliding
    post = draw(st.lists(POST, max_size=3))
    keyed_ok, chain = True, []
    for op in post:
        if op[0] in ("count", "slide", "smooth") and not keyed_ok:
            continue
        keyed_ok = keyed_ok and op[0] != "echo"
        chain.append(op)
    if window is None and not any(o[0] in ("count", "slide", "smooth", "echo") for o in chain):
        chain.append(("smooth", 5))  # every region holds a custom operator or a window
    return pre, window, chain


def build(data: list[tuple], pre, window, chain) -> App:
    a = App("fisg")
    s = a.source("src", SCHEMA, generator=replay, args={"rows": data})
    names: list[str] = []
    cur = s
    for i, (kind, opt) in enumerate([*pre, *([("window", window)] if window else []), *chain]):
        name = f"{kind}{i}"
        if kind == "ident":
            cur = a.functor(name, cur)
        elif kind == "calc":
            cur = a.functor(name, cur, output={"k": "k", "ts": "ts", "v:int": "(v * 7 + k) % 1000"})
        elif kind == "filter":
            cur = a.functor(name, cur, filter=f"v % 10 < {opt}")
        elif kind == "window":
            size, slide = opt if isinstance(opt, tuple) else (opt, None)
            cur = a.aggregate(name, cur, window=time_window("ts", size, slide=slide), by=["k"], output=OUT)
        elif kind == "count":
            cur = a.aggregate(name, cur, window=count_window(opt), by=["k"], output=OUT)
        elif kind == "slide":
            cur = a.aggregate(name, cur, window=count_window(opt, slide=1), by=["k"], output=OUT)
        elif kind == "smooth":
            cur = a.custom(name, Smooth, inputs={"in": cur}, outputs={"out": SCHEMA}, args={"drop": opt},
                           state="partitioned", key=["k"])["out"]
        elif kind == "echo":
            cur = a.custom(name, Echo, inputs={"in": cur}, outputs={"out": SCHEMA}, state="stateless")["out"]
        names.append(name)
    a.sink("sink", cur)
    a.parallel(*names, width=2, name="reg")
    return a


@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=regions(), seed=st.integers(0, 10**6), keys=st.sampled_from([1, 3, 11]),
       chunks=st.lists(st.integers(1, 40), min_size=1, max_size=3))
def test_random_regions_with_time_windows_and_custom_operators_match_width_1(tmp_path_factory, shape, seed,
                                                                             keys, chunks):
    pre, window, chain = shape
    app = build(rows(250, keys, seed), pre, window, chain)
    assert_every_width_matches(app, tmp_path_factory, seed, chunks)


def sensor_like(data: list[tuple]) -> App:
    """The fast tier's fixed case: a functor, a keyed tumbling event-time window, a keyed
    custom operator with on_final, a stateless custom operator with on_final."""
    return build(data, [("calc", 0)], 20, [("smooth", 3), ("echo", 0)])


def test_time_window_and_custom_operators_match_width_1(tmp_path_factory):
    assert_every_width_matches(sensor_like(rows(300, 5, 7)), tmp_path_factory, 7, [7, 30], widths=(3,),
                               fusions=("none", "all"))


@pytest.mark.parametrize("late", [0.0, 0.2])
def test_a_sliding_time_window_matches_width_1(tmp_path_factory, late):
    """A keyed sliding event-time window (a group outlives a close: a close emits groups
    opened across many closes) and a count window and a custom operator after it."""
    app = build(rows(300, 5, 13, late=late), [("calc", 0)], (20, 5), [("count", 2), ("smooth", 3)])
    assert_every_width_matches(app, tmp_path_factory, 13, [7, 30], widths=(2, 3, 4), fusions=("none", "all"))


def test_a_time_windowed_join_in_a_region_matches_width_1(tmp_path_factory):
    """A join's time windows are trimmed by the probing tuple of the same key: replicable
    as they are (both sides in the region, split by the join key). Ties between the
    sides: tests/toolkit/test_fission_joins.py."""
    data = [(k, i * 3 + ts % 3, v) for i, (k, ts, v) in enumerate(rows(300, 4, 3, late=0))]
    a = App("tjoin")
    s = a.source("src", SCHEMA, generator=replay, args={"rows": data})
    left, right = a.split("side", s, predicates=["v % 2 == 0", "v % 3 == 0"])
    j = a.join("j", left, right, on="k", order="ts", window=(time_window("ts", 15), time_window("ts", 5)),
               output={"k": "left.k", "ts": "left.ts", "v:int": "left.v - right.v"})
    a.sink("sink", j)
    a.parallel("side", "j", width=2, name="reg")
    assert_every_width_matches(a, tmp_path_factory, 3, [9], widths=(2, 4), fusions=("none", "all"))


# ---- the rules have teeth -----------------------------------------------------------


def _differs(app: App, tmp_path_factory, width: int = 3) -> bool:
    base = simulate(app, "all", tmp_path_factory.mktemp("w1"), widths={"reg": 1}, chunks=[7, 30])
    got = simulate(app, "none", tmp_path_factory.mktemp("wk"), seed=1, widths={"reg": width}, chunks=[7, 30])
    return got != base


@pytest.mark.parametrize("window", [20, (20, 5)])
def test_a_merge_that_does_not_sort_by_number_gives_another_answer(tmp_path_factory, monkeypatch, window):
    app = build(rows(300, 5, 11), [], window, [])
    assert not _differs(app, tmp_path_factory)

    def channel_order(self):  # release what every channel has, channel after channel, unsorted
        out = []
        for i, q in enumerate(self.queues):
            out.extend(t[:-1] for t in q[self.heads[i]:])
            self._consume(i, len(q))
        return out

    monkeypatch.setattr(fission.SeqMerge, "_release", channel_order)
    assert _differs(app, tmp_path_factory)


def test_numbering_window_rows_by_their_trigger_gives_another_answer(tmp_path_factory, monkeypatch):
    """Rows one close emits share their trigger's number: the merge would put them in
    channel order, not in the order their groups were opened (the width-1 order)."""
    app = build(rows(300, 5, 11), [], 20, [])

    def by_trigger(op, channel, width, dynamic):
        params = aggregate.channel_params(op, channel, width, dynamic)
        if op.params.window.kind != "time":
            return params
        return dataclasses.replace(params, output=(*params.output[:-1], AggOutput(SEQ, "last", SEQ)))

    monkeypatch.setitem(KINDS, "aggregate", dataclasses.replace(KINDS["aggregate"], channel_params=by_trigger))
    assert _differs(app, tmp_path_factory)


@pytest.mark.parametrize("window", [20, (20, 5)])
def test_without_watermarks_late_tuples_and_closes_differ(tmp_path_factory, monkeypatch, window):
    """A split that sends no watermark copies: a channel keeps a late tuple width 1 drops."""
    app = build(rows(300, 5, 11, late=0.2), [], window, [])
    real = KINDS["fission_split"]

    def no_clock(graph, op, imports):
        ctx = real.lower(graph, op, imports)
        return {**ctx, "clock": None}

    monkeypatch.setitem(KINDS, "fission_split", dataclasses.replace(real, lower=no_clock))
    assert _differs(app, tmp_path_factory)


# ---- what is refused ------------------------------------------------------------------


def test_submit_from_another_thread_is_refused_naming_pe_and_operator(tmp_path):
    a = App("thr")
    s = a.source("src", SCHEMA, generator=replay, args={"rows": rows(20, 3, 1)})
    t = a.custom("thr", Threaded, inputs={"in": s}, outputs={"out": SCHEMA}, state="stateless")
    a.sink("sink", t["out"])
    a.parallel("thr", width=2, name="reg")
    simulate(a, "none", tmp_path / "w1", widths={"reg": 1})  # width 1: not a channel copy, allowed
    with pytest.raises(RuntimeError) as exc:
        simulate(a, "none", tmp_path / "w2", widths={"reg": 2})
    msg = str(exc.value)
    assert "custom operator 'thr@" in msg and "PE pe" in msg and "thread 'user-thread'" in msg, msg


@pytest.mark.parametrize("region,words", [
    (("c",), ["operator 'c' is stateful", "declares state='stateless' or 'partitioned'"]),
    (("e", "c2", "after"), ["operator 'e' does not forward key 'k'", "operator 'c2' does not forward key 'k'"]),
])
def test_what_cannot_keep_width_1_answers_is_refused_naming_operator_and_rule(region, words):
    a = App("ref")
    s = a.source("src", SCHEMA, generator=replay, args={"rows": rows(20, 3, 1)})
    f = a.functor("f", s, filter="v > 3")
    w = a.aggregate("w", f, window=time_window("ts", 10), by=["k"], output=OUT)
    c = a.custom("c", Smooth, inputs={"in": w}, outputs={"out": SCHEMA})
    e = a.custom("e", Echo, inputs={"in": w}, outputs={"out": SCHEMA}, state="stateless")
    c2 = a.custom("c2", Echo, inputs={"in": e["out"]}, outputs={"out": SCHEMA}, state="stateless")
    a.sink("sink", c["out"])
    a.sink("sink2", a.aggregate("after", c2["out"], window=count_window(2), by=["k"], output=OUT))
    a.parallel(*region, width=2, name="reg")
    with pytest.raises(UsageError) as exc:
        plan_for(a.build(), "manual")
    for w in words:
        assert w in str(exc.value), (w, str(exc.value))
