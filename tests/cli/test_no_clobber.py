"""Issue 15: no command destroys a user's files; bad input is refused before any work starts.

Every case goes through the CLI a user types: exit 2 (bad input) with a message naming
the thing, no traceback from spadeopt's own code, and whatever was at an output path
before is byte-identical afterwards (the whole tree is hashed).
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cli.clitools import cli, refused, tree_hash


@pytest.fixture
def mydata(tmp_path: Path) -> Path:
    d = tmp_path / "mydata"
    (d / "sub").mkdir(parents=True)
    (d / "important.txt").write_text("do not lose me\n")
    (d / "sub" / "more.csv").write_text("a,b\n1,2\n")
    return d


# ---- outputs never clobber what is not ours -----------------------------------------------
@pytest.mark.parametrize("command", [
    ["build", "apps/chain.py", "-o"],
    ["optimize", "apps/chain.py", "--profile", "nope.json", "-o"],
    ["run", "apps/chain.py", "--build-dir"],
    ["run", "apps/chain.py", "--out"],
    ["compare", "apps/chain.py", "--out"],
])
def test_a_users_directory_is_refused_and_left_untouched(mydata: Path, command: list[str]) -> None:
    before = tree_hash(mydata)
    proc = cli(*command, str(mydata))
    refused(proc, str(mydata), "important.txt", "--force")
    assert tree_hash(mydata) == before


def test_a_users_file_where_a_directory_goes_is_refused(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    refused(cli("build", "apps/chain.py", "-o", str(notes)), "notes.txt", "is a file")
    assert notes.read_text() == "my notes\n"


def test_a_build_can_be_rebuilt_but_not_once_a_user_file_is_in_it(tmp_path: Path) -> None:
    out = tmp_path / "b"
    assert cli("build", "apps/chain.py", "-o", str(out)).returncode == 0
    first = tree_hash(out)
    assert cli("build", "apps/chain.py", "-o", str(out)).returncode == 0  # our own build: replaced
    assert tree_hash(out) == first  # byte-identical across runs
    (out / "mine.txt").write_text("x")
    before = tree_hash(out)
    refused(cli("build", "apps/chain.py", "-o", str(out)), "mine.txt")
    assert tree_hash(out) == before


def test_force_moves_the_users_directory_aside_and_deletes_nothing(mydata: Path) -> None:
    before = tree_hash(mydata)
    proc = cli("build", "apps/chain.py", "-o", str(mydata), "--force")
    assert proc.returncode == 0, proc.stderr
    assert (mydata / "deploy.json").is_file() and not (mydata / "important.txt").exists()
    backups = list(mydata.parent.glob("mydata.spadeopt-backup-*"))
    assert len(backups) == 1 and tree_hash(backups[0]) == before
    assert str(backups[0]) in proc.stdout + proc.stderr


def test_refine_into_a_directory_is_refused_before_spark(tmp_path: Path) -> None:
    d = tmp_path / "pdir"
    d.mkdir()
    (d / "keep").write_text("k")
    before = tree_hash(d)
    proc = cli("refine", str(tmp_path / "no-run"), "-o", str(d))
    refused(proc, "pdir", "is a directory")
    assert "Spark" not in proc.stderr and tree_hash(d) == before


@pytest.mark.parametrize("command,kind", [
    (["refine", "RUN", "-o"], "profile"),
    (["calibrate", "--quick", "-o"], "calibration"),
])
def test_a_foreign_file_is_not_overwritten(tmp_path: Path, command: list[str], kind: str) -> None:
    f = tmp_path / "thing.json"
    f.write_text('{"mine": true}\n')
    args = [str(tmp_path / "RUN") if a == "RUN" else a for a in command]
    refused(cli(*args, str(f)), "thing.json", f"not a spadeopt {kind} file")
    assert f.read_text() == '{"mine": true}\n'


def test_run_json_refuses_a_foreign_file_before_running(tmp_path: Path) -> None:
    f = tmp_path / "result.json"
    f.write_text("precious\n")
    proc = cli("run", "apps/chain.py", "--json", str(f))
    refused(proc, "result.json", "--json")
    assert f.read_text() == "precious\n"


existing_trees = st.dictionaries(
    st.lists(st.sampled_from(["a", "b", "deploy.json", "plan.json", "pe0.py", "logs", "x.txt", ".spadeopt.json"]),
             min_size=1, max_size=3).map(lambda parts: "/".join(parts)),
    st.binary(max_size=40), min_size=1, max_size=6)


def _materialise(root: Path, tree: dict[str, bytes]) -> bool:
    for rel, data in sorted(tree.items(), key=lambda kv: kv[0].count("/")):
        p = root / rel
        if any(q.is_file() for q in [*p.parents][: rel.count("/")]) or p.is_dir():
            continue  # a path under a file, or a file where a directory was made
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return any(root.iterdir())


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(tree=existing_trees)
def test_random_existing_trees_are_never_modified_without_force(tmp_path_factory, tree: dict[str, bytes]) -> None:
    """Whatever is at the output path, build/run refuse and change nothing."""
    root = tmp_path_factory.mktemp("t") / "out"
    root.mkdir()
    if not _materialise(root, tree):
        return
    before = tree_hash(root)
    refused(cli("build", "apps/chain.py", "-o", str(root)))
    refused(cli("run", "apps/chain.py", "--out", str(root)))
    refused(cli("run", "apps/chain.py", "--build-dir", str(root)))
    assert tree_hash(root) == before


# ---- the user's own code is blamed, at its file and line ----------------------------------
@pytest.mark.parametrize("body,needles", [
    ("def broken(:\n    pass\n", ["SyntaxError", "line 1"]),
    ("import no_such_module_anywhere\n", ["ModuleNotFoundError", "no_such_module_anywhere", "line 1"]),
    ("import spadeopt\n\n@spadeopt.app\ndef app(n: int = 1) -> spadeopt.App:\n    raise ValueError('bad n')\n",
     ["ValueError", "bad n", "line 5", "builder raised"]),
])
def test_app_errors_point_at_the_users_file_and_line(tmp_path: Path, body: str, needles: list[str]) -> None:
    f = tmp_path / "myapp.py"
    f.write_text(body)
    proc = cli("build", str(f), "-o", str(tmp_path / "b"))
    refused(proc, "myapp.py", *needles)
    assert "spadeopt/" not in proc.stderr.replace(str(f), "")  # no frames of spadeopt's own code
    assert not (tmp_path / "b").exists()


# ---- pre-flight: before Spark starts or anything is written -------------------------------
def _csv_app(tmp_path: Path, csv: Path) -> Path:
    f = tmp_path / "csvapp.py"
    f.write_text(textwrap.dedent(f"""
        from spadeopt import App, app

        @app
        def csvapp() -> App:
            a = App("csvapp")
            s = a.source("rows", "k:str, v:int", file={str(csv)!r})
            a.sink("result", s)
            return a
    """))
    return f


def test_a_missing_input_file_is_found_before_spark_starts(tmp_path: Path) -> None:
    app = _csv_app(tmp_path, tmp_path / "missing.csv")
    out = tmp_path / "out"
    proc = cli("run", str(app), "--out", str(out), "--build-dir", str(tmp_path / "b"))
    refused(proc, "source 'rows'", "missing.csv", "does not exist")
    assert not out.exists() and not (tmp_path / "b").exists()
    assert "starting Spark" not in proc.stderr


@pytest.mark.spark
def test_a_bad_csv_value_fails_the_run_and_leaves_no_sink_file(tmp_path: Path) -> None:
    """Only the run finds a bad value: exit 1, the message names file, line and value, and
    --out holds no result.jsonl (sinks are written as parts and committed on success)."""
    csv = tmp_path / "rows.csv"
    csv.write_text("k,v\na,1\nb,2\nc,not-a-number\n")
    app = _csv_app(tmp_path, csv)
    out = tmp_path / "out"
    proc = cli("run", str(app), "--out", str(out), "--build-dir", str(tmp_path / "b"))
    assert proc.returncode == 1, proc.stderr
    assert "rows.csv:4" in proc.stderr and "not-a-number" in proc.stderr and "PE pe0" in proc.stderr, proc.stderr
    assert not (out / "result.jsonl").exists()
    assert not [p for p in out.rglob("*") if p.is_file() and p.name != ".spadeopt.json"], list(out.rglob("*"))


def test_expression_types_are_checked_at_build_time(tmp_path: Path) -> None:
    f = tmp_path / "typed.py"
    f.write_text(textwrap.dedent("""
        from spadeopt import App, app
        from spadeopt.toolkit.sources import counter

        @app
        def typed() -> App:
            a = App("typed")
            s = a.source("src", "seq:int, payload:bytes", generator=counter)
            g = a.functor("names", s, output={"k:str": "str(seq)", "v:str": "'x'", "seq": "seq"})
            a.functor("prod", g, output={"p:str": "k * v"})
            a.functor("concat", g, output={"c:str": "k + seq"})
            a.functor("cmp", g, filter="k < seq")
            a.functor("ok", g, output={"rep:str": "k * seq", "half:float": "seq / 2"})
            return a
    """))
    proc = cli("build", str(f), "-o", str(tmp_path / "b"))
    refused(proc, "functor 'prod' output 'p'", "'k * v'", "str * str",
            "functor 'concat' output 'c'", "str + int", "functor 'cmp' filter", "ordering str against int")
    assert "'ok'" not in proc.stderr  # well-typed expressions pass
    assert not (tmp_path / "b").exists()


def test_profile_without_java_names_java_home_and_writes_nothing(tmp_path: Path) -> None:
    run = tmp_path / "run"
    proc = cli("profile", "apps/chain.py", "-o", str(run), env={"JAVA_HOME": "/nonexistent"})
    refused(proc, "JAVA_HOME=/nonexistent")
    assert not (run / "build").exists()


@pytest.mark.parametrize("master,needles", [
    ("local[1]", ["local[1] offers 1 core", "--master local[2]"]),
    ("nonsense://x", ["'nonsense://x' is not a Spark master URL"]),
    ("local-cluster[1,1,512]", ["1 executor(s)", "2 node(s)"]),
])
def test_bad_masters_are_refused_in_one_line(tmp_path: Path, master: str, needles: list[str]) -> None:
    nodes = ["--nodes", "2", "--cores", "1"] if master.startswith("local-cluster") else []
    proc = cli("run", "apps/chain.py", *nodes, "--master", master, "--build-dir", str(tmp_path / "b"))
    refused(proc, *needles)
    assert len(proc.stderr.strip().splitlines()) == 1 and "java" not in proc.stderr.lower()
    assert not (tmp_path / "b").exists()


# ---- consistency and small flags ----------------------------------------------------------
def test_run_refuses_a_build_whose_plan_was_edited(tmp_path: Path) -> None:
    b = tmp_path / "b"
    assert cli("build", "apps/chain.py", "--fusion", "all", "-o", str(b)).returncode == 0
    plan = json.loads((b / "plan.json").read_text())
    ops = plan["pes"][0]["operators"]
    plan["pes"] = [{**plan["pes"][0], "operators": ops[:1]}, {"pe": "pe1", "operators": ops[1:], "node": 0}]
    (b / "plan.json").write_text(json.dumps(plan))
    refused(cli("run", str(b)), "plan.json", "does not match", "deploy.json", "pe1")


def test_explain_on_a_corrupt_explain_json_names_the_file(tmp_path: Path) -> None:
    b = tmp_path / "b"
    assert cli("build", "apps/chain.py", "-o", str(b)).returncode == 0
    (b / "explain.json").write_text("{corrupt")
    refused(cli("explain", str(b)), "explain.json", "regenerate")


def test_place_outside_the_cluster_is_refused_under_every_strategy(tmp_path: Path) -> None:
    for fusion in ("none", "all", "manual"):
        proc = cli("build", "apps/bargain.py", "-p", "nodes=2", "--nodes", "1", "--fusion", fusion,
                   "-o", str(tmp_path / fusion))
        refused(proc, "on node 1", "--nodes 2")


@pytest.mark.parametrize("args,needle", [
    (["profile", "apps/chain.py", "--sample-rate", "2", "-o", "RUN"], "--sample-rate"),
    (["show", "PROFILE", "--top", "-1"], "--top"),
    (["compare", "apps/chain.py", "--sample-rate", "0", "--out", "OUT"], "--sample-rate"),
])
def test_flag_errors_name_the_flag(tmp_path: Path, args: list[str], needle: str) -> None:
    subst = {"RUN": str(tmp_path / "run"), "PROFILE": str(tmp_path / "p.json"), "OUT": str(tmp_path / "o")}
    refused(cli(*[subst.get(a, a) for a in args]), needle)
    assert not any(tmp_path.iterdir())
