"""Collapsed static runs (issue 14): identical sinks with and without collapsing under
every fusion, the runs found, and failures inside a collapsed loop naming the operator."""

from __future__ import annotations

import dataclasses

import pytest

from spadeopt.api import load_graph
from spadeopt.codegen import collapse
from spadeopt.codegen.render import render_build
from spadeopt.optimize.strategies import plan_for
from spadeopt.orchestrate.build_local import build_and_run
from tests.toolkit.harness import plan as fusion_plan

APPS = [("tests/apps/collapse.py", {}), ("apps/chain.py", {"n": "4", "work": "3", "tuples": "3000", "sink": "file"}),
        ("apps/notional.py", {"n": "4", "tuples": "3000", "sink": "file"}),
        ("apps/notional.py", {"n": "3", "tuples": "3000", "opaque": "1", "sink": "file"}),
        ("apps/bargain.py", {"groups": "3", "tuples": "3000"}), ("apps/outlier.py", {"antennas": "2", "samples": "3000"})]


def _graph(app, params):
    return load_graph(app, params)[0]


@pytest.mark.parametrize("app,params", APPS)
@pytest.mark.parametrize("fusion", [pytest.param("none", marks=pytest.mark.slow), "all", "manual",
                                    pytest.param("mixed", marks=pytest.mark.slow)])
def test_same_sinks_with_and_without_collapsing(app, params, fusion, tmp_path):
    graph = _graph(app, params)
    plan = fusion_plan(graph, fusion)
    runs = {c: build_and_run(graph, dataclasses.replace(plan, collapse=c), app_ref=app,
                             workdir=tmp_path / str(c), settings={"batch_size": 13}).sinks
            for c in (True, False)}
    assert runs[True] == runs[False]
    assert any(runs[True].values()), "the app produced no output to compare"


def test_runs_are_the_static_chains_of_a_pe():
    graph = _graph("tests/apps/collapse.py", {})
    code = render_build(graph, plan_for(graph, "all"), "APP_REF")["pe0.py"]
    assert "static run clean -> calc -> ident -> use -> tap" in code
    assert "static run f2 -> f3" in code, "a filter in the middle starts a new run"
    assert "static run f1" not in code and "b2 ->" not in code
    off = render_build(graph, dataclasses.replace(plan_for(graph, "all"), collapse=False), "APP_REF")["pe0.py"]
    assert "static run" not in off
    instrumented = render_build(graph, dataclasses.replace(plan_for(graph, "all"), instrumented=True), "APP_REF")
    assert "static run" not in instrumented["pe0.py"], "profiling builds keep operator boundaries"


def test_runs_stop_at_pe_boundaries():
    graph = _graph("tests/apps/collapse.py", {})
    files = render_build(graph, plan_for(graph, "none"), "APP_REF")
    assert not any("static run" in text for text in files.values())


def test_expensive_expression_read_twice_is_computed_once():
    graph = _graph("tests/apps/collapse.py", {})
    code = render_build(graph, plan_for(graph, "all"), "APP_REF")["pe0.py"]
    assert code.count("_a1 * _a1") == 1, "p * p (read twice downstream) is bound once"
    assert "_a3 * 3" not in code and "t[3] * 3" not in code, "a pure expression nobody reads is dropped"
    assert "/ (_a0 - -1)" in code, "a division (may raise) is kept even if unread"
    assert "[_a0 * _a1]" in code, "int * float may overflow converting a huge int: kept even if unread"
    assert "for _a0, _a1, _a2, _a3, _a4 in batch" in code, "more reads than attributes: the tuple is unpacked"
    assert "for _a3 in [t[3]]  # volume, read 3 times" in code, "w1: 4 reads of 5 attributes, volume's 3 read once"


def test_a_source_of_the_wrong_shape_fails_naming_it(tmp_path):
    graph = _graph("tests/apps/collapse.py", {"bad": "0"})
    for fusion in ("all", "none"):
        with pytest.raises(Exception) as info:
            build_and_run(graph, plan_for(graph, fusion), app_ref="tests/apps/collapse.py", workdir=tmp_path / fusion)
        msg = str(info.value)
        assert '"op": "src"' in msg and "source 'src' made a 6-tuple" in msg and "has 5 attributes" in msg, msg


def test_a_wrong_shape_inside_a_batch_fails_where_the_loop_unpacks_it(tmp_path):
    """A source's batches are checked at their ends only; a 6-tuple inside one stops the
    collapsed loop that unpacks it, named by its head -- never a silently cut tuple."""
    graph = _graph("tests/apps/collapse.py", {"bad": "5"})
    with pytest.raises(Exception) as info:
        build_and_run(graph, plan_for(graph, "all"), app_ref="tests/apps/collapse.py", workdir=tmp_path,
                      settings={"batch_size": 13})
    msg = str(info.value)
    assert '"op": "clean"' in msg and "too many values to unpack" in msg, msg


def test_a_value_nobody_reads_keeps_its_call_but_not_its_conversion():
    """16 functors calling an opaque function (apps/notional.py): every call runs, in
    order, but only the value the sink sees is converted to its declared float."""
    graph = _graph("apps/notional.py", {"n": "16", "opaque": "1"})
    code = render_build(graph, plan_for(graph, "all"), "APP_REF")["pe0.py"]
    loop = code[code.index("out = ["):code.index("]\n", code.index("out = ["))]
    assert loop.count("_u_notional_of(_a1, _a3)") == 16
    assert loop.count("float(") == 1 and "float(_u_notional_of(_a1, _a3)))  # op: f15" in loop


def test_failure_inside_a_collapsed_loop_names_its_operator(tmp_path):
    graph = _graph("tests/apps/collapse.py", {"crash": "77"})
    with pytest.raises(Exception) as info:
        build_and_run(graph, plan_for(graph, "all"), app_ref="tests/apps/collapse.py", workdir=tmp_path)
    msg = str(info.value)
    assert '"op": "calc"' in msg and "ZeroDivisionError" in msg, msg


def test_find_runs_is_deterministic():
    graph = _graph("tests/apps/collapse.py", {})
    a = render_build(graph, plan_for(graph, "all"), "APP_REF")
    b = render_build(graph, plan_for(graph, "all"), "APP_REF")
    assert a == b
    assert collapse.find_runs  # the stage is importable on its own


def test_no_collapse_is_recorded_in_plan_and_deploy(tmp_path):
    import json

    from spadeopt import api

    on = api.build("tests/apps/collapse.py", "all", out=tmp_path / "on")
    off = api.build("tests/apps/collapse.py", "all", out=tmp_path / "off", collapse=False)
    for b, want in ((on, True), (off, False)):
        assert json.loads((b.directory / "plan.json").read_text())["collapse"] is want
        assert json.loads((b.directory / "deploy.json").read_text())["collapse"] is want
        assert ("static run" in (b.directory / "pe0.py").read_text()) is want


def test_a_run_of_pass_throughs_forwards_the_batch():
    graph = _graph("apps/chain.py", {"n": "4"})
    code = render_build(graph, plan_for(graph, "all"), "APP_REF")["pe0.py"]
    assert "static run op0 -> op1 -> op2 -> op3" in code
    assert "out = batch" in code and "for t in batch" not in code, "identity functors never rebuild tuples"
