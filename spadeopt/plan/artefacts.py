"""What a build's JSON files may hold when spadeopt reads them back.

``plan.json``, ``deploy.json`` and ``explain.json`` are written by spadeopt, but a build
is only files: whatever is read back is checked here before it names a file (PE
modules, logs, progress and sample files, ``build/<app>/<strategy>``), enters generated
code or sizes a job. Names must be what spadeopt itself makes: PE ids, app names and
strategies are file names (``model.schema.is_file_name``), operators, region names,
keys and attributes identifiers, ports ``op.port``; numbers are integers or finite
numbers within the bounds below. Fields spadeopt does not read are not checked, so a
newer build's extra fields pass.

Every bad field is reported at once as ``ArtefactError`` (exit 2) naming the file, the
field as a JSON path (``pes[3].pe``) and the value; callers check before they write.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from spadeopt.errors import ArtefactError, PlanError
from spadeopt.model.schema import FILE_NAME_RULE, TYPES, is_file_name, is_identifier, is_port_name
from spadeopt.plan.deployment import DEPLOY_FIELDS, Deployment
from spadeopt.plan.regions import FEDS, MAX_REGION_WIDTH, ORDERINGS

MAX_NODES = 1 << 20  # nodes of one plan (a bound on memory: the optimizer plans 100,000 nodes)
MAX_CORES = 4096  # cores per node of one plan
MAX_BATCH = 1 << 20  # deploy.json batch_size and hwm
MAX_FRAME = 1 << 31  # deploy.json max_frame, bytes
MAX_TEXT = 10_000  # characters of a free-text field (paths, messages)

PLAN_HINT = "regenerate it with `spadeopt build APP --fusion STRATEGY -o DIR` or `spadeopt optimize`"
DEPLOY_HINT = "regenerate the build with `spadeopt build` or `spadeopt optimize`"
EXPLAIN_HINT = "regenerate the build with `spadeopt optimize`"

_FINGERPRINT = re.compile(r"[0-9a-f]{1,64}")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # every control character but tab and newline
_MISSING = object()
PE_RULE = f"a PE id ({FILE_NAME_RULE})"
IDENT_RULE = "an identifier (ASCII letters, digits, underscores; not a keyword)"


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return _is_int(v) or isinstance(v, float) and math.isfinite(v)


def _is_ref(v: Any) -> bool:
    """``op.port``: an operator and one of its ports."""
    if not isinstance(v, str):
        return False
    op, sep, port = v.partition(".")
    return bool(sep) and is_identifier(op) and is_port_name(port)


def _is_text(v: Any, limit: int = MAX_TEXT) -> bool:
    """A string on which a terminal or a DOT file cannot be steered: no control
    characters but newline and tab."""
    return isinstance(v, str) and len(v) <= limit and not _CONTROL.search(v)


class _Fields:
    """Collects the problems of one file, each as ``path = value: what was expected``."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self.problems: list[str] = []

    def bad(self, field: str, value: Any, expected: str) -> None:
        self.problems.append(f"{field} = {_show(value)}: expected {expected}")

    def get(self, obj: dict, at: str, key: str, required: bool = True) -> tuple[Any, str]:
        field = f"{at}.{key}" if at else key
        if key not in obj:
            if required:
                self.problems.append(f"{field} is missing")
            return _MISSING, field
        return obj[key], field

    def value(self, obj: dict, at: str, key: str, test: Callable[[Any], bool], expected: str,
              required: bool = True, none_ok: bool = False) -> Any:
        """``obj[key]`` when it passes ``test`` (or is ``None`` and ``none_ok``), else ``_MISSING``."""
        v, field = self.get(obj, at, key, required)
        if v is _MISSING or (v is None and none_ok):
            return v
        if not test(v):
            self.bad(field, v, expected)
            return _MISSING
        return v

    def int_in(self, obj: dict, at: str, key: str, lo: int, hi: int, required: bool = True) -> Any:
        return self.value(obj, at, key, lambda v: _is_int(v) and lo <= v <= hi,
                          f"an integer from {lo} to {hi}", required)

    def number(self, obj: dict, at: str, key: str, required: bool = True, none_ok: bool = False,
               positive: bool = False) -> Any:
        test = (lambda v: _is_number(v) and v > 0) if positive else _is_number
        return self.value(obj, at, key, test, "a positive number" if positive else "a finite number",
                          required, none_ok)

    def names(self, obj: dict, at: str, key: str, test: Callable[[Any], bool], expected: str,
              required: bool = True) -> list[Any]:
        """A list of names; the valid ones."""
        items = self.items(obj, at, key, required)
        out = []
        for field, v in items:
            if test(v):
                out.append(v)
            else:
                self.bad(field, v, expected)
        return out

    def items(self, obj: dict, at: str, key: str, required: bool = True) -> list[tuple[str, Any]]:
        """``(field, element)`` of the list ``obj[key]`` (none when it is missing or not a list)."""
        v, field = self.get(obj, at, key, required)
        if v is _MISSING:
            return []
        if not isinstance(v, list):
            self.bad(field, v, "a list")
            return []
        return [(f"{field}[{i}]", x) for i, x in enumerate(v)]

    def objects(self, obj: dict, at: str, key: str, required: bool = True) -> list[tuple[str, dict]]:
        """Like ``items``, for a list of JSON objects (other elements are reported)."""
        out = []
        for field, x in self.items(obj, at, key, required):
            if isinstance(x, dict):
                out.append((field, x))
            else:
                self.bad(field, x, "a JSON object")
        return out

    def mapping(self, obj: dict, at: str, key: str, required: bool = True) -> tuple[str, dict]:
        v, field = self.get(obj, at, key, required)
        if v is _MISSING or v is None and not required:
            return field, {}
        if not isinstance(v, dict):
            self.bad(field, v, "a JSON object")
            return field, {}
        return field, v

    def raise_any(self, what: str, hint: str) -> None:
        if self.problems:
            raise ArtefactError(self.path, what, self.problems, hint)


