"""Moving a region's state to another width (issue 39), without PEs: the key split is the
split's own routing, the build's rescale facts, and what is refused."""

from __future__ import annotations

import copy
import dataclasses
from collections import deque
from zlib import crc32

import pytest

from spadeopt.codegen.rescale_facts import rescale_facts
from spadeopt.deploy.checkpoint_rescale import (
    RescaleRefused,
    rescale_entries,
    rescale_plan,
    split_state,
)
from spadeopt.kinds.lowering import stable_hash
from spadeopt.model.schema import Schema
from spadeopt.optimize.strategies import plan_for
from spadeopt.plan.fission import physical_graph
from spadeopt.protocol import key_channel
from tests.apps.ckpt import ckpt


@pytest.mark.parametrize("attrs", [("s",), ("i",), ("f",), ("b",), ("i", "s"), ("f", "b", "i")])
def test_the_key_split_is_the_generated_splits_routing(attrs):
    schema = Schema.parse("s:str, i:int, f:float, b:bytes")
    parts = [stable_hash(a, schema) for a in attrs]  # what kinds.fission_split writes into the split
    code = parts[0] if len(parts) == 1 else f"hash(({', '.join(parts)}))"
    types = tuple(schema.type_of(a) for a in attrs)
    for n in range(200):
        t = (f"k{n}", n * 7919 - 500, n / 3 if n % 17 else float("nan"), bytes([n % 256, 1]))
        values = tuple(t[schema.index(a)] for a in attrs)
        for width in (1, 2, 3, 5, 8):
            assert key_channel(values, types, width) == eval(code, {"_crc32": crc32, "t": t}) % width


def _facts(width, **params):
    g = ckpt.build({"n": 100, "width": 2, **params})
    return g, rescale_facts(g, dataclasses.replace(plan_for(g, "none", widths={"wins": width}), checkpoints=True))


def _ops(g, width):
    plan = plan_for(g, "none", widths={"wins": width})
    return sorted(op.name for op in physical_graph(g, plan.regions).operators)


def test_the_facts_say_how_each_copy_moves():
    g, facts = _facts(3)
    r = facts["regions"]["wins"]
    assert r["width"] == 3 and r["key"] == [["k", "str"]] and r["fed"] == "split"
    assert r["copies"]["win"] == {"slots": ["groups", "clock", "sum"], "key": ["k"], "first": 1,
                                  "single_first": False, "single_last": False, "copy_last": False, "arity": 4}
    assert r["fission"] == {"wins__split": {"keep": True, "clock": True}, "wins__merge": {"slots": ["seq_merge"]}}
    assert _facts(1)[1]["regions"]["wins"]["copies"] == r["copies"]  # at width 1: as its copies would be
    rs = rescale_plan(_ops(g, 2), _ops(g, 3), facts)
    assert rs is not None and rs.widths == {"wins": (2, 3)}
    assert rescale_plan(_ops(g, 3), _ops(g, 3), facts) is None  # no width differs
    with pytest.raises(RescaleRefused, match="only there: wins__win__wsplit0; only here: -.*exchanges"):
        rescale_plan(_ops(g, 2) + ["wins__win__wsplit0"], _ops(g, 3), facts)


def test_a_window_copys_groups_move_to_the_channel_owning_their_key_in_opening_order():
    spec = {"slots": ["groups", "clock", "sum"], "key": ["k"], "first": 1}
    keys = [f"k{i}" for i in range(9)]
    olds = [[{}, [4, None, None], [c]] for c in range(2)]
    for n, k in enumerate(reversed(keys)):  # opened in reverse key order; numbers n
        olds[key_channel((k,), ("str",), 2)][0][k] = [1, (k, 1.0, 5, n), 5]
    new = split_state(spec, olds, 3, lambda v: key_channel((v["k"],), ("str",), 3), "win")
    for c, (groups, clock, late) in enumerate(new):
        assert all(key_channel((k,), ("str",), 3) == c for k in groups)
        assert [g[1][-1] for g in groups.values()] == sorted(g[1][-1] for g in groups.values())
        assert clock == [4, None, None] and late == [1 if c == 0 else 0]
    assert sorted(k for groups, _, _ in new for k in groups) == sorted(keys)


