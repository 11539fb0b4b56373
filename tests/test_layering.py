"""The layering docs/architecture.md draws, checked on the source (every import, also
those inside functions): no circle between modules or packages, every package on its
floor in pipeline order importing only the floors before it (``FLOORS``), the runners
(runtime, deploy, ...) never importing the compiler (``RUNNERS``), compile-time packages
never importing the runtime or deploy, nothing importing an entry point, and no module
imports another package's private name. Also the house rules: no module over 600 lines
and no function over 80 (an explicit allow-list aside), and control messages made and
read only through ``spadeopt.control``. Each rule's check is shown catching a planted
violation."""

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


FLOORS = (
    "errors", "atomic", "output_paths", "protocol", "fieldcheck", "control",  # the ground: no compiler, no runner
    "model", "wire", "connectors", "toolkit", "kinds", "frontend", "spadeopt",  # spadeopt: the DSL facade
    "plan", "optimize", "codegen",  # the compiler, in pipeline order
    "profiling", "runtime", "live", "deploy",  # the runners: a build goes in, results come out
    "orchestrate", "refine", "api",  # build-then-run, profiles and calibration, one call per command
    "adaptive",  # run --adaptive: measure, re-plan, switch at a checkpoint (record 069)
    "bench", "console", "submit", "cli_services", "cli", "__main__",  # entry points and their terminal output
)
"""Every package (and top-level module) in pipeline order: each imports only the floors
before it (docs/architecture.md)."""
COMPILER = {"kinds", "frontend", "spadeopt", "optimize", "codegen"}
RUNNERS = {"profiling": COMPILER | {"plan"}, "runtime": COMPILER | {"plan"}, "live": COMPILER | {"plan"},
           "deploy": COMPILER}
"""What each runner floor never imports although it sits above it: the compiler. deploy
reads ``plan`` (the Deployment and the build files' schema), the others not even that;
what builds and then runs is ``orchestrate``'s, above deploy (record 065)."""
RUNNER_EXCEPTIONS = {
    ("spadeopt.runtime.zygote", "spadeopt"):
        "the zygote preloads the DSL that every user app module imports, so that forked PEs do not import it "
        "each; the runtime itself calls nothing of it",
}
"""Edges a runner floor keeps into the compiler, each with its reason."""


def _upward(edges) -> list[str]:
    floor = {p: i for i, p in enumerate(FLOORS)}
    return sorted(f"{a} -> {b}" for a, b in edges
                  if _package(a) in floor and _package(b) in floor and floor[_package(b)] > floor[_package(a)])


def _runner_reads_the_compiler(edges) -> list[str]:
    return sorted(f"{a} -> {b}" for a, b in edges if (a, b) not in RUNNER_EXCEPTIONS
                  and _package(b) in RUNNERS.get(_package(a), ()))


def test_every_package_has_a_floor():
    assert {_package(m) for m in MODULES} <= set(FLOORS), sorted({_package(m) for m in MODULES} - set(FLOORS))


def test_floors_import_only_the_floors_before_them():
    assert not _upward(_edges()), _upward(_edges())


def test_runners_never_import_the_compiler():
    assert not _runner_reads_the_compiler(_edges()), _runner_reads_the_compiler(_edges())


def test_the_runner_exceptions_name_only_edges_that_exist():
    assert set(RUNNER_EXCEPTIONS) <= _edges(), sorted(set(RUNNER_EXCEPTIONS) - _edges())


def test_the_floor_check_catches_an_optimizer_reading_codegen():
    planted = {("spadeopt.optimize.fatm", "spadeopt.codegen.collapse")}
    assert _upward(planted) == ["spadeopt.optimize.fatm -> spadeopt.codegen.collapse"]


def test_the_floor_check_catches_deploy_reading_api_and_refine_reading_orchestrate_backwards():
    planted = {("spadeopt.deploy.launcher", "spadeopt.api"), ("spadeopt.orchestrate.build_local", "spadeopt.refine.job"),
               ("spadeopt.runtime.pe", "spadeopt.deploy.agent"), ("spadeopt.api", "spadeopt.deploy.launcher")}
    assert _upward(planted) == ["spadeopt.deploy.launcher -> spadeopt.api",
                                "spadeopt.orchestrate.build_local -> spadeopt.refine.job",
                                "spadeopt.runtime.pe -> spadeopt.deploy.agent"]