def _top(doc: Any, f: _Fields, what: str, hint: str, version_required: bool = True) -> dict:
    if not isinstance(doc, dict):
        f.bad("(the file)", doc, "a JSON object")
        f.raise_any(what, hint)
    f.value(doc, "", "schema_version", lambda v: v == 1 and _is_int(v), "1 (this spadeopt's format)",
            version_required)
    return doc


def check_plan_json(doc: Any, path: str | Path) -> None:
    """Check a ``plan.json`` document (``Plan.to_json``) read from ``path``."""
    f = _Fields(path)
    doc = _top(doc, f, "plan", PLAN_HINT)
    f.value(doc, "", "app", is_file_name, f"an app name ({FILE_NAME_RULE})")
    f.value(doc, "", "fingerprint", lambda v: isinstance(v, str) and _FINGERPRINT.fullmatch(v) is not None,
            "a graph fingerprint (hexadecimal)")
    f.value(doc, "", "strategy", is_file_name, f"a strategy name ({FILE_NAME_RULE})")
    nodes = f.int_in(doc, "", "nodes", 1, MAX_NODES)
    f.int_in(doc, "", "cores", 1, MAX_CORES)
    for key in ("instrumented", "collapse", "checkpoints"):
        f.value(doc, "", key, lambda v: isinstance(v, bool), "true or false", required=False)
    f.int_in(doc, "", "batch", 1, MAX_BATCH, required=False)
    _pes(f, doc, nodes, deploy=False)
    for at, r in f.objects(doc, "", "regions", required=False):
        f.value(r, at, "name", is_identifier, IDENT_RULE)
        f.names(r, at, "operators", is_identifier, IDENT_RULE)
        f.int_in(r, at, "width", 1, MAX_REGION_WIDTH)
        f.names(r, at, "key", is_identifier, IDENT_RULE)
        f.value(r, at, "ordering", lambda v: v in ORDERINGS, " or ".join(map(repr, ORDERINGS)))
        f.value(r, at, "fed", lambda v: v in FEDS, " or ".join(map(repr, FEDS)), required=False)
        f.value(r, at, "after", is_identifier, IDENT_RULE, required=False)
    f.raise_any("plan", PLAN_HINT)


def _pes(f: _Fields, doc: dict, nodes: Any, deploy: bool) -> set[str]:
    """The ``pes`` of a plan or deploy document; returns the valid PE ids."""
    top = nodes - 1 if _is_int(nodes) else MAX_NODES - 1
    pes = f.objects(doc, "", "pes")
    if not pes and "pes" in doc and isinstance(doc["pes"], list):
        f.bad("pes", doc["pes"], "at least one PE")
    ids: set[str] = set()
    for at, pe in pes:
        pid = f.value(pe, at, "pe", is_file_name, PE_RULE)
        if pid is not _MISSING:
            if pid in ids:
                f.bad(f"{at}.pe", pid, "a PE id used once")
            ids.add(pid)
        f.names(pe, at, "operators", is_identifier, IDENT_RULE)
        f.int_in(pe, at, "node", 0, top)
        if deploy:
            want = f"{pid}.py" if pid is not _MISSING else None
            f.value(pe, at, "module", lambda v, want=want: want is None or v == want,
                    f"{want!r} (the PE's module, next to deploy.json)")
    return ids