def test_a_custom_operators_opaque_state_is_refused_naming_it():
    g = ckpt.build({"n": 100, "width": 2, "keyed": 1})

    def plan(w):
        return dataclasses.replace(plan_for(g, "none", widths={"wins": w, "runs": w}), checkpoints=True)

    old, new = (sorted(op.name for op in physical_graph(g, plan(w).regions).operators) for w in (2, 3))
    rs = rescale_plan(old, new, rescale_facts(g, plan(3)))
    flat = {"ops": {"run__0": [{"k1": [1, 1]}], "run__1": [{"k2": [2, 2]}]}, "sources": {}, "sinks": {}, "commits": {}}
    with pytest.raises(RescaleRefused, match="operator 'run' of region 'runs': a custom operator's snapshot.* "
                                             "keep the region's width 2"):
        rescale_entries(flat, rs)


def _window(groups):
    return {"ops": {"win": [groups, [7, None, None], [3]]}, "sources": {}, "sinks": {}, "commits": {}}


def test_widening_from_one_numbers_the_groups_in_opening_order_and_makes_split_and_merge():
    g, facts = _facts(3)
    flat = _window({f"k{i}": [i + 1, 10 * i] for i in range(6)})  # width 1: [count, sum(v)]
    rescale_entries(flat, rescale_plan(_ops(g, 1), _ops(g, 3), facts))
    ops = flat["ops"]
    assert ops["wins__split"] == [[6], [7]]  # the next number after the 6 groups; the window's clock
    assert ops["wins__merge"][0]["floor"] == [-1, -1, -1]
    seen = {}
    for c in range(3):
        groups, clock, late = ops[f"win__{c}"]
        assert clock == [7, None, None] and late == [3 if c == 0 else 0]
        for k, (n, t0, tot) in groups.items():
            assert key_channel((k,), ("str",), 3) == c and t0 == (None, None, None, int(k[1:]))
            seen[k] = (n, tot)
    assert seen == {f"k{i}": (i + 1, 10 * i) for i in range(6)}
    back = {"ops": {k: v for k, v in ops.items() if k.startswith("win__") or k.startswith("wins__")},
            "sources": {}, "sinks": {}, "commits": {}}
    rescale_entries(back, rescale_plan(_ops(g, 3), _ops(g, 1), _facts(1)[1]))  # and narrowing back to 1
    assert back["ops"] == _window({f"k{i}": [i + 1, 10 * i] for i in range(6)})["ops"]
    assert list(back["ops"]["win"][0]) == [f"k{i}" for i in range(6)]  # opening order, as width 1 keeps it


def test_a_merge_holding_tuples_keeps_them_in_an_ended_channel_and_narrowing_to_one_is_refused():
    g, facts = _facts(3)
    merge = {"queues": [[("a", 1)], []], "heads": [0, 0], "live": [True, True], "floor": [0, 0], "taken": None,
             "above": False}
    flat = {"ops": {"wins__merge": [merge]}, "sources": {}, "sinks": {}, "commits": {}}
    rescale_entries(flat, rescale_plan(_ops(g, 2), _ops(g, 3), facts))
    moved = flat["ops"]["wins__merge"][0]
    assert moved["queues"] == [[], [], [], [("a", 1)]] and moved["live"] == [True, True, True, False]
    flat = {"ops": {"wins__merge": [merge]}, "sources": {}, "sinks": {}, "commits": {}}
    with pytest.raises(RescaleRefused, match="'wins__merge' of region 'wins' cannot move .* holds 1 tuple"):
        rescale_entries(flat, rescale_plan(_ops(g, 2), _ops(g, 1), _facts(1)[1]))


def test_a_count_windows_groups_keep_their_first_and_last_tuples_across_width_one():
    from tests.apps.ckpt import ckregion

    g = ckregion.build({"width": 2})

    def plan(w):
        return dataclasses.replace(plan_for(g, "none", widths={"chans": w}), checkpoints=True)

    def ops(w):
        return sorted(op.name for op in physical_graph(g, plan(w).regions).operators)

    spec = rescale_facts(g, plan(2))["regions"]["chans"]["copies"]["cnt4"]
    assert spec["slots"] == ["groups", "clock"] and spec["copy_last"] and not spec["single_last"]
    single = {"ops": {"cnt4": [{"k1": [2, 9.5, 7, 3], "k2": [1, 1.0, 4, 4]}, [None, None, None]]},
              "sources": {}, "sinks": {}, "commits": {}}  # [n, max(ts), max(v), min(v)]
    wide = copy.deepcopy(single)
    rescale_entries(wide, rescale_plan(ops(1), ops(3), rescale_facts(g, plan(3))))
    groups = {k: v for c in range(3) for k, v in wide["ops"][f"cnt4__{c}"][0].items()}
    assert groups["k1"][:2] == [2, (None,) * 3 + (0,)] and groups["k1"][3:] == [9.5, 7, 3]
    assert wide["ops"]["chans__split"] == [[2]]  # no clock: a count window
    back = {"ops": {k: v for k, v in wide["ops"].items()}, "sources": {}, "sinks": {}, "commits": {}}
    rescale_entries(back, rescale_plan(ops(3), ops(1), rescale_facts(g, plan(1))))
    assert back["ops"] == single["ops"]


