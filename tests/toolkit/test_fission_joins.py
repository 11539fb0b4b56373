"""Joins in parallel regions (issue 27 item 4): the order of a join's matches at width 1
is its processing order, both inputs merged by order attribute, left first on ties; a
channel numbers each match by (order value, side, number of the tuple that triggered
it), so the merge restores that order at every width, whatever the ties, and a region
may be entered by two streams keyed alike (one split each, the same key hash)."""

from __future__ import annotations

import dataclasses
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spadeopt import App, count_window, time_window
from spadeopt.errors import UsageError
from spadeopt.kinds import KINDS
from spadeopt.optimize.strategies import plan_for
from tests.toolkit.gens import replay
from tests.toolkit.harness import assert_every_width_matches, simulate

SCHEMA = "k:int, ts:int, v:int"


def tied_rows(n: int, keys: int, seed: int, step=(0, 0, 0, 1, 2)) -> list[tuple]:
    """Event times ascending, mostly tied (runs of equal ``ts``)."""
    r = random.Random(seed)
    out, ts = [], 0
    for _ in range(n):
        ts += r.choice(step)
        out.append((r.randrange(keys), ts, r.randrange(1000)))
    return out


def one_entry_join(data: list[tuple], window=None) -> App:
    """One entering stream, split inside the region into the join's two sides."""
    a = App("tie1")
    s = a.source("src", SCHEMA, generator=replay, args={"rows": data})
    left, right = a.split("side", s, predicates=["v % 2 == 0", "v % 3 == 0"])
    win = window or (time_window("ts", 4), count_window(2))
    j = a.join("j", left, right, on="k", order="ts", window=win,
               output={"k": "left.k", "ts": "right.ts", "v:int": "left.v * 1000 + right.v"})
    a.sink("sink", j)
    a.parallel("side", "j", width=2, name="reg")
    return a


def test_a_join_with_tied_order_values_in_a_one_entry_region_matches_width_1(tmp_path_factory):
    """Left and right tuples share order values: width 1 takes every left tuple of a tie
    before the right ones, whatever their positions in the entering stream."""
    rows = assert_every_width_matches(one_entry_join(tied_rows(300, 5, 1)), tmp_path_factory, 1, [9, 31],
                                      widths=(2, 4), fusions=("none", "all"))
    assert len(rows) > 50


# ---- two entering streams keyed alike (one split each) ----------------------------------

PRE = ["ident", "filter", "calc"]  # before the join on a side: forward k and ts
POST = ["filter", "count", "smooth", "calc"]


def two_entry_join(lrows: list[tuple], rrows: list[tuple], lpre=(), rpre=(), post=(), window=None,
                   self_join: bool = False) -> App:
    """Two sources (outside the region), per-key pipelines on each side, a keyed join
    and what follows it, all in region ``reg`` (entered by two streams)."""
    from tests.toolkit.fission_ops import Smooth

    a = App("tie2")
    ls = a.source("lsrc", SCHEMA, generator=replay, args={"rows": lrows})
    rs = ls if self_join else a.source("rsrc", SCHEMA, generator=replay, args={"rows": rrows})
    names: list[str] = []

    def chain(cur, ops, side):
        for i, kind in enumerate(ops):
            name = f"{side}{kind}{i}"
            if kind == "ident":
                cur = a.functor(name, cur)
            elif kind == "filter":
                cur = a.functor(name, cur, filter=f"v % {3 + i} != 1")
            elif kind == "calc":
                cur = a.functor(name, cur, output={"k": "k", "ts": "ts", "v:int": "(v * 7 + k) % 1000"})
            elif kind == "count":
                cur = a.aggregate(name, cur, window=count_window(2 + i), by=["k"],
                                  output={"k": "k", "ts": "last(ts)", "v:int": "sum(v)"})
            elif kind == "smooth":
                cur = a.custom(name, Smooth, inputs={"in": cur}, outputs={"out": SCHEMA}, args={"drop": 3},
                               state="partitioned", key=["k"])["out"]
            names.append(name)
        return cur

    left, right = chain(ls, lpre, "l"), chain(rs, rpre, "r")
    win = window or (time_window("ts", 3), count_window(2))
    j = a.join("j", left, right, on="k", order="ts", window=win,
               output={"k": "left.k", "ts": "left.ts", "v:int": "left.v * 1000 + right.v"})
    names.append("j")
    a.sink("sink", chain(j, post, "p"))
    a.parallel(*names, width=2, name="reg")
    return a


