"""State and selectivity kinds, region legality (apart from policy), the rewrite, plan.json."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from spadeopt import App, count_window
from spadeopt.api import load_graph
from spadeopt.errors import GraphError, UsageError
from spadeopt.model.graph import PARTITIONED, STATEFUL, STATELESS
from spadeopt.optimize.strategies import plan_for
from spadeopt.plan.fission import physical_graph
from spadeopt.plan.plan import Plan
from spadeopt.plan.regions import DYNAMIC, STATIC, resolve_regions, selectivity_kind
from spadeopt.toolkit.sources import counter

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
    assert selectivity_kind(g2.op("plain")) == STATIC and selectivity_kind(g2.op("flt")) == DYNAMIC


@pytest.mark.parametrize("case,words", [
    ("stateful", ["operator 'g' is stateful", "aggregate without by="]),
    ("drops_key", ["operator 'f' does not forward key 'k'"]),
    ("disjoint", ["partition keys do not intersect", "'h' on ['j']", "'g' on ['k']"]),
    ("time", ["operator 'g' has an event-time window"]),
    ("loop", ["crosses a feedback loop", "'echo'"]),
])
def test_illegal_regions_are_refused_naming_operator_and_reason(case, words):
    graph, _ = load_graph("tests/apps/bad_regions.py", {"case": case})
    with pytest.raises(UsageError) as exc:
        plan_for(graph, "manual")
    for w in words:
        assert w in str(exc.value), (w, str(exc.value))
    assert "parallel region 'reg'" in str(exc.value)


def test_declaration_errors_are_graph_errors():
    a = App("d")
    s = a.source("src", "x:int", generator=counter, args={"n": 1})
    a.sink("sink", a.functor("f", s))
    a.parallel("f", "nope", width=0, name="reg")
    with pytest.raises(GraphError) as exc:
        a.build()
    assert "unknown operator 'nope'" in str(exc.value) and "width must be an integer >= 1" in str(exc.value)


def test_sources_and_sinks_are_never_replicated():
    a = App("s")
    s = a.source("src", "x:int", generator=counter, args={"n": 1})
    a.sink("sink", a.functor("f", s))
    a.parallel("src", "f", width=2, name="reg")
    with pytest.raises(UsageError, match="operator 'src' is a source"):
        plan_for(a.build(), "manual")


def _cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "spadeopt", *args], capture_output=True, text=True, cwd=cwd)


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
    assert [r.width for r in resolve_regions(graph, "manual", None)] == [2]  # the developer's
    assert [r.width for r in resolve_regions(graph, "none", None)] == [1]
    (r,) = resolve_regions(graph, "none", {"symbols": 3})
    assert r.width == 3 and r.key == ("sym",) and r.ordering == DYNAMIC
    phys = physical_graph(graph, (r,))
    names = {op.name for op in phys.operators}
    assert {"symbols__split", "symbols__merge", "match__0", "match__2"} <= names and "match" not in names
    assert phys.op("symbols__merge").out_port("out").schema == graph.op("bargain").out_port("out").schema
    assert phys.op("bargain__1").out_port("out").schema.names[-1] == "_fission_seq"
    assert physical_graph(graph, resolve_regions(graph, "none", None)) is graph  # width 1: untouched


def test_plan_json_records_regions_channels_pes_and_nodes(tmp_path):
    graph, _ = load_graph("apps/peer.py", {"tuples": "100", "n": "3"})
    plan = plan_for(graph, "manual", nodes=2, widths={"chain": 2})
    doc = plan.to_json()
    (reg,) = doc["regions"]
    assert reg["width"] == 2 and reg["ordering"] == STATIC and reg["routing"] == "round_robin"
    ch = reg["channels"]
    assert ch[0]["f1@0"]["operator"] == "f1__0"
    pes = {c[f"f{i}@{k}"]["pe"] for k, c in enumerate(ch) for i in range(3)}
    assert len(pes) == 2  # each channel one PE under FMAN
    assert {ch[0]["f0@0"]["node"], ch[1]["f0@1"]["node"]} == {0, 1}  # channels on both nodes
    assert reg["split"]["pe"] == plan.pe_of["src"] and reg["merge"]["pe"] == plan.pe_of["sink"]
    again = Plan.from_json(json.loads(json.dumps(doc)))
    assert again == plan


def test_explain_shows_regions_channels_pes_and_nodes(tmp_path):
    from spadeopt import api

    b = api.build("apps/peer.py", "manual", {"n": "3"}, nodes=2, cores=1, out=tmp_path / "b", widths={"chain": 2})
    text = api.explain_text(b.directory)
    assert "region 'chain': width 2, round robin, weighted round robin merge" in text
    pe_of = b.plan.pe_of
    assert f"channel 1: f0@1, f1@1, f2@1 -> {pe_of['f0__1']} on node" in text
    assert f"merge    chain__merge in {pe_of['chain__merge']}" in text