def test_a_region_led_by_a_splittable_source_is_refused_naming_the_source():
    from tests.apps.splits import splits

    g = splits.build({"case": "dynamic", "width": 2})

    def plan(w):
        return dataclasses.replace(plan_for(g, "none", widths={"reg": w}), checkpoints=True)

    old, new = (sorted(op.name for op in physical_graph(g, plan(w).regions).operators) for w in (2, 3))
    with pytest.raises(RescaleRefused, match="region 'reg' is led by source 'src', whose channel copies read "
                                             "splits c, c\\+2, .* keep the region's width 2"):
        rescale_plan(old, new, rescale_facts(g, plan(3)))


def _splits(case, old, new, split=7):
    from tests.apps.splits import splits

    g = splits.build({"case": case, "width": 2, "split": split})

    def plan(w):
        return dataclasses.replace(plan_for(g, "none", widths={"reg": w}), checkpoints=True)

    ops = [sorted(op.name for op in physical_graph(g, plan(w).regions).operators) for w in (old, new)]
    return rescale_plan(*ops, rescale_facts(g, plan(new)))


@pytest.mark.parametrize("n", [0, 5, 7, 23, 64])
def test_a_splittable_source_widened_from_one_skips_the_width_one_prefix_in_each_copy(n):
    """The width-1 run read records [0, n): copy c of 3 (splits c, c+3, ... of 7) starts
    after the records of its splits below n, and the merge's round starts at split n // 7."""
    flat = {"ops": {}, "sources": {"src": n}, "sinks": {}, "commits": {}}
    rescale_entries(flat, _splits("static", 1, 3))
    below = [sum(1 for i in range(n) if (i // 7) % 3 == c) for c in range(3)]
    assert flat["sources"] == {f"src__{c}": below[c] for c in range(3)}
    m = flat["ops"]["reg__merge"][0]
    assert (m["cur"], m["left"], m["n"], m["block"]) == ((n // 7) % 3, 7 - n % 7, 3, 7)
    assert m["queues"] == [[], [], []]
    dyn = {"ops": {}, "sources": {"src": n}, "sinks": {}, "commits": {}}
    rescale_entries(dyn, _splits("dynamic", 1, 2))  # stamped numbers: a fresh sequence-number merge
    assert dyn["sources"] == {f"src__{c}": sum(1 for i in range(n) if (i // 7) % 2 == c) for c in range(2)}
    assert dyn["ops"]["reg__merge"][0]["floor"] == [-1, -1]


def test_a_counting_sink_in_the_region_moves_its_count_and_other_widths_of_a_source_led_region_are_refused():
    flat = {"ops": {}, "sources": {"src": 30}, "sinks": {"sink": 25}, "commits": {}}
    rescale_entries(flat, _splits("count", 1, 2))
    assert flat["sources"] == {"src__0": 16, "src__1": 14} and flat["sinks"] == {"sink__0": 25, "sink__1": 0}
    assert "reg__merge" not in flat["ops"]  # a counting sink in the region: no merge
    with pytest.raises(RescaleRefused, match="region 'reg' is led by source 'src', whose channel copies read "
                                             "splits c, c\\+2, .*only a width-1 run's are.* keep the region's "
                                             "width 2"):
        _splits("count", 2, 1)


def _arrival(stateful: bool, old_w: int = 1, new_w: int = 2):
    from spadeopt import App, count_window
    from spadeopt.connectors import redis_source

    a = App("arr")
    o = a.source("o", "k:str, v:int", connector=redis_source([f"s:{i}" for i in range(5)], until="end",
                                                             partitioned_by=["k"]))
    f = a.functor("f", o, output={"k": "k", "w:int": "v * 2"})
    if stateful:
        f = a.aggregate("cnt", f, window=count_window(2), by=["k"], output={"k": "k", "n": "count()"})
    a.sink("out", f)
    a.parallel("o", "f", *(["cnt"] if stateful else []), width=2, name="live")
    g = a.build()

    def plan(w):
        return dataclasses.replace(plan_for(g, "none", widths={"live": w}), checkpoints=True)

    old, new = (sorted(op.name for op in physical_graph(g, plan(w).regions).operators) for w in (old_w, new_w))
    return rescale_plan(old, new, rescale_facts(g, plan(new_w)))


def test_a_partitioned_source_widened_from_one_gives_each_copy_its_own_keys_entry_ids():
    ids = {f"s:{i}": f"{100 + i}-0" for i in range(5)}
    state = {"ids": ids, "read": 40, "end": {k: "900-0" for k in ids}}
    flat = {"ops": {}, "sources": {"o": state}, "sinks": {}, "commits": {}}
    rescale_entries(flat, _arrival(False))
    assert flat["sources"] == {
        "o__0": {"ids": {k: ids[k] for k in ("s:0", "s:2", "s:4")}, "read": 0, "end": dict.fromkeys(("s:0", "s:2", "s:4"), "900-0")},
        "o__1": {"ids": {k: ids[k] for k in ("s:1", "s:3")}, "read": 0, "end": dict.fromkeys(("s:1", "s:3"), "900-0")}}
    assert "live__merge" not in flat["ops"]  # the arrival merge holds nothing
    flat = {"ops": {"cnt": [{"a": [1, ("a", 2)]}, [None]]}, "sources": {"o": state}, "sinks": {}, "commits": {}}
    with pytest.raises(RescaleRefused, match="operator 'cnt' of region 'live': only a keyed window's copy in a "
                                             "dynamic region keeps its state per key; keep the region's width 1"):
        rescale_entries(flat, _arrival(True))


@pytest.mark.parametrize("old_w, new_w", [(2, 1), (2, 3), (3, 2)])
def test_a_partitioned_source_moves_between_any_widths_each_new_copy_taking_its_keys_ids(old_w, new_w):
    """An adaptive run's second switch (scaling down or up again): the old copies each read
    their own stream keys, so together their positions are one reader's."""
    ids = {f"s:{i}": f"{100 + i}-{i}" for i in range(5)}
    keys = sorted(ids)
    olds = {f"o__{c}": {"ids": {k: ids[k] for k in keys[c::old_w]}, "read": 10 + c,
                        "end": dict.fromkeys(keys[c::old_w], "900-0")} for c in range(old_w)}
    flat = {"ops": {"live__merge": []}, "sources": olds, "sinks": {}, "commits": {}}
    rescale_entries(flat, _arrival(False, old_w, new_w))
    names = ["o"] if new_w == 1 else [f"o__{c}" for c in range(new_w)]
    assert flat["sources"] == {n: {"ids": {k: ids[k] for k in keys[c::new_w]}, "read": 0,
                                   "end": dict.fromkeys(keys[c::new_w], "900-0")} for c, n in enumerate(names)}
    assert "live__merge" not in flat["ops"]


def _slide(**params):
    """``ckslide``'s facts and operators at widths (swins, scnts)."""
    from tests.apps.ckpt import ckslide

    g = ckslide.build({"n": 100, **params})

    def plan(w):
        return dataclasses.replace(plan_for(g, "none", widths={"swins": w[0], "scnts": w[1]}), checkpoints=True)

    def ops(w):
        return sorted(op.name for op in physical_graph(g, plan(w).regions).operators)

    return (lambda w: rescale_facts(g, plan(w))), ops


def _move(flat, old, new, **params):
    facts, ops = _slide(**params)
    rescale_entries(flat, rescale_plan(ops(old), ops(new), facts(new)))
    return flat


@pytest.mark.parametrize("params", [{}, {"lateness": 0.3}, {"lateness": 0.3, "slide": 1.0}])
def test_a_sliding_windows_facts_name_its_opening_numbers_and_a_sliding_count_windows_its_rows(params):
    facts, _ = _slide(**params)
    for w in ((3, 2), (1, 1)):  # at width 1: as its copies would be
        copies = {op: spec for r in facts(w)["regions"].values() for op, spec in r["copies"].items()}
        assert copies["win"] == {"slots": ["groups", "clock", "opened", "sum"], "key": ["k"], "first": None,
                                 "sliding": "time"}
        assert copies["cnt"] == {"slots": ["groups", "clock"], "key": ["k"], "first": None, "sliding": "count"}


def _copies(width, keys, n0=0):
    """Sliding-window copies at ``width``: key ``k<i>`` opened by tuple ``n0 + 10 i`` (in
    reverse key order), its rows (k, ts, v, number) sorted by time, the clock [k, ks, ne]."""
    ops = {f"win__{c}": [{}, [8, 4.0, 5.0], {}, [c + 1]] for c in range(width)}
    for i in reversed(range(keys)):
        k, n = f"k{i}", n0 + 10 * (keys - i)
        st = ops[f"win__{key_channel((k,), ('str',), width)}"]
        st[0][k] = deque([(k, 4.0 + i / 10, i, n), (k, 4.5, 2 * i, n + 3 + i)])
        st[2][k] = n
    return {"ops": ops, "sources": {}, "sinks": {}, "commits": {}}


def test_a_sliding_windows_groups_move_with_their_opening_numbers_to_their_keys_channel_and_back():
    before = _copies(2, 9)
    moved = _move(copy.deepcopy(before), (2, 1), (3, 1))
    for c in range(3):
        groups, clock, opened, late = moved["ops"][f"win__{c}"]
        assert all(key_channel((k,), ("str",), 3) == c for k in groups) and set(opened) == set(groups)
        assert list(groups) == sorted(groups, key=opened.get), "a copy emits its groups in opening order"
        assert all(opened[k] == g[0][-1] for k, g in groups.items())
        assert clock == [8, 4.0, 5.0] and late == [3 if c == 0 else 0]
    back = _move(copy.deepcopy(moved), (3, 1), (2, 1))  # k -> k' -> k: as it was (the late count in channel 0)
    for c in range(2):
        assert back["ops"][f"win__{c}"][:3] == before["ops"][f"win__{c}"][:3]
        assert list(back["ops"][f"win__{c}"][0]) == list(before["ops"][f"win__{c}"][0])
        assert {type(g) for g in back["ops"][f"win__{c}"][0].values()} == {deque}


def test_narrowing_a_sliding_window_to_one_keeps_its_groups_in_opening_order_without_numbers():
    one = _move(_copies(3, 7), (3, 1), (1, 1), lateness=0.3)["ops"]
    assert set(one) == {"win"}  # no split, merge, or copies
    groups, clock, late = one["win"]
    assert list(groups) == [f"k{i}" for i in reversed(range(7))] and clock == [8, 4.0, 5.0] and late == [6]
    assert groups["k2"] == deque([("k2", 4.2, 2), ("k2", 4.5, 4)])


def test_widening_a_sliding_window_from_one_numbers_its_groups_and_makes_split_and_merge():
    groups = {f"k{i}": deque([(f"k{i}", 4.0 + i / 10, i)]) for i in (4, 0, 3, 1, 2)}
    single = {"ops": {"win": [groups, [8, 4.0, 5.0], [5]]}, "sources": {}, "sinks": {}, "commits": {}}
    wide = _move(copy.deepcopy(single), (1, 1), (3, 1))["ops"]
    assert wide["swins__split"] == [[5], [8]]  # the next number after the 5 groups; the window's clock
    assert wide["swins__merge"][0]["floor"] == [-1, -1, -1]
    seen = {}
    for c in range(3):
        g, clock, opened, late = wide[f"win__{c}"]
        assert list(g) == sorted(g, key=opened.get) and clock == [8, 4.0, 5.0] and late == [5 if c == 0 else 0]
        seen |= {k: (opened[k], rows) for k, rows in g.items()}
    assert {k: n for k, (n, _) in seen.items()} == {k: n for n, k in enumerate(groups)}
    assert seen["k3"][1] == deque([("k3", 4.3, 3, 2)])
    back = _move({**copy.deepcopy(single), "ops": wide}, (3, 1), (1, 1))
    assert back["ops"] == single["ops"] and list(back["ops"]["win"][0]) == list(groups)


def test_a_sliding_count_windows_rows_keep_their_bound_across_widths():
    rows = {f"k{i}": [deque([(f"k{i}", j / 10, j) for j in range(i + 1)], 8), 3 * i + 1] for i in range(6)}
    single = {"ops": {"cnt": [rows, [None, None, None]]}, "sources": {}, "sinks": {}, "commits": {}}
    wide = _move(copy.deepcopy(single), (1, 1), (1, 3))["ops"]
    assert wide["scnts__split"] == [[6]]  # no clock: a count window
    got = {k: g for c in range(3) for k, g in wide[f"cnt__{c}"][0].items()}
    assert got["k2"][0] == deque([("k2", 0.0, 0, 2), ("k2", 0.1, 1, 2), ("k2", 0.2, 2, 2)], 8)
    assert got["k2"][0].maxlen == 8 and got["k2"][1] == 7
    two = _move({**single, "ops": wide}, (1, 3), (1, 2))["ops"]
    assert sorted(k for c in range(2) for k in two[f"cnt__{c}"][0]) == sorted(rows)
    back = _move({**single, "ops": two}, (1, 2), (1, 1))["ops"]
    assert back == single["ops"] and back["cnt"][0]["k5"][0].maxlen == 8