def test_a_two_source_keyed_join_region_matches_width_1(tmp_path_factory):
    """Both sources tie with each other and within themselves; filters and a
    recomputing functor before the join, a keyed count window after it."""
    app = two_entry_join(tied_rows(200, 5, 2), tied_rows(200, 5, 3), ["filter"], ["calc", "filter"], ["count"])
    assert_every_width_matches(app, tmp_path_factory, 2, [9, 31], widths=(2, 4), fusions=("none", "all"))


def test_a_self_join_of_one_stream_entering_twice_matches_width_1(tmp_path_factory):
    app = two_entry_join(tied_rows(250, 4, 5), [], post=["filter"], self_join=True)
    assert_every_width_matches(app, tmp_path_factory, 5, [13], widths=(3,), fusions=("none",))


J_PRE = st.lists(st.sampled_from(PRE), max_size=2)
J_POST = st.lists(st.sampled_from(POST), max_size=2)
WINDOWS = st.sampled_from([(time_window("ts", 3), count_window(2)), (count_window(1), count_window(3)),
                           (time_window("ts", 0), time_window("ts", 5)), (count_window(0), time_window("ts", 2))])


@pytest.mark.slow
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lpre=J_PRE, rpre=J_PRE, post=J_POST, window=WINDOWS, seed=st.integers(0, 10**6),
       keys=st.sampled_from([1, 3, 7]), one_entry=st.booleans(),
       chunks=st.lists(st.integers(1, 40), min_size=1, max_size=3))
def test_random_keyed_joins_in_regions_match_width_1(tmp_path_factory, lpre, rpre, post, window, seed, keys,
                                                     one_entry, chunks):
    """Random two-entry regions (per-key pipelines on each side, the join, what follows)
    and one-entry ones (the join's sides split off one stream in the region): every width
    2-4 under every fusion gives the width-1 rows in the width-1 order."""
    lrows, rrows = tied_rows(120, keys, seed), tied_rows(120, keys, seed + 1)
    app = (one_entry_join(sorted(lrows + rrows, key=lambda t: t[1]), window) if one_entry  # sides ordered
           else two_entry_join(lrows, rrows, lpre, rpre, post, window))
    base = simulate(app, "all", tmp_path_factory.mktemp("w1"), widths={"reg": 1}, chunks=chunks)
    for width in (2, 3, 4):
        for fusion in ("none", "all", "mixed"):
            got = simulate(app, fusion, tmp_path_factory.mktemp(f"w{width}"), seed=seed + width,
                           widths={"reg": width}, chunks=chunks)
            assert got == base, (width, fusion)


# ---- the rules have teeth -----------------------------------------------------------


def _differs(app: App, tmp_path_factory, width: int = 3) -> bool:
    base = simulate(app, "all", tmp_path_factory.mktemp("w1"), widths={"reg": 1}, chunks=[7, 30])
    got = simulate(app, "none", tmp_path_factory.mktemp("wk"), seed=1, widths={"reg": width}, chunks=[7, 30])
    return got != base


@pytest.mark.parametrize("two", [False, True])
def test_numbering_a_match_by_the_later_of_its_tuples_gives_another_answer(tmp_path_factory, monkeypatch, two):
    """The rule before this fix: a match took the larger of its pair's numbers."""
    app = (two_entry_join(tied_rows(200, 5, 2), tied_rows(200, 5, 3)) if two
           else one_entry_join(tied_rows(300, 5, 1)))
    assert not _differs(app, tmp_path_factory)
    real = KINDS["join"]

    def later_of_pair(graph, op, imports):
        ctx = real.lower(graph, op, imports)
        if ctx["renumber"]:
            r = ctx["renumber"]
            ctx = {**ctx, "renumber": None,
                   "row": ctx["row"].replace("_num", f"max(l[{r['lseq']}], r[{r['rseq']}])")}
        return ctx

    monkeypatch.setitem(KINDS, "join", dataclasses.replace(real, lower=later_of_pair))
    assert _differs(app, tmp_path_factory)


def test_entries_split_by_different_hashes_give_another_answer(tmp_path_factory, monkeypatch):
    """Every entry must be split by the same hash of the key: a second split that deals
    keys elsewhere makes a channel's join miss the other side's tuples of its keys."""
    app = two_entry_join(tied_rows(200, 5, 2), tied_rows(200, 5, 3))
    real = KINDS["fission_split"]

    def other_hash(graph, op, imports):
        ctx = real.lower(graph, op, imports)
        return {**ctx, "hash": f"({ctx['hash']} + 1)"} if op.name.endswith("split1") else ctx

    monkeypatch.setitem(KINDS, "fission_split", dataclasses.replace(real, lower=other_hash))
    assert _differs(app, tmp_path_factory)


# ---- what is refused ------------------------------------------------------------------


def _refusal(build) -> str:
    with pytest.raises(UsageError) as exc:
        plan_for(build().build(), "manual")
    return str(exc.value)


