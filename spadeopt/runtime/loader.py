"""Loading apps and user symbols, in the CLI and inside PEs.

An app reference is a file path (``apps/bargain.py``, optionally ``:attr``) or a
module (``apps.bargain:app``). A file is imported under a stable module name derived
from its path, so generated PEs can find the same functions by name.

Loading an app never shadows the standard library or installed packages: a file is
imported from its path (an importlib spec), and the only folder it makes importable
is its package root (``package_root``: the folder above the outermost package of its
``__init__.py`` chain, so ``apps/bargain.py`` may import ``apps.helper``), appended
*after* the standard library and site-packages; a module outside any package adds
nothing. A module reference is looked up with the working directory appended, not
prepended. Inside a PE, the shipped app's folder comes from ``APP_PATH_ENV`` and is
appended the same way (``spadeopt.deploy.ship``).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from spadeopt.errors import UsageError, user_failure

APP_ENV = "SPADEOPT_APP"
APP_PATH_ENV = "SPADEOPT_APP_PATH"  # in a PE: where the shipped app's source was unpacked
_app_modules: dict[str, Any] = {}  # by APP_ENV reference: a PE has one, an in-process harness several
_app_path_added = False


def split_ref(ref: str) -> tuple[str, str]:
    target, sep, attr = ref.rpartition(":")
    if not sep or "/" in attr or attr.endswith(".py"):
        return ref, "app"
    return target, attr


def module_name_for(path: Path) -> str:
    return "_spadeopt_app_" + path.stem


def package_root(path: Path) -> Path | None:
    """The folder an app file's package is imported from: the parent of the outermost
    folder of its ``__init__.py`` chain; None for a module outside any package."""
    top = None
    folder = path.parent
    while (folder / "__init__.py").is_file() and folder.parent != folder:
        top, folder = folder, folder.parent
    return None if top is None else top.parent


def importable(folder: str | Path) -> None:
    """Let modules under ``folder`` be imported, after everything already on ``sys.path``
    (the standard library, site-packages): never ahead of them."""
    folder = str(folder)
    if folder not in sys.path:
        sys.path.append(folder)


def load_module(target: str) -> Any:
    """Import an app module from a path or a dotted name."""
    if target.endswith(".py") or os.sep in target:
        path = Path(target).resolve()
        if not path.is_file():
            msg = f"app file '{target}' does not exist; give a path like apps/bargain.py or a module like apps.bargain:app"
            raise UsageError(msg)
        name = module_name_for(path)
        if name in sys.modules and getattr(sys.modules[name], "__file__", None) == str(path):
            return sys.modules[name]
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        root = package_root(path)
        if root is not None:
            importable(root)
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # noqa: BLE001 - anything the user's module raises
            del sys.modules[name]
            raise user_failure(exc, f"cannot import app file '{target}'{_sibling_hint(exc, path, root)}") from None
        return module
    importable(os.getcwd())
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as exc:
        if exc.name and (exc.name == target or target.startswith(exc.name + ".")):
            msg = f"cannot import app module '{target}': {exc}; give a path like apps/bargain.py"
            raise UsageError(msg) from None
        raise user_failure(exc, f"cannot import app module '{target}'") from None
    except Exception as exc:  # noqa: BLE001 - anything the user's module raises
        raise user_failure(exc, f"cannot import app module '{target}'") from None


def _sibling_hint(exc: Exception, path: Path, root: Path | None) -> str:
    """A hint for an app outside any package that imports a module of its own folder."""
    if root is not None or not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return ""
    first = exc.name.split(".")[0]
    folder = path.parent
    if first == folder.name or (folder / f"{first}.py").is_file() or (folder / first / "__init__.py").is_file():
        return (f" (an app imports modules of its own folder only from inside a package: add an __init__.py "
                f"to {folder} and import them as {folder.name}.<module>; the package is what ships with the job)")
    return ""


def canonical_ref(ref: str) -> str:
    """An app reference that works from any working directory (absolute path for files)."""
    target, attr = split_ref(ref)
    if target.endswith(".py") or os.sep in target:
        return f"{Path(target).resolve()}:{attr}"
    return ref


def symbol(module: str, qualname: str, *, from_app: bool = False) -> Any:
    """Resolve a user symbol inside a PE (generated code calls this at import time)."""
    global _app_path_added
    if not _app_path_added:
        for folder in filter(None, os.environ.get(APP_PATH_ENV, "").split(os.pathsep)):
            importable(folder)
        _app_path_added = True
    if from_app:
        ref = os.environ.get(APP_ENV)
        if not ref:
            msg = f"{APP_ENV} is not set; PEs must be started by the spadeopt node agent"
            raise RuntimeError(msg)
        if ref not in _app_modules:
            _app_modules[ref] = load_module(split_ref(ref)[0])
        obj = _app_modules[ref]
    else:
        obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj
