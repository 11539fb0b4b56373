"""Code shipping: the build and the app's module travel with the job.

On a real cluster nothing but the network is shared, so an executor cannot load a PE
module or the app from the driver's paths. ``pack`` puts everything a node agent needs
into one zip, which the driver hands to Spark with ``SparkContext.addFile``:

- ``build/``: the build directory's PE modules, ``plan.json`` and ``deploy.json``
  (top-level regular files only, never logs, progress or sink outputs);
- ``app/``: the app's Python source. For an app given as a file, the directory holding
  it is shipped as a package directory of the same name (``apps/chain.py`` ->
  ``app/apps/chain.py``), because the loader puts the directory above it on
  ``sys.path`` so apps may import their siblings; for an app given as a module name
  (``apps.chain:app``), the top-level package (or module) it belongs to is shipped.
  Only ``*.py`` files travel, at most ``MAX_APP_FILES`` of them.

On the executor, ``unpack`` extracts the zip (fetched with ``SparkFiles.get``) into a
private work directory and returns the local build directory, the app reference
rewritten to the local copy, and the directory to put on the PEs' ``PYTHONPATH``.

Executors need only spadeopt (and its dependencies) installed; nothing of the
driver's filesystem is read there.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path

from spadeopt.errors import UsageError

MAX_APP_FILES = 2000
_BUILD_FILES = (".py", ".json")


@dataclass(frozen=True)
class Bundle:
    """A packed job: the zip on the driver and the app reference inside it."""

    path: Path  # the zip file (its name is unique per run)
    app_ref: str  # "app/<relative file>:attr" or the dotted module reference unchanged


@dataclass(frozen=True)
class Unpacked:
    build_dir: str
    app_ref: str
    pythonpath: str


def _split(ref: str) -> tuple[str, str]:
    target, sep, attr = ref.rpartition(":")
    if not sep or "/" in attr or attr.endswith(".py"):
        return ref, "app"
    return target, attr


def _app_files(app_ref: str) -> tuple[dict[str, Path], str]:
    """The app's source files as archive name -> path, and the shipped app reference."""
    target, attr = _split(app_ref)
    if target.endswith(".py") or os.sep in target:
        path = Path(target).resolve()
        root = path.parent.parent
        shipped = f"app/{path.relative_to(root).as_posix()}:{attr}"
        base = path.parent
        files = _sources(base)
    else:
        if os.getcwd() not in sys.path:  # as the loader does for module references
            sys.path.insert(0, os.getcwd())
        spec = importlib.util.find_spec(target.split(".")[0])
        if spec is not None and spec.submodule_search_locations:  # a package: ship its directory
            base = Path(next(iter(spec.submodule_search_locations)))
            root = base.parent
            files = _sources(base)
        elif spec is not None and spec.origin and spec.origin.endswith(".py"):
            root, files = Path(spec.origin).parent, [Path(spec.origin)]
        else:
            raise UsageError(f"cannot find the source of app module '{target}' to ship it with the job; "
                             f"give the app as a file path (apps/bargain.py)")
        shipped = app_ref
    return _checked({f"app/{p.relative_to(root).as_posix()}": p for p in files}, app_ref), shipped


def _sources(base: Path) -> list[Path]:
    """Python files under ``base``, skipping ``__pycache__`` and hidden directories (.venv, .git)."""
    return sorted(p for p in base.rglob("*.py")
                  if not any(part == "__pycache__" or part.startswith(".") for part in p.relative_to(base).parts))


def _checked(files: dict[str, Path], app_ref: str) -> dict[str, Path]:
    if len(files) > MAX_APP_FILES:
        raise UsageError(f"the app '{app_ref}' lives in a directory with {len(files)} Python files "
                         f"(more than {MAX_APP_FILES}); put the app in a directory of its own before running it "
                         f"on a cluster")
    return files


def pack(build_dir: Path, app_ref: str, into: Path | None = None) -> Bundle:
    """Zip the build and the app's source into a new file under ``into`` (a temp dir)."""
    build_dir = Path(build_dir)
    app_files, shipped_ref = _app_files(app_ref)
    into = Path(into) if into else Path(tempfile.mkdtemp(prefix="spadeopt-ship-"))
    path = into / f"spadeopt-job-{uuid.uuid4().hex[:12]}.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for f in sorted(build_dir.iterdir()):
            if f.is_file() and f.suffix in _BUILD_FILES:
                z.write(f, f"build/{f.name}")
        for name, f in app_files.items():
            z.write(f, name)
    return Bundle(path, shipped_ref)


def unpack(zip_path: str, dest: str, shipped_ref: str) -> Unpacked:
    """Extract a bundle into ``dest``; the local build dir, app reference and PYTHONPATH."""
    with zipfile.ZipFile(zip_path) as z:
        for name in z.namelist():  # our own archive, but never write outside dest
            if name.startswith("/") or ".." in Path(name).parts:
                raise RuntimeError(f"refusing to extract {name!r} from {zip_path}")
        z.extractall(dest)
    app_root = str(Path(dest, "app"))
    ref = shipped_ref
    if ref.startswith("app/"):
        target, attr = _split(ref)
        ref = f"{Path(dest, target)}:{attr}"
    return Unpacked(str(Path(dest, "build")), ref, app_root)


def executor_id() -> str:
    """The Spark executor this task runs in, seen from its Python worker.

    A standalone (and local-cluster) executor runs in ``<work>/app-<id>/<executor id>``;
    in local mode the tasks run in the driver.
    """
    cwd = Path.cwd()
    if cwd.parent.name.startswith("app-"):
        return cwd.name
    return os.environ.get("SPARK_EXECUTOR_ID") or "driver"


def collect_outputs(out_dir: str | None, profile_dir: str | None) -> dict[str, dict[str, str]]:
    """A node's outputs as text, for the task result: sink parts and raw sample files."""
    from spadeopt.runtime.sinks import parts

    files: dict[str, dict[str, str]] = {"sinks": {}, "profile": {}}
    if out_dir and Path(out_dir).is_dir():
        files["sinks"] = {name: p.read_text(encoding="utf-8") for name, p in parts(out_dir).items()}
    if profile_dir and Path(profile_dir).is_dir():
        root = Path(profile_dir)
        files["profile"] = {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8")
                            for p in sorted(root.rglob("*")) if p.is_file()}
    return files


def write_outputs(files: dict[str, dict[str, str]], out_dir: Path | None, profile_dir: Path | None) -> None:
    """On the driver: write what a node returned (sinks as parts, committed later)."""
    from spadeopt.atomic import write_atomic
    from spadeopt.runtime.sinks import part_name

    for name, text in files.get("sinks", {}).items():
        if out_dir is None or "/" in name or name.startswith("."):
            continue
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        (Path(out_dir) / part_name(name)).write_text(text, encoding="utf-8")
    for rel, text in files.get("profile", {}).items():
        if profile_dir is None or rel.startswith("/") or ".." in Path(rel).parts:
            continue
        write_atomic(Path(profile_dir) / rel, text)
