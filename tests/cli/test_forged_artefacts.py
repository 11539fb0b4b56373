"""Issue 25: a build's files read back from disk cannot name files outside their folder or
reach generated code.

A forged plan.json, deploy.json or explain.json goes through the CLI a user types: exit 2
naming the file, the field (its JSON path) and the value, before Spark starts, and nothing
changes on disk (every file under the test's folder and the repository's build/ is hashed).
"""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from spadeopt import api
from spadeopt.codegen.render import generate
from spadeopt.errors import ArtefactError
from spadeopt.optimize.fatm import OperatorProfile, fuse_auto
from spadeopt.optimize.problem import LinearCommModel
from spadeopt.plan.artefacts import check_deploy, check_plan_json, read_explain
from tests.cli.clitools import ROOT, cli, refused, tree_hash

CHAIN = str(ROOT / "apps" / "chain.py")
APP = ["-p", "n=2", "--nodes", "2"]  # src, op0, op1, sink: one PE each under NONE, on nodes 0 and 1


def _hashes(tmp: Path) -> tuple[str, str]:
    build = ROOT / "build"
    return tree_hash(tmp), tree_hash(build) if build.exists() else ""


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A NONE build of the chain app on two nodes, to forge its files from."""
    b = tmp_path_factory.mktemp("original") / "b"
    proc = cli("build", CHAIN, *APP, "-o", str(b))
    assert proc.returncode == 0, proc.stderr
    return b


def _forge(src: Path, dst: Path, change: Callable[[dict], None]) -> Path:
    doc = json.loads(src.read_text())
    change(doc)
    dst.write_text(json.dumps(doc))
    return dst


def _set(path: str, value: object) -> Callable[[dict], None]:
    """Set the field at a JSON path such as ``pes[0].pe``."""
    *parents, last = path.replace("]", "").replace("[", ".").split(".")

    def change(doc: dict) -> None:
        for p in parents:
            doc = doc[int(p)] if p.isdigit() else doc[p]
        doc[int(last) if last.isdigit() else last] = value

    return change


FORGED_PLANS = [
    ("pes[0].pe", "../escaped"),
    ("pes[0].pe", "/tmp/spadeopt-absolute-pe"),
    ("pes[0].pe", "pe0\nimport os"),
    ("pes[0].operators[0]", "src\nimport os"),
    ("regions[0].width", 10**6),
    ("regions[0].name", "ops\nx"),
    ("pes[1].node", -1),
    ("pes[1].node", 2),  # the plan has nodes 0 and 1
    ("nodes", 10**9),
    ("strategy", "../../../escaped"),  # the default build folder is build/<app>/<strategy>
]


@pytest.mark.parametrize(("field", "value"), FORGED_PLANS, ids=[f"{f}={v!r}" for f, v in FORGED_PLANS])
def test_a_forged_plan_is_refused_and_nothing_is_written(original: Path, tmp_path: Path, field: str,
                                                         value: object) -> None:
    forged = _forge(original / "plan.json", tmp_path / "forged.json", _set(field, value))
    work = tmp_path / "work"
    (work / "mine").mkdir(parents=True)
    (work / "mine" / "notes.txt").write_text("mine\n")
    before = _hashes(tmp_path)
    for args in (["build", "-o", str(work / "out")],  # a new folder
                 ["build", "-o", str(work / "mine"), "--force"],  # a user's folder is not even moved aside
                 ["run", "--build-dir", str(work / "out")],
                 ["run"]):  # the default folder, build/<app>/<strategy> under the working directory
        proc = cli(args[0], CHAIN, *APP, "--fusion", str(forged), *args[1:], cwd=work)
        refused(proc, str(forged), field, repr(value))
        assert "starting Spark" not in proc.stdout + proc.stderr
        assert _hashes(tmp_path) == before, args


def test_every_bad_field_is_named_at_once(original: Path, tmp_path: Path) -> None:
    def change(doc: dict) -> None:
        doc["pes"][0]["pe"] = "../a"
        doc["pes"][1]["pe"] = "pe2"  # the id of pes[2]
        doc["regions"][0]["width"] = 0

    forged = _forge(original / "plan.json", tmp_path / "forged.json", change)
    proc = cli("build", CHAIN, *APP, "--fusion", str(forged), "-o", str(tmp_path / "out"))
    refused(proc, "pes[0].pe = '../a'", "pes[2].pe = 'pe2'", "used once", "regions[0].width = 0", "3 problems")
    assert not (tmp_path / "out").exists()


FORGED_DEPLOYS = [
    ("pes[0].module", "/tmp/spadeopt-evil.py"),
    ("pes[0].pe", "../escaped"),
    ("pes[1].node", 7),
    ("links[0].dst_pe", "nobody"),
    ("links[0].dst", "op0.in\nx"),
    ("batch_size", 0),
    ("profile", {"run_dir": "/tmp/spadeopt-elsewhere"}),
]


@pytest.mark.parametrize(("field", "value"), FORGED_DEPLOYS, ids=[f"{f}={v!r}" for f, v in FORGED_DEPLOYS])
def test_a_forged_deploy_is_refused_before_spark_starts(original: Path, tmp_path: Path, field: str,
                                                        value: object) -> None:
    b = tmp_path / "b"
    shutil.copytree(original, b)
    _forge(b / "deploy.json", b / "deploy.json", _set(field, value))
    before = _hashes(tmp_path)
    proc = cli("run", str(b), "--out", str(tmp_path / "out"))
    refused(proc, str(b / "deploy.json"), field, repr(value))
    assert "starting Spark" not in proc.stdout + proc.stderr
    assert _hashes(tmp_path) == before


@pytest.fixture(scope="module")
def optimized(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An FATM build of the chain app with its explain.json, planned from a synthetic profile."""
    graph, ref = api.load_graph("apps/chain.py", {"n": "4"})
    links = tuple((s.src.op, s.dst.op, 10_000.0, 100.0) for s in graph.streams)
    prof = OperatorProfile(graph.name, graph.fingerprint, {op.name: 0.3 for op in graph.operators}, links)
    auto = fuse_auto(graph, prof, LinearCommModel(2e-6), nodes=2, cores=2)
    b = tmp_path_factory.mktemp("optimized") / "b"
    generate(graph, auto.plan, b, ref)
    api.write_json(b / "explain.json", {**auto.explain, "calibration": "synthetic"})
    assert len(auto.plan.pes) > 1 and auto.explain["pe_links"] and auto.explain["not_merged"]
    return b