def test_two_entries_without_a_key_are_refused():
    from tests.toolkit.fission_ops import Echo

    def build():
        a = App("nokey")
        s1 = a.source("s1", SCHEMA, generator=replay, args={"rows": []})
        s2 = a.source("s2", SCHEMA, generator=replay, args={"rows": []})
        c = a.custom("c", Echo, inputs={"a": s1, "b": s2}, outputs={"out": SCHEMA}, state="stateless")
        a.sink("o", c["out"])
        a.parallel("c", width=2, name="reg")
        return a
    msg = _refusal(build)
    assert "entered by 2 streams" in msg and "holds no partitioned operator" in msg, msg


def test_two_entries_with_differently_typed_keys_are_refused():
    def build():
        a = App("types")
        s1 = a.source("s1", SCHEMA, generator=replay, args={"rows": []})
        s2 = a.source("s2", "k:str, ts:int, v:int", generator=replay, args={"rows": []})
        j = a.join("j", s1, s2, on="k", order="ts", window=(count_window(1), count_window(1)),
                   output={"k": "left.k", "v:int": "right.v"})
        a.sink("o", j)
        a.parallel("j", width=2, name="reg")
        return a
    msg = _refusal(build)
    assert "key 'k' has types int, str on the streams entering the region" in msg, msg


def test_entries_meeting_outside_a_join_are_refused():
    from tests.toolkit.fission_ops import Smooth

    def build():
        a = App("meet")
        s1 = a.source("s1", SCHEMA, generator=replay, args={"rows": []})
        s2 = a.source("s2", SCHEMA, generator=replay, args={"rows": []})
        w = a.aggregate("w", s1, window=time_window("ts", 10), by=["k"],
                        output={"k": "k", "ts": "last(ts)", "v:int": "sum(v)"})
        c = a.custom("c", Smooth, inputs={"a": w, "b": s2}, outputs={"out": SCHEMA}, state="partitioned",
                     key=["k"])
        a.sink("o", c["out"])
        a.parallel("w", "c", width=2, name="reg")
        return a
    msg = _refusal(build)
    assert "operator 'c' receives streams numbered apart" in msg and "may meet only in a join" in msg, msg
    assert "event-time window" not in msg, msg  # a window in a region of two entries: allowed since 2026-11-28


def test_a_join_ordering_its_sides_by_different_types_is_refused():
    def build():
        a = App("otypes")
        s1 = a.source("s1", SCHEMA, generator=replay, args={"rows": []})
        s2 = a.source("s2", "k:int, ts:float, v:int", generator=replay, args={"rows": []})
        j = a.join("j", s1, s2, on="k", order="ts", window=(count_window(1), count_window(1)),
                   output={"k": "left.k", "v:int": "right.v"})
        a.sink("o", j)
        a.parallel("j", width=2, name="reg")
        return a
    msg = _refusal(build)
    assert "orders its sides by 'ts' (int) and 'ts' (float)" in msg and "must be ints or both floats" in msg, msg


# ---- a join fed by a tumbling count window's end-of-stream flush -----------------------

FLUSH_WINDOWS = [(time_window("ts", 30), time_window("ts", 30)), (count_window(2), count_window(3)),
                 (time_window("ts", 0), count_window(1))]


def flush_join(rows: list[tuple], where: str = "inside", both: bool = False, size: int = 4, ts: str = "last(ts)",
               window=FLUSH_WINDOWS[0], keys=("k",)) -> App:
    """A tumbling count window (``size`` tuples per key, row ``ts`` = ``ts``) feeds the
    join's left side (and with ``both`` another its right side); its end-of-stream flush
    sends rows whose order values go back. ``where``: the window in the region
    (``inside``), before it (``before``, the region is the join alone) or the region
    entered by the window's output and a second stream (``two``)."""
    a = App("flush")
    s = a.source("src", SCHEMA, generator=replay, args={"rows": rows})
    left, right = a.split("side", s, predicates=["v % 2 == 0", "v % 3 == 0"])
    out = {"k": "k", "ts": ts, "v:int": "sum(v)"}
    cw = a.aggregate("cw", left, window=count_window(size), by=["k"], output=out)
    if both:
        right = a.aggregate("cw2", right, window=count_window(size - 1), by=["k"], output=out)
    if where == "two":
        right = a.source("rsrc", SCHEMA, generator=replay, args={"rows": tied_rows(150, 5, len(rows))})
    j = a.join("j", cw, right, on="k", order="ts", window=window,
               output={"k": "left.k", "ts": "left.ts", "v:int": "left.v * 1000 - right.v"})
    a.sink("sink", j)
    inside = ("side", "cw", *(("cw2",) if both else ()), "j")
    a.parallel(*(inside if where == "inside" else ("j",)), width=2, name="reg")
    return a


