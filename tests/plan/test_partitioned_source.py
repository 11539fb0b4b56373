"""A parallel region led by a partitioned Redis Streams source (plan.regions ``ARRIVAL``):
the rewrite has no split, each channel's source copy reads its share of the stream keys,
the merge interleaves by arrival (no sequence number anywhere); plan.json, explain and
discovery show it; the rules (keys, width, event time) refuse what would
not keep each partition key's width-1 rows. No broker needed: nothing here connects."""

from __future__ import annotations

import dataclasses

import pytest

from spadeopt import App, api, count_window, time_window
from spadeopt.codegen.render import checkpoint_notes, render_build
from spadeopt.connectors import redis_source, tcp_source
from spadeopt.errors import OptimizeError, UsageError
from spadeopt.optimize.strategies import plan_for
from spadeopt.optimize.widths import choose_widths, region_caps
from spadeopt.plan.discover import discover_regions
from spadeopt.plan.explain import explain_text
from spadeopt.plan.fission import physical_graph
from spadeopt.plan.plan import Plan
from spadeopt.plan.regions import ARRIVAL, Region, WidthError, check_region, resolve_regions
from spadeopt.protocol import SEQ
from tests.connectors.partitioned_app import porders

APP = "tests/connectors/partitioned_app.py"


def test_the_rewrite_has_no_split_and_an_arrival_merge_and_channel_c_reads_keys_c_c_plus_w():
    g = porders.build({"width": 2})
    (r,) = resolve_regions(g, None, declared_widths=True)
    assert (r.key, r.ordering, r.fed, r.routing) == (("customer",), ARRIVAL, "source", "source_partitions")
    p = physical_graph(g, (r,))
    kinds = [op.kind for op in p.operators]
    assert "fission_split" not in kinds and kinds.count("fission_merge") == 1
    merge = p.op(r.merge)
    assert (merge.params.ordering, merge.params.block) == (ARRIVAL, 0)
    assert all(SEQ not in port.schema for op in p.operators for port in (*op.inputs, *op.outputs))
    assert [(p.op(f"orders__{c}").params.part, p.op(f"orders__{c}").params.parts) for c in range(2)] == [(0, 2), (1, 2)]
    files = render_build(g, plan_for(g, "manual"), APP)
    code = "".join(files.values())
    assert "part=0, parts=2" in code and "part=1, parts=2" in code and "partitioned_by=['customer']" in code
    assert "SeqMerge" not in code and "BlockMerge" not in code and "_split" not in code
    from spadeopt.connectors.redis_streams import RedisStreamSource

    args = dict(dict(p.op("orders__1").params.args), part=1, parts=2)
    assert RedisStreamSource(**args).keys == ["orders:1", "orders:3"]


def test_plan_json_and_explain_show_the_arrival_ordering(tmp_path):
    b = api.build(APP, "manual", {"width": "4"}, nodes=1, cores=4, out=tmp_path / "b")
    plan = Plan.load(b.directory / "plan.json")  # read back and checked field by field
    assert [(r.width, r.ordering, r.fed) for r in plan.regions] == [(4, ARRIVAL, "source")]
    text = explain_text(b.directory)
    assert ("region 'live': width 4, each channel reads its own stream keys (partitioned by customer), "
            "arrival merge (the order is kept per customer)") in text
    assert "split    " not in text


def test_discovery_proposes_a_region_led_by_the_partitioned_source():
    g = porders.build({"width": 0})
    found = discover_regions(g)
    (c,) = found.candidates
    assert c.region.operators == ("orders", "paid", "totals", "report")
    assert (c.region.key, c.region.ordering, c.region.fed) == (("customer",), ARRIVAL, "source")
    assert c.to_json()["ordering"] == "arrival"
    # without partitioned_by the source is outside, with the reason what to declare
    found = discover_regions(porders.build({"width": 0, "by": ""}))
    assert dict(found.outside)["orders"].endswith("or start the region after the source")
    assert "partitioned_by=[attributes]" in dict(found.outside)["orders"]


def test_a_width_above_the_stream_keys_is_refused_and_fatm_never_tries_it():
    g = porders.build({"width": 2})
    shape = check_region(g, "live", ("orders", "paid", "totals", "report"))
    assert shape.partitions == 4
    with pytest.raises(WidthError, match="width 6 is more than the 4 stream keys source 'orders' reads"):
        resolve_regions(g, {"live": 6}, declared_widths=True)
    r = Region("live", ("orders", "paid", "totals", "report"), 5, ("customer",), ARRIVAL, "source")
    with pytest.raises(WidthError):  # the rewrite keeps the rule too
        physical_graph(g, (r,))
    assert issubclass(WidthError, UsageError) and not issubclass(WidthError, OptimizeError)
    # FATM's width search is capped at the partitions: on 16 cores it tries 1..4 only
    caps = region_caps(g, (r,), ("live",))
    assert caps == {"live": 4}
    tried = []
    chosen, doc = choose_widths((r,), ("live",), 16, lambda rs: tried.append(rs[0].width) or 100.0 * rs[0].width,
                                caps=caps)
    assert sorted(tried) == [1, 2, 3, 4] and chosen[0].width == 4 and doc["caps"] == {"live": 4}


def test_a_checkpointing_build_of_an_arrival_region_builds_and_says_its_guarantee_is_per_customer():
    """Checkpoints of arrival regions (issue 29): no longer refused; the guarantee is
    named (tests/checkpoint/test_arrival_checkpoints.py runs and kills them)."""
    g = porders.build({"width": 2})
    plan = dataclasses.replace(plan_for(g, "manual"), checkpoints=True)
    render_build(g, plan, APP)
    notes = checkpoint_notes(g, plan)
    assert len(notes) == 1 and notes[0].startswith("parallel region 'live' merges its channels by arrival")
    assert "exactly once per customer" in notes[0]
    assert checkpoint_notes(g, plan_for(g, "manual")) == ()  # without checkpoints: nothing to say
    w1 = porders.build({"width": 1})
    assert checkpoint_notes(w1, dataclasses.replace(plan_for(w1, "manual"), checkpoints=True)) == ()


def _app(source, *, window=None, parallel=("src", "f", "agg")) -> App:
    a = App("t")
    s = a.source("src", "k:int, ts:int, v:int", connector=source)
    f = a.functor("f", s, output={"k": "k", "ts": "ts", "v": "v"})
    w = a.aggregate("agg", f, window=window or count_window(2), by=["k"], output={"k": "k", "n:int": "count()"})
    a.sink("out", w)
    a.parallel(*parallel, width=2, name="r")
    return a


def test_what_a_region_led_by_a_partitioned_source_refuses():
    keys = ["a", "b", "c"]
    with pytest.raises(UsageError, match="event-time window 'agg' closes every key's group on any key's tuple"):
        resolve_regions(_app(redis_source(keys, partitioned_by="k"), window=time_window("ts", 10)).build(),
                        None, declared_widths=True)
    with pytest.raises(UsageError, match="operator 'src' is a connector source that is not partitioned"):
        resolve_regions(_app(tcp_source(9999)).build(), None, declared_widths=True)
    # a key finer than partitioned_by is fine; one coarser is not
    (r,) = resolve_regions(_app(redis_source(keys, partitioned_by="k")).build(), None, declared_widths=True)
    assert (r.ordering, r.key) == (ARRIVAL, ("k",))
    with pytest.raises(UsageError, match=r"operator 'agg' is partitioned on \['k'\], which does not include 'v'"):
        resolve_regions(_app(redis_source(keys, partitioned_by=["k", "v"])).build(), None, declared_widths=True)