FORGED_EXPLAINS = [
    ("pes[0].pe", 'pe0" -> "x'),  # would close the DOT string it is drawn in
    ("pes[0].node", 10**9),
    ("pes[0].operators[0]", "src\nx"),
    ("pe_links[0].src", "pe0\n"),
    ("pe_links[0].rate", float("nan")),
    ("not_merged[0].why", "\x1b]0;a terminal title\x07"),
    ("objective", "lots"),
]


@pytest.mark.parametrize(("field", "value"), FORGED_EXPLAINS, ids=[f"{f}={v!r}" for f, v in FORGED_EXPLAINS])
def test_a_forged_explain_is_refused(optimized: Path, tmp_path: Path, field: str, value: object) -> None:
    b = tmp_path / "b"
    shutil.copytree(optimized, b)
    dot = tmp_path / "plan.dot"
    assert cli("explain", str(b), "--dot", str(dot)).returncode == 0
    dot.unlink()
    _forge(b / "explain.json", b / "explain.json", _set(field, value))
    before = _hashes(tmp_path)
    proc = cli("explain", str(b), "--dot", str(dot))
    refused(proc, str(b / "explain.json"), field, repr(value))
    assert _hashes(tmp_path) == before and not dot.exists()


def test_what_spadeopt_writes_passes(optimized: Path) -> None:
    """The checks accept every build spadeopt writes: the golden builds and an optimized one."""
    golden = sorted((ROOT / "tests" / "codegen" / "golden").iterdir())
    for d in [*golden, optimized]:
        check_plan_json(json.loads((d / "plan.json").read_text()), d / "plan.json")
        check_deploy(json.loads((d / "deploy.json").read_text()), d / "deploy.json")
    read_explain(optimized / "explain.json")


def test_the_error_carries_the_file_and_every_field(optimized: Path) -> None:
    doc = json.loads((optimized / "deploy.json").read_text())
    bad = copy.deepcopy(doc)
    bad["pes"][0]["pe"], bad["nodes"] = "a/b", True
    with pytest.raises(ArtefactError) as exc:
        check_deploy(bad, "x/deploy.json")
    assert exc.value.path == "x/deploy.json" and exc.value.exit_code == 2
    assert any(p.startswith("pes[0].pe = 'a/b'") for p in exc.value.problems)
    assert any(p.startswith("nodes = True") for p in exc.value.problems)
