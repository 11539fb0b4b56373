"""Code shipping: the build and the app's module travel with the job.

On a real cluster nothing but the network is shared, so an executor cannot load a PE
module or the app from the driver's paths. ``pack`` puts everything a node agent needs
into one zip, which the driver hands to Spark with ``SparkContext.addFile``:

- ``build/``: the build directory's PE modules, ``plan.json`` and ``deploy.json``
  (top-level regular files only, never logs, progress or sink outputs);
- ``app/``: the app's own Python source, nothing around it. For an app given as a
  file inside a package (an ``__init__.py`` chain), the outermost package folder
  (``apps/chain.py`` -> ``app/apps/chain.py``): the loader makes exactly that package
  importable, so the app may import its siblings as ``apps.helper``; for a file outside
  any package, the file alone (``app/chain.py``); for an app given as a module name
  (``apps.chain:app``), the top-level package (or module) it belongs to. Only ``*.py``
  files travel (never ``__pycache__`` or hidden folders), at most ``MAX_APP_FILES``
  files and ``MAX_APP_BYTES`` bytes; ``Bundle.report`` says what was shipped and how big.

On the executor, ``unpack`` extracts the zip (fetched with ``SparkFiles.get``) into a
private work directory and returns the local build directory, the app reference
rewritten to the local copy, and the folder the PEs append to ``sys.path``
(``runtime.loader.APP_PATH_ENV``).

Executors need only spadeopt (and its dependencies) installed; nothing of the
driver's filesystem is read there.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
import uuid
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from spadeopt.errors import UsageError
from spadeopt.runtime.loader import importable, package_root

MAX_APP_FILES = 2000
MAX_APP_BYTES = 50 * 1024 * 1024
_BUILD_FILES = (".py", ".json")


@dataclass(frozen=True)
class Bundle:
    """A packed job: the zip on the driver and the app reference inside it."""

    path: Path  # the zip file (its name is unique per run)
    app_ref: str  # "app/<relative file>:attr" or the dotted module reference unchanged
    shipped: str = ""  # the folder (or file) the app's source was taken from
    app_files: int = 0
    app_bytes: int = 0  # the app's source, uncompressed
    zip_bytes: int = 0  # the whole bundle

    @property
    def report(self) -> str:
        """One line for the run's progress: what travels with the job."""
        return (f"shipping the app's source from {self.shipped} ({self.app_files} Python file(s), "
                f"{_size(self.app_bytes)}) and the build; the job bundle is {_size(self.zip_bytes)}")


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


def _app_files(app_ref: str) -> tuple[dict[str, Path], str, Path]:
    """The app's source files as archive name -> path, the shipped app reference, and
    the folder (or file) they come from."""
    target, attr = _split(app_ref)
    if target.endswith(".py") or os.sep in target:
        path = Path(target).resolve()
        root = package_root(path)
        if root is None:  # a module outside any package: it alone
            base, root, files = path, path.parent, [path]
        else:  # the outermost package folder of its __init__.py chain
            base = root / path.relative_to(root).parts[0]
            files = _sources(base)
        shipped = f"app/{path.relative_to(root).as_posix()}:{attr}"
    else:
        importable(os.getcwd())  # as the loader does for module references
        spec = importlib.util.find_spec(target.split(".")[0])
        if spec is not None and spec.submodule_search_locations:  # a package: ship its directory
            base = Path(next(iter(spec.submodule_search_locations)))
            root = base.parent
            files = _sources(base)
        elif spec is not None and spec.origin and spec.origin.endswith(".py"):
            base = Path(spec.origin)
            root, files = base.parent, [base]
        else:
            raise UsageError(f"cannot find the source of app module '{target}' to ship it with the job; "
                             f"give the app as a file path (apps/bargain.py)")
        shipped = app_ref
    return _checked({f"app/{p.relative_to(root).as_posix()}": p for p in files}, base), shipped, base


def _sources(base: Path) -> list[Path]:
    """Python files under ``base``, skipping ``__pycache__`` and hidden directories (.venv, .git)."""
    return sorted(p for p in base.rglob("*.py")
                  if not any(part == "__pycache__" or part.startswith(".") for part in p.relative_to(base).parts))


def _checked(files: dict[str, Path], base: Path) -> dict[str, Path]:
    """``files`` if they are few and small enough to ship, else a ``UsageError`` saying what to do."""
    fix = ("keep the app in a package of its own (a folder with an __init__.py holding only the app's "
           "code, no generated or vendored files) before running it on Spark")
    if len(files) > MAX_APP_FILES:
        raise UsageError(f"the app's package {base} holds {len(files)} Python files, more than the "
                         f"{MAX_APP_FILES} spadeopt ships with a job; {fix}")
    size = sum(p.stat().st_size for p in files.values())
    if size > MAX_APP_BYTES:
        raise UsageError(f"the app's package {base} holds {_size(size)} of Python source, more than the "
                         f"{_size(MAX_APP_BYTES)} spadeopt ships with a job; {fix}")
    return files


def _size(n: float) -> str:
    if n < 1024:
        return f"{n:,.0f} bytes"
    return f"{n / 1024:,.1f} KiB" if n < 1024 * 1024 else f"{n / (1024 * 1024):,.1f} MiB"


def pack(build_dir: Path, app_ref: str, into: Path | None = None,
         say: Callable[[str], None] | None = None) -> Bundle:
    """Zip the build and the app's source into a new file under ``into`` (a temp dir);
    ``say`` receives ``Bundle.report``."""
    build_dir = Path(build_dir)
    app_files, shipped_ref, base = _app_files(app_ref)
    into = Path(into) if into else Path(tempfile.mkdtemp(prefix="spadeopt-ship-"))
    path = into / f"spadeopt-job-{uuid.uuid4().hex[:12]}.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for f in sorted(build_dir.iterdir()):
            if f.is_file() and f.suffix in _BUILD_FILES:
                z.write(f, f"build/{f.name}")
        for name, f in app_files.items():
            z.write(f, name)
    bundle = Bundle(path, shipped_ref, str(base), len(app_files),
                    sum(f.stat().st_size for f in app_files.values()), path.stat().st_size)
    if say is not None:
        say(bundle.report)
    return bundle


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