def test_the_runner_check_catches_deploy_building_a_plan_or_code():
    planted = {("spadeopt.deploy.local", "spadeopt.codegen.render"),
               ("spadeopt.deploy.verify", "spadeopt.optimize.strategies"),
               ("spadeopt.runtime.pe", "spadeopt.plan.plan"), ("spadeopt.runtime.loader", "spadeopt.frontend.dsl"),
               ("spadeopt.deploy.launcher", "spadeopt.plan.artefacts"), ("spadeopt.runtime.zygote", "spadeopt")}
    assert _runner_reads_the_compiler(planted) == [
        "spadeopt.deploy.local -> spadeopt.codegen.render", "spadeopt.deploy.verify -> spadeopt.optimize.strategies",
        "spadeopt.runtime.loader -> spadeopt.frontend.dsl", "spadeopt.runtime.pe -> spadeopt.plan.plan"]


# ---- sizes: no module over 600 lines, no function over 80 ------------------------------

MAX_MODULE_LINES, MAX_FUNCTION_LINES = 600, 80
SIZE_ALLOWED: set[str] = set()  # nothing is too long today; an entry names a module or function waiting to be split


def oversized(module: str, source: str) -> list[str]:
    """``module`` itself when it has more than ``MAX_MODULE_LINES`` lines, and every
    function (methods and nested functions too, named by their qualified path) longer
    than ``MAX_FUNCTION_LINES``, from its ``def`` line to its last."""
    found = [module] if len(source.splitlines()) > MAX_MODULE_LINES else []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}.{child.name}"
                if not isinstance(child, ast.ClassDef) and child.end_lineno - child.lineno + 1 > MAX_FUNCTION_LINES:
                    found.append(name)
                walk(child, name)
            else:
                walk(child, prefix)

    walk(ast.parse(source), module)
    return found


def test_no_module_or_function_is_too_long():
    bad = sorted(name for mod, path in MODULES.items() for name in oversized(mod, path.read_text())
                 if name not in SIZE_ALLOWED)
    assert not bad, f"over {MAX_MODULE_LINES} lines (module) or {MAX_FUNCTION_LINES} (function): {bad}"


def test_the_size_allow_list_names_only_what_exists_and_is_still_too_long():
    still = {name for mod, path in MODULES.items() for name in oversized(mod, path.read_text())}
    assert SIZE_ALLOWED <= still, f"fits now, drop it from SIZE_ALLOWED: {sorted(SIZE_ALLOWED - still)}"


def test_the_size_check_catches_a_planted_module_and_function():
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))  # with its def: one line too many
    source = f"class C:\n    def long(self):\n{body.replace(chr(10), chr(10) + '    ')}\n"
    source = source.replace("    x0", "        x0", 1)
    assert oversized("m", source) == ["m.C.long"]
    assert oversized("m", f"def f():\n{body}\n") == ["m.f"]
    assert oversized("m", "def f():\n    pass\n") == []
    assert oversized("m", "x = 1\n" * (MAX_MODULE_LINES + 1)) == ["m"]
    assert oversized("m", "x = 1\n" * MAX_MODULE_LINES) == []


# ---- control messages go through spadeopt.control only ---------------------------------

CONTROL = "spadeopt.control"
MESSAGE_TYPE_KEYS = {"t", "event", "cmd"}  # what the control plane named a message's type by, before control.py


