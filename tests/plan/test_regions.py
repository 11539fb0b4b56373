"""State and selectivity kinds, region legality (apart from policy), the rewrite, plan.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spadeopt import App, count_window
from spadeopt.api import load_graph
from spadeopt.errors import GraphError, UsageError
from spadeopt.kinds import selectivity
from spadeopt.model.graph import PARTITIONED, STATEFUL, STATELESS
from spadeopt.optimize.strategies import plan_for
from spadeopt.plan.explain import explain_text
from spadeopt.plan.fission import physical_graph
from spadeopt.plan.plan import Plan
from spadeopt.plan.regions import DYNAMIC, STATIC, resolve_regions
from spadeopt.toolkit.sources import counter
from tests.cli.clitools import cli

ROOT = Path(__file__).resolve().parents[2]


def test_state_and_selectivity_kinds_are_derived_from_parameters():
    g, _ = load_graph("apps/bargain_logical.py")
    state = {op.name: op.state for op in g.operators}
    assert state["type"] == state["trade"] == state["vwap"] == STATELESS
    assert state["vwin"] == state["match"] == state["rank"] == PARTITIONED
    assert g.op("vwin").key == ("sym",) and g.op("match").key == ("sym",)
    assert state["taq"] == state["bargains"] == STATEFUL
    a = App("k")
    s = a.source("src", "x:int", generator=counter, args={"n": 1})
    a.sink("out_all", a.aggregate("agg", s, window=count_window(2), output={"n": "count()"}))
    a.sink("m", a.merge("mg", [a.functor("plain", s), a.functor("flt", s, filter="x > 0")], order_by="x"))
    g2 = a.build()
    assert g2.op("agg").state == g2.op("mg").state == STATEFUL
    assert selectivity(g2.op("plain")) == STATIC and selectivity(g2.op("flt")) == DYNAMIC


@pytest.mark.parametrize("case,words", [
    ("stateful", ["operator 'g' is stateful", "aggregate without by="]),
    ("drops_key", ["operator 'f' does not forward key 'k'"]),
    ("disjoint", ["partition keys do not intersect", "'h' on ['j']", "'g' on ['k']"]),
    ("time_exit", ["the region is left from 'f', before event-time window 'g'"]),
    ("custom", ["operator 'c' is stateful", "declares state='stateless'"]),
    ("loop", ["crosses a feedback loop", "'echo'"]),
])
def test_illegal_regions_are_refused_naming_operator_and_reason(case, words):
    graph, _ = load_graph("tests/apps/bad_regions.py", {"case": case})
    with pytest.raises(UsageError) as exc:
        plan_for(graph, "manual")
    for w in words:
        assert w in str(exc.value), (w, str(exc.value))
    assert "parallel region 'reg'" in str(exc.value)


def test_a_sliding_event_time_window_may_be_replicated():
    """Refused until 2026-11-26 (a group outlives a close); its channel copy now numbers a
    row by window and group opening (``kinds.aggregate.number_bits``)."""
    graph, _ = load_graph("tests/apps/bad_regions.py", {"case": "time"})
    plan = plan_for(graph, "manual")
    assert [(r.name, r.width) for r in plan.regions] == [("reg", 2)]


def test_declaration_errors_are_graph_errors():
    a = App("d")
    s = a.source("src", "x:int", generator=counter, args={"n": 1})
    a.sink("sink", a.functor("f", s))
    a.parallel("f", "nope", width=0, name="reg")
    with pytest.raises(GraphError) as exc:
        a.build()
    assert "unknown operator 'nope'" in str(exc.value) and "width must be an integer >= 1" in str(exc.value)


def _src_f_sink(region: tuple[str, ...], mode: str = "file"):
    """src -> f -> sink with ``region`` declared at width 2."""
    a = App("s")
    s = a.source("src", "x:int", generator=counter, args={"n": 1})
    a.sink("sink", a.functor("f", s), mode=mode)
    a.parallel(*region, width=2, name="reg")
    return a.build()


def test_sinks_and_unsplittable_sources_are_never_replicated():
    with pytest.raises(UsageError, match="operator 'src' is a source whose generator is not splittable"):
        plan_for(_src_f_sink(("src", "f")), "manual")
    with pytest.raises(UsageError, match="operator 'sink' is a file sink: it writes in the stream's order"):
        plan_for(_src_f_sink(("f", "sink")), "manual")
    plan = plan_for(_src_f_sink(("f", "sink"), "count"), "manual")  # a counting sink: replicated, no merge
    (reg,) = plan.to_json()["regions"]
    assert "merge" not in reg and {"sink__0", "sink__1"} <= set(plan.pe_of) and "reg__merge" not in plan.pe_of


@pytest.mark.parametrize("case,words", [
    ("plain", ["source whose generator is not splittable", "splittable"]),
    ("keyed", ["starts at source 'src'", "not partitioned by key", "operator(s) f",
               "start the region after the source"]),
])
def test_source_led_regions_are_refused_when_they_cannot_keep_answers(case, words):
    graph, _ = load_graph("tests/apps/splits.py", {"case": case, "width": "2"})
    with pytest.raises(UsageError) as exc:
        plan_for(graph, "manual")
    for w in words:
        assert w in str(exc.value), (w, str(exc.value))


def test_a_source_led_region_has_no_split_and_each_source_copy_reads_its_share():
    graph, _ = load_graph("tests/apps/splits.py", {"case": "dynamic", "split": "7"})
    (r,) = resolve_regions(graph, {"reg": 3})
    assert r.fed == "source" and not r.has_split and r.ordering == DYNAMIC and r.routing == "source_splits"
    phys = physical_graph(graph, (r,))
    names = {op.name for op in phys.operators}
    assert "reg__split" not in names and {"src__0", "src__1", "src__2", "reg__merge"} <= names
    assert [(phys.op(f"src__{c}").params.part, phys.op(f"src__{c}").params.parts) for c in range(3)] == [
        (0, 3), (1, 3), (2, 3)]
    assert phys.op("src__1").params.split == 7
    assert phys.op("src__1").out_port("out").schema.names[-1] == "_fission_seq"  # stamped by the source copy
    assert phys.op("reg__merge").out_port("out").schema == graph.op("g").out_port("out").schema
    static, _ = load_graph("apps/peer.py", {"tuples": "100", "n": "2", "split": "16", "sink": "file"})
    (r,) = resolve_regions(static, {"chain": 2})
    assert r.ordering == STATIC and r.fed == "source"
    merge = physical_graph(static, (r,)).op("chain__merge")
    assert merge.params.block == 16  # a static merge takes back whole splits in turn
    with pytest.raises(GraphError, match="split size argument 'split' must be an integer >= 1"):
        load_graph("apps/peer.py", {"split": "0"})


def _cli(*args, cwd=ROOT):
    return cli(*args, cwd=cwd)


def test_cli_refusal_exits_2_and_writes_nothing(tmp_path):
    out = tmp_path / "b"
    proc = _cli("build", "tests/apps/bad_regions.py", "-p", "case=stateful", "--fusion", "none",
                "--width", "reg=2", "-o", str(out))
    assert proc.returncode == 2, proc.stderr
    assert "operator 'g' is stateful" in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists() and not list(tmp_path.iterdir())
    proc = _cli("build", "apps/chain.py", "--width", "nosuch=2", "-o", str(out))
    assert proc.returncode == 2 and "unknown region(s) nosuch" in proc.stderr and "ops" in proc.stderr
    proc = _cli("build", "apps/chain.py", "--width", "ops=two", "-o", str(out))
    assert proc.returncode == 2 and "REGION=K" in proc.stderr
    assert not out.exists()


def test_widths_policy_and_the_rewrite():
    graph, _ = load_graph("apps/bargain_logical.py")
    assert [r.width for r in resolve_regions(graph, None, declared_widths=True)] == [2]  # the developer's
    assert [r.width for r in resolve_regions(graph, None)] == [1]
    (r,) = resolve_regions(graph, {"symbols": 3})
    assert r.width == 3 and r.key == ("sym",) and r.ordering == DYNAMIC
    phys = physical_graph(graph, (r,))
    names = {op.name for op in phys.operators}
    assert {"symbols__split", "symbols__merge", "match__0", "match__2"} <= names and "match" not in names
    assert phys.op("symbols__merge").out_port("out").schema == graph.op("bargain").out_port("out").schema
    assert phys.op("bargain__1").out_port("out").schema.names[-1] == "_fission_seq"
    assert physical_graph(graph, resolve_regions(graph, None)) is graph  # width 1: untouched


def test_plan_json_records_regions_channels_pes_and_nodes(tmp_path):
    graph, _ = load_graph("apps/chain.py", {"tuples": "100", "n": "3"})
    plan = plan_for(graph, "manual", nodes=2, widths={"ops": 2})
    doc = plan.to_json()
    (reg,) = doc["regions"]
    assert reg["width"] == 2 and reg["ordering"] == STATIC and reg["routing"] == "round_robin"
    ch = reg["channels"]
    assert ch[0]["op1@0"]["operator"] == "op1__0"
    pes = {c[f"op{i}@{k}"]["pe"] for k, c in enumerate(ch) for i in range(3)}
    assert len(pes) == 2  # each channel one PE under FMAN
    assert {ch[0]["op0@0"]["node"], ch[1]["op0@1"]["node"]} == {0, 1}  # channels on both nodes
    assert reg["split"]["pe"] == plan.pe_of["src"] and reg["merge"]["pe"] == plan.pe_of["sink"]
    again = Plan.from_json(json.loads(json.dumps(doc)))
    assert again == plan
    # a region led by a splittable source: no split; each channel's PE holds its source copy
    graph, _ = load_graph("apps/peer.py", {"tuples": "100", "n": "3", "sink": "file"})
    plan = plan_for(graph, "manual", nodes=2, widths={"chain": 2})
    (reg,) = plan.to_json()["regions"]
    assert reg["fed"] == "source" and reg["routing"] == "source_splits" and "split" not in reg
    ch = reg["channels"]
    assert all(ch[k][f"src@{k}"]["pe"] == ch[k][f"f2@{k}"]["pe"] for k in range(2))
    assert ch[0]["src@0"]["pe"] != ch[1]["src@1"]["pe"] and reg["merge"]["pe"] == plan.pe_of["sink"]
    assert Plan.from_json(json.loads(json.dumps(plan.to_json()))) == plan
    # ... that ends in a counting sink: no merge either; each channel's PE counts
    graph, _ = load_graph("apps/peer.py", {"tuples": "100", "n": "3"})
    plan = plan_for(graph, "manual", nodes=2, widths={"chain": 2})
    (reg,) = plan.to_json()["regions"]
    assert "split" not in reg and "merge" not in reg and len(plan.pes) == 2
    assert all(reg["channels"][k][f"sink@{k}"]["pe"] == reg["channels"][k][f"src@{k}"]["pe"] for k in range(2))


def test_explain_shows_regions_channels_pes_and_nodes(tmp_path):
    from spadeopt import api

    b = api.build("apps/chain.py", "manual", {"n": "3"}, nodes=2, cores=1, out=tmp_path / "b", widths={"ops": 2})
    text = explain_text(b.directory)
    assert "region 'ops': width 2, round robin, weighted round robin merge" in text
    pe_of = b.plan.pe_of
    assert f"channel 1: op0@1, op1@1, op2@1 -> {pe_of['op0__1']} on node" in text
    assert f"merge    ops__merge in {pe_of['ops__merge']}" in text
    b = api.build("apps/peer.py", "manual", {"n": "3", "sink": "file"}, nodes=2, cores=1, out=tmp_path / "p",
                  widths={"chain": 2})
    text = explain_text(b.directory)
    assert "region 'chain': width 2, each channel reads its own source splits, weighted round robin merge" in text
    assert f"channel 1: src@1, f0@1, f1@1, f2@1 -> {b.plan.pe_of['src__1']} on node" in text
    assert "split    " not in text
    b = api.build("apps/peer.py", "manual", {"n": "3"}, nodes=2, cores=1, out=tmp_path / "c", widths={"chain": 2})
    text = explain_text(b.directory)
    assert "each channel reads its own source splits, no merge (each channel's counting sink counts" in text
    assert f"channel 0: src@0, f0@0, f1@0, f2@0, sink@0 -> {b.plan.pe_of['sink__0']} on node" in text


def test_a_filter_before_an_event_time_window_gets_a_window_exchange():
    """Refused until 2026-11-28 (the split read the window's event time off the entering
    tuple); each channel now has a window exchange in front of the window's copy
    (``plan.eventtime``), and the split sends no watermark frames."""
    graph, _ = load_graph("tests/apps/bad_regions.py", {"case": "time_filter"})
    plan = plan_for(graph, "manual")
    phys = physical_graph(graph, plan.regions)
    names = [op.name for op in phys.operators]
    assert [n for n in names if "__g__w" in n] == ["reg__g__wsplit0", "reg__g__wsplit1",
                                                  "reg__g__wmerge0", "reg__g__wmerge1"]
    assert phys.op("reg__split").params.clock is None
    assert phys.op("reg__g__wsplit0").params.clock[0] == "ts" and phys.op("reg__g__wmerge1").params.clocked
