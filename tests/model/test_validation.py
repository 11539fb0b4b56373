"""Invalid apps: one GraphError listing every problem, and exit code 2 from the CLI."""

from __future__ import annotations

import pytest

from spadeopt import App, count_window
from spadeopt.errors import GraphError
from spadeopt.toolkit.sources import counter
from tests.apps import bad_apps
from tests.cli.clitools import cli


def _problems(app: App) -> list[str]:
    with pytest.raises(GraphError) as exc:
        app.build()
    return exc.value.problems


def test_valid_app_builds_with_derived_schemas():
    a = App("ok")
    s = a.source("src", "seq:int, x:float", generator=counter)
    f = a.functor("f", s, output={"seq": "seq", "y:float": "x * 2"}, filter="x > 0")
    g = a.aggregate("agg", f, window=count_window(4), by=["seq"], output={"seq": "seq", "n": "count()", "m": "avg(y)"})
    a.sink("k", g)
    graph = a.build()
    assert str(graph.op("f").out_port("out").schema) == "seq:int, y:float"
    assert str(graph.op("agg").out_port("out").schema) == "seq:int, n:int, m:float"
    assert len(graph.fingerprint) == 16


def test_every_problem_is_reported_at_once():
    problems = _problems(bad_apps.everything_wrong())
    text = "\n".join(problems)
    assert len(problems) >= 6, text
    assert "unknown port 'src.nope'" in text
    assert "unknown operator 'ghost'" in text
    assert "schema mismatch at 'u.in'" in text
    assert "duplicate operator name 'f'" in text
    assert "not connected" in text
    assert "unknown name 'q'" in text


def test_unknown_port_is_named_with_the_ports_that_exist():
    a = App("p")
    a.source("src", "x:int", generator=counter)
    a.sink("k", "src.outt")
    (problem,) = _problems(a)
    assert "src.outt" in problem and "has output ports: out" in problem


def test_feedback_loop_into_tuple_generating_port_inside_one_pe_is_rejected():
    problems = _problems(bad_apps.colocated_loop(tuple_generating=True))
    assert any("loop" in p and "fb.back" in p for p in problems), problems


def test_feedback_loop_into_non_tuple_generating_port_is_fine():
    graph = bad_apps.colocated_loop(tuple_generating=False).build()
    assert graph.op("fb").in_port("back").tuple_generating is False


def test_annotation_problems():
    a = App("ann")
    s = a.source("src", "x:int", generator=counter)
    f = a.functor("f", s)
    a.sink("k", f)
    a.colocate("f", "k")
    a.exlocate("f", "k")
    a.place("nobody", 1)
    problems = _problems(a)
    assert any("conflicts with colocate" in p for p in problems)
    assert any("unknown operator 'nobody'" in p for p in problems)


def test_cli_exit_code_2_and_lists_problems(tmp_path):
    proc = cli("build", "tests/apps/bad_apps.py:broken", "-o", tmp_path / "b")
    assert proc.returncode == 2, proc.stderr
    assert "is invalid" in proc.stderr and "Traceback" not in proc.stderr
    assert "unknown operator 'ghost'" in proc.stderr and "duplicate operator name" in proc.stderr
    assert not (tmp_path / "b").exists(), "nothing is written for an invalid app"


def test_cli_rejects_unknown_parameter(tmp_path):
    proc = cli("build", "apps/chain.py", "-p", "nope=1", "-o", tmp_path / "b")
    assert proc.returncode == 2
    assert "unknown parameter 'nope'" in proc.stderr and "n=8" in proc.stderr


def test_identifiers_are_whole_names():
    """Issue 25: a trailing newline is not part of an identifier ($ matched before it)."""
    from spadeopt.model.schema import is_file_name, is_identifier, is_port_name

    assert is_identifier("name") and not is_identifier("name\n") and not is_identifier("in")
    assert is_port_name("in") and not is_port_name("out\n")
    assert is_file_name("pe0") and is_file_name("my-app.v2")
    for bad in ("pe0\n", "../x", "/abs", "a/b", ".hidden", "-x", "a..b", "", "x" * 101, None):
        assert not is_file_name(bad), bad


@pytest.mark.parametrize("name", ["a/b", "app\nimport os", "..", "", "x" * 101])
def test_an_app_name_that_cannot_name_a_folder_is_refused(name):
    a = App(name)
    a.sink("k", a.source("src", "x:int", generator=counter))
    (problem,) = _problems(a)
    assert repr(name)[:60] in problem and "app name" in problem and "App(" in problem


def test_names_with_a_newline_are_refused():
    a = App("names")
    s = a.source("src\n", "x:int", generator=counter)
    outs = a.custom("c", bad_apps.Echo, inputs={"in\nx": s}, outputs={"out\n": "x:int"})
    a.sink("k", list(outs.values()))
    a.parallel("c", name="r\n")
    text = "\n".join(_problems(a))
    assert "operator name 'src\\n'" in text and "port name 'in\\nx'" in text and "port name 'out\\n'" in text
    assert "parallel region name 'r\\n'" in text


def test_a_function_named_like_an_input_attribute_is_refused_naming_both():
    from tests.toolkit.gens import halve

    a = App("shadow")
    s = a.source("src", "seq:int, halve:float", generator=counter)
    a.sink("k", a.functor("f", s, output={"y:float": "halve(seq)"}, functions=[halve]))
    j = a.join("j", s, s, on="seq", order="seq", window=(count_window(1), count_window(1)),
               output={"seq": "left.seq"}, functions=[halve])
    a.sink("k2", j)
    text = "\n".join(_problems(a))
    assert "functor 'f'" in text and "join 'j'" in text, text
    assert "function 'halve' has the name of input attribute 'halve'" in text, text


def test_unknown_operator_kinds_are_refused_listing_the_known_ones():
    from spadeopt.errors import UsageError

    with pytest.raises(UsageError, match="unknown operator kind 'nope'; known kinds: aggregate, custom"):
        App("k").operator("nope", "x")
