"""Fission end to end in this process: generated split, channels and merge, simulated
deliveries (random batch boundaries, random interleavings between PEs), every width
gives the width-1 rows in the width-1 order, under every fusion."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spadeopt import App, count_window
from tests.toolkit.gens import replay
from tests.toolkit.harness import simulate

SCHEMA = "id:int, k:int, v:int, ts:int"


def rows(n: int, keys: int, seed: int) -> list[tuple]:
    x = seed * 2654435761 % 2**32
    out = []
    for i in range(n):
        x = (x * 1103515245 + 12345) % 2**31
        out.append((i, x % keys, (x >> 8) % 1000, 1000 + i))
    return out


def keyed_app(data: list[tuple], keep: int, window: int) -> App:
    """A dynamic, partitioned region: predicate split, a filter keeping ``keep``/10 of
    one side, a join emitting up to ``window`` matches per probe (prolific), a
    count-window aggregate by key (flushing open groups at end of stream), a functor."""
    a = App("fis")
    s = a.source("src", SCHEMA, generator=replay, args={"rows": data})
    left, right = a.split("side", s, predicates=["v % 3 == 0", "v % 3 != 0"])
    r = a.functor("keep", right, filter=f"v % 10 < {keep}")
    lf = a.functor("probe", left, output={"k": "k", "ts": "ts", "lv": "v"})
    j = a.join("match", lf, r, on="k", order="ts", window=(count_window(0), count_window(window)),
               output={"k": "left.k", "ts": "left.ts", "lv": "lv", "rv": "v"})
    g = a.aggregate("pairs", j, window=count_window(2), by=["k"],
                    output={"k": "k", "ts": "last(ts)", "s:int": "sum(lv + rv)", "n": "count()"})
    f = a.functor("fin", g, output={"k": "k", "ts": "ts", "s2:int": "s * 2", "n": "n"})
    a.sink("sink", f)
    a.parallel("side", "keep", "probe", "match", "pairs", "fin", width=2, name="reg")
    return a


def stateless_app(data: list[tuple], keep: int) -> App:
    """A dynamic, stateless region (round robin with sequence numbers)."""
    a = App("fis2")
    s = a.source("src", SCHEMA, generator=replay, args={"rows": data})
    f = a.functor("f", s, filter=f"v % 10 < {keep}", output={"id": "id", "w:int": "v * 3 + k"})
    g = a.functor("g", f, output={"id": "id", "w": "w", "odd:bool": "w % 2 == 1"})
    a.sink("sink", g)
    a.parallel("f", "g", width=2, name="reg")
    return a


def static_app(data: list[tuple]) -> App:
    a = App("fis3")
    s = a.source("src", SCHEMA, generator=replay, args={"rows": data})
    f = a.functor("f", s, output={"id": "id", "w:int": "v * 3 + k"})
    g = a.functor("g", f)
    a.sink("sink", g)
    a.parallel("f", "g", width=2, name="reg")
    return a


@pytest.mark.slow
@settings(max_examples=12, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keep=st.sampled_from([0, 3, 10]), window=st.sampled_from([1, 3]), seed=st.integers(0, 10**6),
       chunks=st.lists(st.integers(1, 40), min_size=1, max_size=4))
def test_keyed_region_matches_width_1_under_every_width_and_fusion(tmp_path_factory, keep, window, seed, chunks):
    app = keyed_app(rows(300, 7, seed), keep, window)
    base = simulate(app, "all", tmp_path_factory.mktemp("w1"), widths={"reg": 1}, chunks=chunks)
    if keep:
        assert base["sink"], "the test needs output to compare"
    for width in (2, 3, 4):
        for fusion in ("none", "all", "mixed"):
            got = simulate(app, fusion, tmp_path_factory.mktemp(f"w{width}"), seed=seed + width,
                           widths={"reg": width}, chunks=chunks)
            assert got == base, (width, fusion)


@pytest.mark.slow
@settings(max_examples=10, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keep=st.sampled_from([0, 3, 10]), seed=st.integers(0, 10**6),
       chunks=st.lists(st.integers(1, 200), min_size=1, max_size=4))
def test_stateless_and_static_regions_match_width_1(tmp_path_factory, keep, seed, chunks):
    data = rows(500, 5, seed)
    for app in (stateless_app(data, keep), static_app(data)):
        base = simulate(app, "all", tmp_path_factory.mktemp("w1"), widths={"reg": 1}, chunks=chunks)
        for width in (2, 3, 4):
            for fusion in ("none", "mixed"):
                got = simulate(app, fusion, tmp_path_factory.mktemp("w"), seed=seed + width,
                               widths={"reg": width}, chunks=chunks)
                assert got == base, (app.name, width, fusion)
