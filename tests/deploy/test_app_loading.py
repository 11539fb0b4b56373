"""Loading and shipping an app touch nothing around it: files next to the app named
like standard-library or installed modules shadow nothing (in the CLI or in a PE),
and only the app's own module or package travels with the job, within a size limit."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from spadeopt.deploy import ship
from spadeopt.errors import AppError, UsageError

ROOT = Path(__file__).resolve().parents[2]
SHADOWS = ("json", "random", "msgpack")  # a stdlib package, a stdlib module, an installed package

APP = '''from __future__ import annotations

import json
import random

from spadeopt import App, app
from spadeopt.toolkit.sources import counter
{sibling}

{tag}

@app
def shadowed(tuples: int = 300) -> App:
    a = App("shadowed")
    s = a.source("src", "seq:int, payload:bytes", generator=counter, args={{"n": tuples, "size": 20}})
    t = a.functor("tag", s, output={{"seq": "seq", "t:str": "tag(seq)"}}, functions=[tag])
    a.sink("out", a.functor("fwd", t))
    return a


app = shadowed
'''
TAG = '''def tag(seq: int) -> str:
    return json.dumps([seq, random.Random(seq).randint(0, 9)])
'''


def _shadows(folder: Path) -> None:
    for name in SHADOWS:
        (folder / f"{name}.py").write_text(f"raise RuntimeError('SHADOWED: {folder / name}.py was imported')\n")


def lone_app(tmp: Path) -> Path:
    """``tmp/dir/app.py``, outside any package, with shadows next to it and one level up."""
    (tmp / "dir").mkdir(parents=True)
    _shadows(tmp)
    _shadows(tmp / "dir")
    (tmp / "dir" / "app.py").write_text(APP.format(sibling="", tag=TAG))
    return tmp / "dir" / "app.py"


def package_app(tmp: Path) -> Path:
    """``tmp/pkg/app.py`` in package ``pkg``, importing its sibling ``pkg.helper``; shadows
    in the package and next to it (its root, which the loader makes importable)."""
    (tmp / "pkg").mkdir(parents=True)
    _shadows(tmp)
    _shadows(tmp / "pkg")
    (tmp / "pkg" / "__init__.py").write_text("")
    (tmp / "pkg" / "helper.py").write_text(f"import json\nimport random\n\n\n{TAG}")
    (tmp / "pkg" / "app.py").write_text(APP.format(sibling="from pkg.helper import tag", tag=""))
    return tmp / "pkg" / "app.py"


def _expected(n: int) -> list[dict]:
    return [{"seq": i, "t": json.dumps([i, random.Random(i).randint(0, 9)])} for i in range(n)]


def _python(code: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-P", "-c", code], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120)


PROBE = '''
import sys
before = list(sys.path)
from spadeopt.api import load_app
load_app(sys.argv[1] if len(sys.argv) > 1 else {ref!r})
import json, random, msgpack, colorsys
assert sys.path[:len(before)] == before, ("sys.path changed ahead", before, sys.path)
print(sys.path[len(before):])
'''


@pytest.mark.parametrize("make", [lone_app, package_app])
def test_loading_an_app_puts_nothing_ahead_of_the_standard_library(make, tmp_path):
    path = make(tmp_path)
    _shadows(tmp_path)
    (tmp_path / "colorsys.py").write_text("raise RuntimeError('SHADOWED colorsys')\n")  # not imported before
    out = _python(PROBE.format(ref=f"{path}:app"), cwd=ROOT)
    assert out.returncode == 0, out.stderr
    added = eval(out.stdout)  # noqa: S307 - our own probe's output
    assert added == ([] if make is lone_app else [str(tmp_path)])


def test_a_module_reference_finds_the_working_directory_after_installed_packages(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "__init__.py").write_text("")
    (tmp_path / "mine" / "app.py").write_text(APP.format(sibling="", tag=TAG))
    _shadows(tmp_path)
    out = _python(PROBE.format(ref="mine.app:app"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert eval(out.stdout) == [str(tmp_path)]  # noqa: S307


def test_an_app_outside_a_package_importing_its_folder_is_told_to_make_it_one(tmp_path):
    from spadeopt.runtime.loader import load_module

    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "helper2.py").write_text("H = 1\n")
    (tmp_path / "proj" / "appx.py").write_text("from proj.helper2 import H\n")
    with pytest.raises(AppError, match=r"add an __init__.py to .*proj and import them as proj.<module>"):
        load_module(str(tmp_path / "proj" / "appx.py"))


def test_a_pe_appends_the_shipped_app_folder_after_the_standard_library(tmp_path):
    """What a PE does (``loader.symbol`` with ``APP_PATH_ENV`` from the node agent)."""
    package_app(tmp_path)
    code = ("import json, sys; before = list(sys.path)\n"
            "from spadeopt.runtime.loader import symbol\n"
            "tag = symbol('pkg.helper', 'tag')\n"
            "import random, msgpack\n"
            "print(json.dumps([tag(3), sys.path[:len(before)] == before, sys.path[len(before):]]))")
    out = _python(code, cwd=ROOT, SPADEOPT_APP_PATH=str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [json.dumps([3, random.Random(3).randint(0, 9)]), True, [str(tmp_path)]]


# ---- shipping ---------------------------------------------------------------------------

@pytest.fixture
def build(tmp_path):
    b = tmp_path / "build"
    b.mkdir()
    (b / "pe0.py").write_text("X = 1\n")
    (b / "deploy.json").write_text("{}\n")
    return b


def _names(bundle: ship.Bundle) -> set[str]:
    return set(zipfile.ZipFile(bundle.path).namelist())


def test_an_app_outside_any_package_ships_alone(tmp_path, build):
    home = tmp_path / "home"
    (home / "projects" / "other").mkdir(parents=True)
    (home / "notes.py").write_text("x = 1\n")
    (home / "projects" / "other" / "big.py").write_text("y = 2\n")
    (home / "mine.py").write_text("app = None\n")
    said: list[str] = []
    b = ship.pack(build, f"{home / 'mine.py'}:app", tmp_path, say=said.append)
    assert _names(b) == {"build/pe0.py", "build/deploy.json", "app/mine.py"}
    assert b.app_ref == "app/mine.py:app" and b.app_files == 1 and b.app_bytes == len("app = None\n")
    assert said == [b.report] and f"from {home / 'mine.py'} (1 Python file(s), 11 bytes)" in b.report
    u = ship.unpack(str(b.path), str(tmp_path / "x"), b.app_ref)
    assert u.app_ref == f"{tmp_path / 'x' / 'app' / 'mine.py'}:app"


def test_an_app_in_a_package_ships_its_outermost_package_and_nothing_beside_it(tmp_path, build):
    top = tmp_path / "work" / "proj"
    (top / "sub" / "__pycache__").mkdir(parents=True)
    (top / ".venv").mkdir()
    for f in ("__init__.py", "util.py", "sub/__init__.py", "sub/app.py", "sub/__pycache__/app.cpython-311.pyc",
              ".venv/lib.py", "sub/data.csv"):
        (top / f).write_text("z = 3\n")
    (tmp_path / "work" / "json.py").write_text("boom\n")  # beside the package: not shipped
    (tmp_path / "work" / "other").mkdir()
    (tmp_path / "work" / "other" / "x.py").write_text("w = 4\n")
    b = ship.pack(build, f"{top / 'sub' / 'app.py'}:app", tmp_path)
    assert b.app_ref == "app/proj/sub/app.py:app"
    assert _names(b) - {"build/pe0.py", "build/deploy.json"} == {
        "app/proj/__init__.py", "app/proj/util.py", "app/proj/sub/__init__.py", "app/proj/sub/app.py"}
    assert b.shipped == str(top) and b.app_files == 4 and b.app_bytes == 4 * len("z = 3\n")
    assert b.zip_bytes == b.path.stat().st_size


def test_the_real_apps_package_ships_as_before(tmp_path, build):
    b = ship.pack(build, f"{ROOT / 'apps' / 'chain.py'}:app", tmp_path)
    assert b.app_ref == "app/apps/chain.py:app"
    assert {n for n in _names(b) if n.startswith("app/")} == {
        f"app/apps/{p.name}" for p in (ROOT / "apps").glob("*.py")}


def test_an_oversized_app_package_is_refused_naming_the_folder_size_and_what_to_do(tmp_path, build, monkeypatch):
    pkg = tmp_path / "bulky"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "app.py").write_text("app = None\n")
    (pkg / "generated.py").write_text("#" * 3060 + "\n")  # with app.py: 3 KiB
    monkeypatch.setattr(ship, "MAX_APP_BYTES", 2048)
    with pytest.raises(UsageError) as exc:
        ship.pack(build, f"{pkg / 'app.py'}:app", tmp_path)
    msg = str(exc.value)
    assert f"the app's package {pkg} holds 3.0 KiB of Python source, more than the 2.0 KiB" in msg, msg
    assert "keep the app in a package of its own" in msg
    assert list(tmp_path.glob("spadeopt-job-*.zip")) == []
    monkeypatch.setattr(ship, "MAX_APP_FILES", 2)
    with pytest.raises(UsageError, match=f"the app's package {pkg} holds 3 Python files, more than the 2"):
        ship.pack(build, f"{pkg / 'app.py'}:app", tmp_path)


def test_the_default_limit_is_50_mib():
    assert ship.MAX_APP_BYTES == 50 * 1024 * 1024


# ---- the real CLI on Spark ----------------------------------------------------------------

def _run(app: Path, fusion: str, tmp: Path, cwd: Path = ROOT, cli: str | None = None, *extra: str):
    cmd = [*((cli,) if cli else (sys.executable, "-m", "spadeopt")), "run", str(app), "--fusion", fusion,
           "--cores", "1", "--master", "local[1]", "--out", str(tmp / f"out-{fusion}"),
           "--build-dir", str(tmp / f"build-{fusion}"), *extra]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600)


@pytest.mark.spark
@pytest.mark.parametrize("make,fusion", [(lone_app, "all"), (package_app, "none")])
def test_an_app_beside_files_named_like_stdlib_and_installed_modules_runs_unaffected(make, fusion, tmp_path):
    app = make(tmp_path / "src")
    proc = _run(app, fusion, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SHADOWED" not in proc.stdout + proc.stderr
    rows = [json.loads(x) for x in (tmp_path / f"out-{fusion}" / "out.jsonl").read_text().splitlines()]
    assert rows == _expected(300)


@pytest.mark.spark
def test_run_from_the_app_folder_its_pes_import_nothing_from_it(tmp_path):
    """``spadeopt run app.py`` in the app's own folder: a PE (``python -P -m``) does not
    put the working directory ahead of the standard library. Spark's own Python worker
    (``python -m pyspark.daemon``) would, so the run passes it PYTHONSAFEPATH here."""
    cli = Path(sys.executable).with_name("spadeopt")
    if not cli.exists():
        pytest.skip("no spadeopt console script next to this interpreter")
    app = lone_app(tmp_path / "src")
    proc = _run(Path(app.name), "none", tmp_path, app.parent, str(cli), "--conf", "spark.executorEnv.PYTHONSAFEPATH=1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [json.loads(x) for x in (tmp_path / "out-none" / "out.jsonl").read_text().splitlines()]
    assert rows == _expected(300)