def check_deploy(doc: Any, path: str | Path) -> dict[str, Any]:
    """Check a ``deploy.json`` document (``codegen.render.render_build``) read from
    ``path``; returns it. Every field of ``plan.deployment.DEPLOY_FIELDS`` is checked by
    its rule (:data:`DEPLOY_RULES`); the per-run settings a run may override only when
    present, and ``profile`` (where samples go) is never read from a file."""
    f = _Fields(path)
    doc = _top(doc, f, "deploy descriptor", DEPLOY_HINT)
    seen: dict[str, Any] = {}
    for field in DEPLOY_FIELDS:
        seen[field.key] = DEPLOY_RULES[field.rule](f, doc, field.key, field.required, seen)
    f.raise_any("deploy descriptor", DEPLOY_HINT)
    return doc


def _links(f: _Fields, doc: dict, key: str, required: bool, seen: dict) -> None:
    ids = seen.get("pes") or set()
    link_ids: set[str] = set()
    for at, ln in f.objects(doc, "", key, required):
        lid = f.value(ln, at, "id", is_file_name, f"a link id ({FILE_NAME_RULE})")
        if lid is not _MISSING:
            if lid in link_ids:
                f.bad(f"{at}.id", lid, "a link id used once")
            link_ids.add(lid)
        for end in ("src_pe", "dst_pe"):
            f.value(ln, at, end, lambda v: isinstance(v, str) and v in ids, "a PE id of this file's pes")
        for end in ("src", "dst"):
            f.value(ln, at, end, _is_ref, "'op.port'")
        f.value(ln, at, "transport", lambda v: v in ("ipc", "tcp"), "'ipc' or 'tcp'")
        for sat, attr in f.items(ln, at, "schema", required=False):
            if not (isinstance(attr, list) and len(attr) == 2 and is_identifier(attr[0])
                    and isinstance(attr[1], str) and attr[1] in TYPES):
                f.bad(sat, attr, f"[attribute name, type] with a type of {sorted(TYPES)}")


def _streams(f: _Fields, doc: dict, key: str, required: bool, seen: dict) -> None:
    for at, st in f.items(doc, "", key, required):
        if not (isinstance(st, list) and len(st) == 2 and all(_is_ref(x) for x in st)):
            f.bad(at, st, "['op.port', 'op.port']")


def _spark(f: _Fields, doc: dict, key: str, required: bool, seen: dict) -> None:
    field, spark = f.mapping(doc, "", key, required)
    if isinstance(doc.get(key), dict):
        f.value(spark, field, "master", lambda v: _is_text(v, 1000) and "\n" not in v and v.strip() != "",
                "a Spark master URL (one line)")


def _rule(test: Callable[[Any], bool], expected: str, none_ok: bool = False) -> Callable[..., Any]:
    return lambda f, doc, key, required, seen: f.value(doc, "", key, test, expected, required, none_ok)


