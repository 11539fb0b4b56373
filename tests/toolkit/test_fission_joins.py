"""Joins in parallel regions (issue 27 item 4): the order of a join's matches at width 1
is its processing order, both inputs merged by order attribute, left first on ties; a
channel numbers each match by (order value, side, number of the tuple that triggered
it), so the merge restores that order at every width, whatever the ties, and a region
may be entered by two streams keyed alike (one split each, the same key hash)."""

from __future__ import annotations

import random

from spadeopt import App, count_window, time_window
from tests.toolkit.gens import replay
from tests.toolkit.harness import simulate

SCHEMA = "k:int, ts:int, v:int"


def tied_rows(n: int, keys: int, seed: int, step=(0, 0, 0, 1, 2)) -> list[tuple]:
    """Event times ascending, mostly tied (runs of equal ``ts``)."""
    r = random.Random(seed)
    out, ts = [], 0
    for _ in range(n):
        ts += r.choice(step)
        out.append((r.randrange(keys), ts, r.randrange(1000)))
    return out


def assert_every_width_matches(app: App, tmp_path_factory, seed: int, chunks, widths=(2, 3, 4),
                               fusions=("none", "all", "mixed")) -> list[dict]:
    base = simulate(app, "all", tmp_path_factory.mktemp("w1"), widths={"reg": 1}, chunks=chunks)
    assert base["sink"], "the test needs output to compare"
    for width in widths:
        for fusion in fusions:
            got = simulate(app, fusion, tmp_path_factory.mktemp(f"w{width}"), seed=seed + width,
                           widths={"reg": width}, chunks=chunks)
            assert got == base, (width, fusion)
    return base["sink"]


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
