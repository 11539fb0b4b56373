"""Build-time checks of a custom operator's class against its declaration.

What would otherwise fail only inside a running PE, after Spark has started: ``args=``
that do not match the constructor, a class without ``process(port, tup, submit)``, and a
``submit("port", ...)`` (a literal port name in the class's own source) to a port the
declaration does not have. A class whose source cannot be read (built in C, made at run
time) is checked by signature only.
"""

from __future__ import annotations

import ast
import difflib
import inspect
import textwrap
from collections.abc import Iterable, Mapping
from typing import Any


def _submit_names(fn: ast.FunctionDef) -> set[str]:
    """The parameter names under which ``process`` / ``on_final`` receive ``submit``."""
    params = [a.arg for a in fn.args.args]
    if fn.name == "process" and len(params) >= 4:
        return {params[3]}
    if fn.name == "on_final" and len(params) >= 2:
        return {params[1]}
    return set()


def submitted_ports(cls: type) -> list[tuple[str, int, str]]:
    """``(port, line, method)`` of every ``submit("port", ...)`` with a literal port in the
    class body's ``process`` and ``on_final`` (and ``self.<name>`` calls of a stored submit
    are not followed); empty when the source cannot be read."""
    try:
        lines, first = inspect.getsourcelines(cls)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in ("process", "on_final"):
            names = _submit_names(node) | {"submit"}
            for call in ast.walk(node):
                if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in names
                        and call.args and isinstance(call.args[0], ast.Constant)
                        and isinstance(call.args[0].value, str)):
                    found.append((call.args[0].value, first + call.lineno - 1, node.name))
    return found


def _signature_problem(what: str, cls: type, args: Mapping[str, Any]) -> str | None:
    try:
        sig = inspect.signature(cls)
    except (TypeError, ValueError):
        return None
    try:
        sig.bind(**args)
    except TypeError as exc:
        need = [p.name for p in sig.parameters.values()
                if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        return (f"{what}: args={dict(args)!r} do not match {cls.__qualname__}{sig} ({exc}); give the "
                f"constructor's arguments by name in args= (required: {', '.join(need) or 'none'})")
    return None


def check_custom(name: str, cls: Any, outputs: Mapping[str, Any], args: Mapping[str, Any] | None,
                 inputs: Iterable[str], where: str) -> list[str]:
    """Problems of custom operator ``name``'s class ``cls``, each naming the operator, the
    class, the port or parameter, and the fix; ``where`` is the declaration's place."""
    if not isinstance(cls, type):
        return []  # symbol_of has reported it
    what = f"custom '{name}' ({where})"
    problems = []
    bad = _signature_problem(what, cls, dict(args or {}))
    if bad:
        problems.append(bad)
    process = getattr(cls, "process", None)
    if not callable(process):
        problems.append(f"{what}: class {cls.__qualname__} has no process(self, port, tup, submit) method; "
                        f"it is called once per input tuple")
    else:
        try:
            inspect.signature(process).bind(None, "port", (), print)
        except (TypeError, ValueError):
            problems.append(f"{what}: {cls.__qualname__}.process must take (self, port, tup, submit), it takes "
                            f"{inspect.signature(process)}")
    ports = list(outputs)
    for port, line, method in submitted_ports(cls):
        if port not in ports:
            near = difflib.get_close_matches(port, ports, n=1)
            hint = f"did you mean '{near[0]}'? " if near else ""
            problems.append(f"{what}: {cls.__qualname__}.{method} submits to port '{port}' "
                            f"({inspect.getsourcefile(cls)}:{line}), but the declared output ports are: "
                            f"{', '.join(ports) or 'none'}; {hint}submit to one of them or declare "
                            f"'{port}' in outputs=")
    return problems