DEPLOY_RULES: dict[str, Callable[[_Fields, dict, str, bool, dict], Any]] = {
    "version": lambda f, doc, key, required, seen: doc.get(key),  # checked first, by _top
    "app_name": _rule(is_file_name, f"an app name ({FILE_NAME_RULE})"),
    "app_ref": _rule(lambda v: _is_text(v, 4096) and "\n" not in v and v.strip() != "",
                     "an app reference (a path or module, one line)"),
    "params": _rule(lambda v: isinstance(v, dict), "a JSON object (the app's parameters)"),
    "fingerprint": _rule(lambda v: isinstance(v, str) and _FINGERPRINT.fullmatch(v) is not None,
                         "a graph fingerprint (hexadecimal)"),
    "strategy": _rule(is_file_name, f"a strategy name ({FILE_NAME_RULE})"),
    "nodes": lambda f, doc, key, required, seen: f.int_in(doc, "", key, 1, MAX_NODES, required),
    "cores": lambda f, doc, key, required, seen: f.int_in(doc, "", key, 1, MAX_CORES, required),
    "bool": _rule(lambda v: isinstance(v, bool), "true or false"),
    "pes": lambda f, doc, key, required, seen: _pes(f, doc, seen.get("nodes"), deploy=True),
    "links": _links,
    "streams": _streams,
    "spark": _spark,
    "count": lambda f, doc, key, required, seen: f.int_in(doc, "", key, 1, MAX_BATCH, required),
    "frame_bytes": lambda f, doc, key, required, seen: f.int_in(doc, "", key, 1, MAX_FRAME, required),
    "delay": _rule(lambda v: _is_number(v) and 0 <= v <= 60, "seconds, 0 to 60"),
    "seconds": lambda f, doc, key, required, seen: f.number(doc, "", key, required, none_ok=True, positive=True),
    "absent": _rule(lambda v: v is None,
                    "nothing: where samples go is set by `spadeopt profile` per run, never read from a build"),
}
"""How each rule of ``plan.deployment.DEPLOY_FIELDS`` is checked: ``(fields, doc, key,
required, seen)`` -> the value (``seen``: the values of the fields checked before)."""


def load_deploy(build_dir: str | Path) -> Deployment:
    """A build's deploy.json, read and checked (``check_deploy``); ``PlanError`` when the
    directory is no build or its file cannot be read."""
    path = Path(build_dir) / "deploy.json"
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise PlanError(f"{build_dir} is not a spadeopt build (no deploy.json); create one with "
                        f"`spadeopt build APP -o DIR`") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PlanError(f"cannot read {path}: {exc}; rebuild it with `spadeopt build`") from None
    return Deployment.from_json(check_deploy(doc, path))