def _is_type_key(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value in MESSAGE_TYPE_KEYS


def _is_str(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def hand_made_messages(source: str) -> list[str]:
    """Control messages made or read by hand in ``source``: a dict literal that maps a
    message-type key (``t``, ``event``, ``cmd``) to a string (``{"t": "hello", ...}``),
    and a comparison of ``x["t"]`` or ``x.get("t")`` with a string (``doc.get("t") ==
    "trigger"``). A ``"t"`` that holds a time (``{"t": time.time()}``) is not one."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Dict):
            found += [f"line {node.lineno}: {{{k.value!r}: {v.value!r}, ...}}" for k, v in zip(node.keys, node.values,
                      strict=True) if _is_type_key(k) and _is_str(v)]
        elif isinstance(node, ast.Compare) and any(_is_str(c) for c in [node.left, *node.comparators]):
            for side in (node.left, *node.comparators):
                if isinstance(side, ast.Subscript) and _is_type_key(side.slice) or (
                        isinstance(side, ast.Call) and isinstance(side.func, ast.Attribute)
                        and side.func.attr == "get" and side.args and _is_type_key(side.args[0])):
                    found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_control_messages_are_made_and_read_only_by_the_control_module():
    bad = {mod: hits for mod, path in MODULES.items() if mod != CONTROL
           if (hits := hand_made_messages(path.read_text()))}
    assert not bad, f"use a spadeopt.control record instead: {bad}"


def test_the_control_check_catches_planted_messages():
    assert len(hand_made_messages('sock.send(msgpack.packb({"t": "hello", "pe": pe}))')) == 1
    assert len(hand_made_messages('say({"event": "done", "stats": stats})')) == 1
    assert len(hand_made_messages('if doc.get("t") == "trigger":\n    pass')) == 1
    assert len(hand_made_messages('if ev["event"] == "bound":\n    pass')) == 1
    assert len(hand_made_messages('ok = "exit" != cmd["cmd"]')) == 1
    assert hand_made_messages('doc = {"t": time.time(), "pe": pe}') == []  # a time, not a message type
    assert hand_made_messages('if ev["event"] & FAILURES:\n    pass') == []


# ---- an operator kind's name is tested only inside kinds/ -------------------------------

def kind_name_tests(source: str, names: set[str]) -> list[str]:
    """Where ``source`` tests an operator's kind by name: ``x.kind == "join"``, ``!=``,
    ``in ("source", ...)``, with a name in ``names``. Outside ``spadeopt/kinds/`` such a
    test belongs in the kind's record (a ``Kind`` field or function), so a new kind is one
    module. A ``.kind`` compared with a string that names no kind (a master's ``"local"``,
    a failure's ``"link"``) is not one."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        if not any(isinstance(x, ast.Attribute) and x.attr == "kind" for x in sides):
            continue
        for x in sides:
            consts = x.elts if isinstance(x, ast.Tuple | ast.List | ast.Set) else [x]
            if any(isinstance(c, ast.Constant) and c.value in names for c in consts):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
                break
    return found


def test_kind_names_are_tested_only_inside_kinds():
    from spadeopt.kinds import KINDS

    bad = {mod: hits for mod, path in MODULES.items() if not mod.startswith("spadeopt.kinds")
           if (hits := kind_name_tests(path.read_text(), set(KINDS)))}
    assert not bad, f"ask the kind's record (spadeopt.kinds) instead: {bad}"


def test_the_kind_name_check_catches_planted_tests():
    names = {"source", "join", "custom"}
    assert len(kind_name_tests('if op.kind == "join":\n    pass', names)) == 1
    assert len(kind_name_tests('xs = [o for o in ops if o.kind != "source"]', names)) == 1
    assert len(kind_name_tests('ok = graph.op(n).kind in ("custom", "join")', names)) == 1
    assert kind_name_tests('if master.kind == "local":\n    pass', names) == []  # not an operator kind
    assert kind_name_tests('if op.name == "join":\n    pass', names) == []


# ---- no two modules share a file name ----------------------------------------------------

def shared_file_names(paths: list[Path]) -> dict[str, list[str]]:
    """File names (but ``__init__.py``) held by more than one module of ``paths``."""
    by: dict[str, list[str]] = defaultdict(list)
    for p in paths:
        if p.name != "__init__.py":
            by[p.name].append(str(p))
    return {n: sorted(ps) for n, ps in by.items() if len(ps) > 1}


def test_no_two_modules_share_a_file_name():
    shared = shared_file_names(list(MODULES.values()))
    assert not shared, f"name each module for what it holds, once: {shared}"


def test_the_file_name_check_catches_a_planted_twin():
    assert shared_file_names([Path("a/base.py"), Path("b/base.py"), Path("a/__init__.py"), Path("b/__init__.py")]) \
        == {"base.py": ["a/base.py", "b/base.py"]}


def test_the_runtime_never_imports_the_frontend():
    """PEs import user modules (``runtime.loader``) but never the App builder: finding the
    app in a module is ``api.load_app``'s, above both."""
    bad = sorted(f"{a} -> {b}" for a, b in _edges() if _package(a) == "runtime" and _package(b) == "frontend")
    assert not bad, bad


# ---- strategy names are the strategies module's only --------------------------------

STRATEGIES_MODULE = "spadeopt.optimize.strategies"
STRATEGY_NAMES = {"none", "all", "manual", "auto", "fixed"}  # the registered ones (checked below)
HOLDS_A_STRATEGY = ("strategy", "fusion", "st")  # a variable named so, or ending in _strategy / _fusion


def _holds_a_strategy(node: ast.AST) -> bool:
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return any(name == n or name.endswith(f"_{n}") for n in HOLDS_A_STRATEGY)


def _names_a_strategy(node: ast.AST) -> bool:
    """A strategy name as a string literal, or a tuple, list or set holding one."""
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_names_a_strategy(e) for e in node.elts)
    return isinstance(node, ast.Constant) and node.value in STRATEGY_NAMES


def special_cased_strategies(source: str) -> list[str]:
    """Strategy names special-cased in ``source``: a variable that holds a strategy or a
    fusion (``strategy``, ``plan.strategy``, ``args.fusion``, ``st``, ``profile_fusion``)
    compared with a strategy name or a collection holding one (``plan.strategy ==
    "manual"``, ``st in ("all", "manual")``), and a dict literal keyed by two or more
    strategy names (``{"none": "NONE", "all": "FALL"}``). Choosing a strategy
    (``plan_for(graph, "none")``) is not one: asking what it is or does is the
    ``Strategy``'s (``STRATEGY_BY_NAME``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_holds_a_strategy(s) for s in sides) and any(_names_a_strategy(s) for s in sides):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Dict):
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant) and k.value in STRATEGY_NAMES]
            if len(keys) >= 2:
                found.append(f"line {node.lineno}: a dict keyed by strategies {keys}")
    return found


def test_strategy_names_are_special_cased_only_by_the_strategies_module():
    bad = {mod: hits for mod, path in MODULES.items() if mod != STRATEGIES_MODULE
           if (hits := special_cased_strategies(path.read_text()))}
    assert not bad, f"ask the Strategy (optimize.strategies.STRATEGY_BY_NAME) instead: {bad}"


def test_the_strategy_check_knows_every_registered_name():
    from spadeopt.optimize.strategies import STRATEGY_BY_NAME

    assert set(STRATEGY_BY_NAME) == STRATEGY_NAMES


def test_the_strategy_check_catches_planted_special_cases():
    assert len(special_cased_strategies('w = widths.get(n, declared if strategy == "manual" else 1)')) == 1
    assert len(special_cased_strategies('if plan.strategy not in {"none", "all", "fixed"}:\n    pass')) == 1
    assert len(special_cased_strategies('key = "fatm_plan" if st == "auto" else st')) == 1
    assert len(special_cased_strategies('ok = "auto" != args.fusion')) == 1
    assert len(special_cased_strategies('if profile_fusion in ("none", "all"):\n    pass')) == 1
    assert len(special_cased_strategies('LABELS = {"none": "NONE", "all": "FALL", "auto": "FATM"}')) == 1
    assert special_cased_strategies('plan = plan_for(graph, "none")') == []  # choosing one, not asking
    assert special_cased_strategies('if strategy == FATM.name:\n    pass') == []
    assert special_cased_strategies('if mode == "all":\n    pass') == []  # not a strategy variable
    assert special_cased_strategies('doc = {"all": 1, "some": 2}') == []
