"""Generated code: deterministic, compiled, specialised, and matching the golden files."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from spadeopt.api import load_graph
from spadeopt.codegen.render import render_build
from spadeopt.optimize.strategies import plan_for

GOLDEN = Path(__file__).parent / "golden"


def _files(app: str, fusion: str, params: dict[str, str], collapse: bool = True) -> dict[str, str]:
    graph, ref = load_graph(app, params)
    return render_build(graph, dataclasses.replace(plan_for(graph, fusion), collapse=collapse), "APP_REF")


@pytest.mark.parametrize("fusion", ["none", "all", "manual"])
def test_generated_code_is_byte_identical_across_runs(fusion):
    assert _files("apps/chain.py", fusion, {"n": "5"}) == _files("apps/chain.py", fusion, {"n": "5"})


@pytest.mark.parametrize("name,app,fusion,params,collapse", [
    ("chain_all", "apps/chain.py", "all", {"n": "3", "work": "10"}, True),
    ("chain_all_nocollapse", "apps/chain.py", "all", {"n": "3", "work": "10"}, False),
    ("chain_none", "apps/chain.py", "none", {"n": "2"}, True),
    ("collapse_all", "tests/apps/collapse.py", "all", {}, True),
])
def test_golden(name, app, fusion, params, collapse):
    files = _files(app, fusion, params, collapse)
    gold = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        gold.mkdir(parents=True, exist_ok=True)
        for f in gold.iterdir():
            f.unlink()
        for fname, text in files.items():
            (gold / fname).write_text(text)
    expected = {p.name: p.read_text() for p in sorted(gold.iterdir())}
    assert files == expected, "generated code changed; if intended, rerun with UPDATE_GOLDEN=1"


def test_expressions_are_specialised_to_positional_reads():
    files = _files("apps/chain.py", "all", {"n": "1", "work": "7"})
    code = files["pe0.py"]
    assert "_u_spin(t[1], 7)" in code
    loops = [line for line in code.splitlines() if "for t in batch" in line]
    assert loops and not any("payload" in line for line in loops), "no attribute look-ups per tuple"


def test_fused_operators_call_each_other_directly():
    code = _files("apps/chain.py", "all", {"n": "3"}, collapse=False)["pe0.py"]
    assert "_3op1__in(out)" in code and "_3op2__in(out)" in code and "_4sink__in(out)" in code
    assert "rt.sender" not in code, "a fully fused PE has no exposed ports"


def test_singleton_pes_have_no_locks_and_expose_ports():
    files = _files("apps/chain.py", "none", {"n": "2"})
    for name, code in files.items():
        if name.endswith(".py"):
            assert "rt.lock()" not in code
    assert 'rt.sender("op0.out"' in files["pe1.py"] and 'rt.input("op0.in"' in files["pe1.py"]