def read_explain(path: str | Path) -> dict[str, Any]:
    """Read and check an ``explain.json`` (``optimize.fatm``'s explain document plus the
    inputs ``api.optimize`` adds): the fields ``spadeopt explain`` shows or draws."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ArtefactError(str(path), "explain file", [f"not readable JSON ({exc})"], EXPLAIN_HINT) from None
    f = _Fields(path)
    doc = _top(doc, f, "explain file", EXPLAIN_HINT, version_required=False)
    for key in ("max_frac", "min_util", "objective", "objective_none", "inter_node_rate"):
        f.number(doc, "", key)
    f.int_in(doc, "", "merges", 0, 1 << 31)
    f.names(doc, "", "warnings", _is_text, "a message (text)")
    loads = f.names(doc, "", "node_load", _is_number, "a finite number")
    top = max(len(loads), 1) - 1 if "node_load" in doc else MAX_NODES - 1
    for at, pe in f.objects(doc, "", "pes"):
        f.value(pe, at, "pe", is_file_name, PE_RULE)
        f.int_in(pe, at, "node", 0, top)
        f.names(pe, at, "operators", is_identifier, IDENT_RULE)
        for key in ("oper_load", "comm_load", "effective_util"):
            f.number(pe, at, key)
    for at, lk in f.objects(doc, "", "pe_links", required=False):
        f.value(lk, at, "src", is_file_name, PE_RULE)
        f.value(lk, at, "dst", is_file_name, PE_RULE)
        f.number(lk, at, "rate")
    for at, r in f.objects(doc, "", "not_merged"):
        f.value(r, at, "pes", lambda v: isinstance(v, list) and len(v) == 2 and all(map(is_file_name, v)),
                f"two PE ids ({FILE_NAME_RULE})")
        f.value(r, at, "why", _is_text, "a reason (text)")
    f.value(doc, "", "calibration", _is_text, "a path (text)", required=False, none_ok=True)
    _explain_optional(f, doc)
    f.raise_any("explain file", EXPLAIN_HINT)
    return doc


def _explain_optional(f: _Fields, doc: dict) -> None:
    """The optional parts of explain.json: exact optimum, rate, prediction, comm scaling, fission."""
    field, exact = f.mapping(doc, "", "exact", required=False)
    if "skipped" in exact:
        f.value(exact, field, "skipped", _is_text, "a reason (text)")
    elif exact:
        for key in ("objective", "greedy_objective", "gap"):
            f.number(exact, field, key)
    field, rate = f.mapping(doc, "", "rate", required=False)
    f.number(rate, field, "planned", required=False, none_ok=True)
    field, pred = f.mapping(doc, "", "prediction", required=False)
    f.number(pred, field, "rate", required=False, none_ok=True)
    f.number(pred, field, "call_s", required=False, none_ok=True)
    for key in ("bottleneck", "error"):
        f.value(pred, field, key, _is_text, "text", required=False, none_ok=True)
    mfield, model = f.mapping(pred, field, "model", required=False)
    for k, v in model.items():
        ok = _is_text(v) if k == "source" else _is_number(v) or v is None
        if not (is_identifier(k) and ok):
            f.bad(f"{mfield}[{k!r}]", v, "a model constant (a finite number)")
    field, inputs = f.mapping(doc, "", "inputs", required=False)
    sfield, scaling = f.mapping(inputs, field, "comm_scaling", required=False)
    f.number(scaling, sfield, "scale", required=False)
    f.value(scaling, sfield, "host_score_source", _is_text, "text", required=False, none_ok=True)
    field, fission = f.mapping(doc, "", "fission", required=False)
    f.value(fission, field, "enabled", lambda v: isinstance(v, bool), "true or false", required=False)
    pfield, pinned = f.mapping(fission, field, "pinned", required=False)
    for name, w in pinned.items():
        if not (is_identifier(name) and _is_int(w) and 1 <= w <= MAX_REGION_WIDTH):
            f.bad(f"{pfield}[{name!r}]", w, f"a region name: a width from 1 to {MAX_REGION_WIDTH}")
    sfield, search = f.mapping(fission, field, "search", required=False)
    if search:
        f.value(search, sfield, "search", _is_text, "text")
        f.int_in(search, sfield, "max_width", 1, 1 << 16)
        f.int_in(search, sfield, "vectors_tried", 0, 1 << 31)
        rfield, regions = f.mapping(search, sfield, "regions")
        for name, r in regions.items():
            at = f"{rfield}[{name!r}]"
            if not is_identifier(name) or not isinstance(r, dict):
                f.bad(at, r if is_identifier(name) else name, "a region name: its search")
                continue
            f.int_in(r, at, "chosen", 1, MAX_REGION_WIDTH)
            for tat, t in f.objects(r, at, "tried"):
                f.int_in(t, tat, "width", 1, MAX_REGION_WIDTH)
                f.number(t, tat, "planned_rate", none_ok=True)
    kfield, kept = f.mapping(fission, field, "kept_unwidened", required=False)
    f.number(kept, kfield, "widened", required=False, none_ok=True)
    f.number(kept, kfield, "unwidened", required=False)
    nfield, skipped = f.mapping(fission, field, "not_searched", required=False)
    for name, share in skipped.items():
        if not (is_identifier(name) and _is_number(share)):
            f.bad(f"{nfield}[{name!r}]", share, "a region name: its share of the load")
    for at, x in f.objects(fission, field, "exchanges", required=False):
        f.value(x, at, "from", is_identifier, IDENT_RULE)
        f.value(x, at, "to", is_identifier, IDENT_RULE)
        f.value(x, at, "exchange", lambda v: isinstance(v, bool), "true or false")
        f.value(x, at, "why", _is_text, "a reason (text)", required=False)
    _discovered(f, fission, field)


def _discovered(f: _Fields, fission: dict, field: str) -> None:
    """explain.json's ``fission.discovered`` (``plan.discover.Discovery.to_json``)."""
    dfield, found = f.mapping(fission, field, "discovered", required=False)
    if not found:
        return
    for at, c in f.objects(found, dfield, "candidates"):
        f.value(c, at, "name", is_identifier, IDENT_RULE)
        f.names(c, at, "operators", is_identifier, IDENT_RULE)
        f.names(c, at, "key", is_identifier, IDENT_RULE)
        f.value(c, at, "ordering", lambda v: v in ORDERINGS, " or ".join(map(repr, ORDERINGS)))
        f.value(c, at, "fed", lambda v: v in ("split", "source"), "'split' or 'source'")
        for bat, b in f.objects(c, at, "boundaries"):
            f.value(b, bat, "outside", is_identifier, IDENT_RULE)
            f.value(b, bat, "inside", is_identifier, IDENT_RULE)
            f.value(b, bat, "reason", _is_text, "a reason (text)")
    for at, o in f.objects(found, dfield, "outside", required=False):
        f.value(o, at, "operator", is_identifier, IDENT_RULE)
        f.value(o, at, "reason", _is_text, "a reason (text)")