FLUSH_FUSIONS = ("none", "all", "all-nocollapse", "manual")  # "mixed" pairs break the exchanges' exlocations


@pytest.mark.parametrize("where", ["inside", "before", "two"])
def test_a_join_fed_by_a_count_windows_flush_matches_width_1(tmp_path_factory, where):
    """Issue 36's known gap, once refused: the window flushes its open groups at end of
    stream in the order they were opened, so the join's left side goes back in order
    value; width 1 takes such a row at its side's high-water mark, which a channel learns
    from the side exchange's frames (docs/decisions/067-joins-take-flushed-rows-at-the-high-water-mark.md)."""
    rows = assert_every_width_matches(flush_join(tied_rows(300, 7, 1), where), tmp_path_factory, 1, [7, 30],
                                      widths=(2, 3), fusions=FLUSH_FUSIONS)
    assert len(rows) > 50


@pytest.mark.slow
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.sampled_from(["inside", "before", "two"]), both=st.booleans(), size=st.integers(2, 6),
       ts=st.sampled_from(["last(ts)", "first(ts)", "max(ts)"]), window=st.sampled_from(FLUSH_WINDOWS),
       seed=st.integers(0, 10**6), keys=st.sampled_from([1, 3, 9]),
       chunks=st.lists(st.integers(1, 40), min_size=1, max_size=3))
def test_random_joins_fed_by_count_window_flushes_match_width_1(tmp_path_factory, where, both, size, ts, window,
                                                                 seed, keys, chunks):
    """Windows in the region or before it, on one side or both, rows stamped with their
    group's last, first or largest time (``first`` goes back even before the flush): every
    width 2-3 under every fusion gives the width-1 rows in the width-1 order."""
    app = flush_join(tied_rows(150, keys, seed), where, both and where == "inside", size, ts, window)
    base = simulate(app, "all", tmp_path_factory.mktemp("w1"), widths={"reg": 1}, chunks=chunks)
    for width in (2, 3):
        for fusion in FLUSH_FUSIONS:
            got = simulate(app, fusion, tmp_path_factory.mktemp(f"w{width}"), seed=seed + width,
                           widths={"reg": width}, chunks=chunks)
            assert got == base, (width, fusion)


@pytest.mark.parametrize("where", ["inside", "before"])
def test_a_flushed_join_side_without_its_frames_gives_another_answer(tmp_path_factory, monkeypatch, where):
    """The side exchange has teeth: without it (the channel's join merges its keys' rows by
    their own heads), or with it but sending no frames (each channel's mark is its own),
    the rows differ from width 1's."""
    from spadeopt.plan import regions

    app = flush_join(tied_rows(300, 7, 1), where)
    assert not _differs(app, tmp_path_factory)
    real = KINDS["exchange_split"]

    def no_frames(graph, op, imports):
        ctx = real.lower(graph, op, imports)
        return {**ctx, "clock": None} if "__j__left__" in op.name else ctx

    with monkeypatch.context() as m:
        m.setitem(KINDS, "exchange_split", dataclasses.replace(real, lower=no_frames))
        assert _differs(app, tmp_path_factory)
    monkeypatch.setattr(regions, "flushed_sides", lambda *a: ())
    assert _differs(app, tmp_path_factory)


def test_a_flushed_join_side_gets_a_side_exchange_in_each_channel():
    """The physical graph: a split and a clocked merge per channel in front of the join's
    left side only, named after the side; the region's other operators untouched."""
    from spadeopt.plan.fission import physical_graph
    from spadeopt.plan.regions import resolve_regions

    graph = flush_join([], "inside").build()
    phys = physical_graph(graph, resolve_regions(graph, {"reg": 3}))
    names = {o.name for o in phys.operators}
    assert {f"reg__j__left__wsplit{c}" for c in range(3)} <= names
    assert {f"reg__j__left__wmerge{c}" for c in range(3)} <= names
    assert not any("__right__" in n for n in names)
    assert all(phys.op(f"reg__j__left__wmerge{c}").params.clocked for c in range(3))


def test_real_run_of_a_join_fed_by_a_flush_matches_width_1(tmp_path):
    """Processes and ZeroMQ links: width 3 (one PE per operator) gives width 1's sinks."""
    from spadeopt.orchestrate.build_local import build_and_run
    from tests.toolkit.harness import plan

    graph = flush_join(tied_rows(300, 7, 4), "inside").build()
    runs = {w: build_and_run(graph, plan(graph, "none", {"reg": w}), workdir=tmp_path / str(w),
                             settings={"batch_size": 7}).sinks for w in (1, 3)}
    assert runs[1]["sink"] and runs[3] == runs[1]
