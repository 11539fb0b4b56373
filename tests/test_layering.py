"""The layering docs/architecture.md draws, checked on the source (every import, also
those inside functions): no circle between modules or packages, compile-time packages
never import the runtime or deploy, nothing imports an entry point, and no module
imports another package's private name."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import networkx as nx
import pytest

PKG = Path(__file__).resolve().parents[1] / "spadeopt"
COMPILE_TIME = {"model", "kinds", "frontend", "plan", "codegen", "optimize", "protocol"}
ENTRY_POINTS = {"spadeopt.cli", "spadeopt.submit"}


def _modules() -> dict[str, Path]:
    mods = {}
    for path in PKG.rglob("*.py"):
        name = ".".join(path.relative_to(PKG.parent).with_suffix("").parts)
        mods[name.removesuffix(".__init__")] = path
    return mods


MODULES = _modules()


def _imports() -> dict[str, set[tuple[str, str | None]]]:
    """module -> {(imported module, imported name or None)} for every spadeopt import."""
    out: dict[str, set[tuple[str, str | None]]] = defaultdict(set)
    for name, path in MODULES.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                out[name] |= {(a.name, None) for a in node.names if a.name.startswith("spadeopt")}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                if base.startswith("spadeopt"):
                    for a in node.names:
                        sub = f"{base}.{a.name}"
                        out[name].add((sub, None) if sub in MODULES else (base, a.name))
    return out


IMPORTS = _imports()


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _edges() -> set[tuple[str, str]]:
    return {(a, b) for a, targets in IMPORTS.items() for b, _ in targets if b in MODULES and a != b}


def test_the_source_is_found():
    assert len(MODULES) > 80 and ("spadeopt.api", "spadeopt.frontend.dsl") in _edges()


def test_no_two_modules_import_each_other_around_a_circle():
    g = nx.DiGraph(_edges())
    cycles = [c for c in nx.simple_cycles(g) if not all(MODULES[m].name == "__init__.py" for m in c)]
    assert not cycles, f"import circles between modules: {cycles[:5]}"


def test_no_two_packages_import_each_other_around_a_circle():
    g = nx.DiGraph({(_package(a), _package(b)) for a, b in _edges() if _package(a) != _package(b)})
    cycles = list(nx.simple_cycles(g))
    why = {f"{p}->{q}": sorted(f"{a} -> {b}" for a, b in _edges() if (_package(a), _package(b)) == (p, q))[:3]
           for c in cycles[:3] for p, q in zip(c, c[1:] + c[:1], strict=True)}
    assert not cycles, f"import circles between packages: {cycles[:5]}; through {why}"


@pytest.mark.parametrize("package", sorted(COMPILE_TIME))
def test_compile_time_code_never_imports_the_runtime_or_deploy(package):
    bad = sorted(f"{a} -> {b}" for a, b in _edges()
                 if _package(a) == package and _package(b) in ("runtime", "deploy", "profiling"))
    assert not bad, bad


def test_nothing_imports_an_entry_point():
    bad = sorted(f"{a} -> {b}" for a, b in _edges() if b in ENTRY_POINTS and a != "spadeopt.__main__")
    assert not bad, bad


def test_no_private_name_is_imported_across_packages():
    bad = sorted(f"{a} imports {b}.{n}" for a, targets in IMPORTS.items() for b, n in targets
                 if n and n.startswith("_") and not n.startswith("__") and _package(a) != _package(b))
    bad += sorted(f"{a} imports {b}" for a, targets in IMPORTS.items() for b, _ in targets
                  if b.rpartition(".")[2].startswith("_") and not b.endswith("__init__")
                  and _package(a) != _package(b))
    assert not bad, bad


def test_a_pe_starts_without_the_compile_time_graph_library():
    """Every PE process imports the runtime and the user's app (hence the DSL): networkx
    (about 140 ms of CPU per process, more than half its start-up) stays out of that path."""
    import subprocess
    import sys

    code = ("import sys, spadeopt.runtime.pe_main, spadeopt.deploy.agent, apps.bargain\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'networkx'))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=PKG.parent)
    assert out.stdout.strip() == "[]", out.stdout


COMPILE_FLOORS = ("protocol", "model", "kinds", "frontend", "plan", "optimize", "codegen")
"""The compile-time floors in pipeline order: each imports only the floors before it."""


def _upward(edges) -> list[str]:
    floor = {p: i for i, p in enumerate(COMPILE_FLOORS)}
    return sorted(f"{a} -> {b}" for a, b in edges
                  if _package(a) in floor and _package(b) in floor and floor[_package(b)] > floor[_package(a)])


def test_compile_time_floors_import_only_the_floors_before_them():
    assert not _upward(_edges()), _upward(_edges())


def test_the_floor_check_catches_an_optimizer_reading_codegen():
    planted = {("spadeopt.optimize.fatm", "spadeopt.codegen.collapse")}
    assert _upward(planted) == ["spadeopt.optimize.fatm -> spadeopt.codegen.collapse"]
