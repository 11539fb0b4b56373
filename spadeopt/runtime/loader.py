"""Loading apps and user symbols, in the CLI and inside PEs.

An app reference is a file path (``apps/bargain.py``, optionally ``:attr``) or a
module (``apps.bargain:app``). A file is imported under a stable module name derived
from its path, so generated PEs can find the same functions by name.
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
_app_module: Any = None


def _split(ref: str) -> tuple[str, str]:
    target, sep, attr = ref.rpartition(":")
    if not sep or "/" in attr or attr.endswith(".py"):
        return ref, "app"
    return target, attr


def module_name_for(path: Path) -> str:
    return "_spadeopt_app_" + path.stem


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
        if str(path.parent.parent) not in sys.path:
            sys.path.insert(0, str(path.parent.parent))
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # noqa: BLE001 - anything the user's module raises
            del sys.modules[name]
            raise user_failure(exc, f"cannot import app file '{target}'") from None
        return module
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as exc:
        if exc.name and (exc.name == target or target.startswith(exc.name + ".")):
            msg = f"cannot import app module '{target}': {exc}; give a path like apps/bargain.py"
            raise UsageError(msg) from None
        raise user_failure(exc, f"cannot import app module '{target}'") from None
    except Exception as exc:  # noqa: BLE001 - anything the user's module raises
        raise user_failure(exc, f"cannot import app module '{target}'") from None


def load_app(ref: str) -> Any:
    """Return the ``AppSpec`` (or ``App``) object an app reference names."""
    from spadeopt.model.dsl import App, AppSpec

    target, attr = _split(ref)
    module = load_module(target)
    obj = getattr(module, attr, None)
    if not isinstance(obj, AppSpec | App) and attr == "app":
        # No `app = ...` export: an app file that defines exactly one app is unambiguous.
        found = sorted(k for k, v in vars(module).items() if isinstance(v, AppSpec | App) and not k.startswith("_"))
        if len(found) == 1:
            return getattr(module, found[0])
        if found:
            msg = (f"'{target}' defines several apps ({', '.join(found)}) and exports none as 'app'; "
                   f"name one, e.g. {target}:{found[0]}")
            raise UsageError(msg)
    if not isinstance(obj, AppSpec | App):
        msg = (f"'{ref}' has no app: expected a module attribute '{attr}' made with @spadeopt.app "
               f"(found {type(obj).__name__})")
        raise UsageError(msg)
    return obj


def canonical_ref(ref: str) -> str:
    """An app reference that works from any working directory (absolute path for files)."""
    target, attr = _split(ref)
    if target.endswith(".py") or os.sep in target:
        return f"{Path(target).resolve()}:{attr}"
    return ref


def symbol(module: str, qualname: str, *, from_app: bool = False) -> Any:
    """Resolve a user symbol inside a PE (generated code calls this at import time)."""
    global _app_module
    if from_app:
        if _app_module is None:
            ref = os.environ.get(APP_ENV)
            if not ref:
                msg = f"{APP_ENV} is not set; PEs must be started by the spadeopt node agent"
                raise RuntimeError(msg)
            _app_module = load_module(_split(ref)[0])
        obj = _app_module
    else:
        obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj
