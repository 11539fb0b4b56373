"""The Python DSL developers write apps in.

    from spadeopt import App, app, count_window

    @app
    def chain(n: int = 8, size: int = 100) -> App:
        a = App("chain")
        s = a.source("src", "seq:int, payload:bytes", generator=counter, args={"n": 1000})
        for i in range(n):
            s = a.functor(f"f{i}", s)
        a.sink("sink", s)
        return a

Every ``App`` method records a declaration and returns stream handles; nothing is
checked until ``App.build()``, which validates the whole graph and reports *every*
problem at once in one ``GraphError``. Streams may also be named by string
(``"op.port"``, or ``"op"`` for an operator's only output) so feedback loops can refer
to operators declared later.
"""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from spadeopt.errors import GraphError, SpadeoptError, UsageError, user_failure
from spadeopt.model.graph import (
    PARTITIONED,
    STATEFUL,
    STATELESS,
    Annotations,
    AppGraph,
    InPort,
    Operator,
    OutPort,
    PortRef,
    Stream,
    SymbolRef,
)
from spadeopt.model.schema import Schema, is_identifier
from spadeopt.toolkit.params import (
    CustomParams,
    MergeParams,
    SinkParams,
    SourceParams,
    UnionParams,
    Window,
)
from spadeopt.toolkit.sources import split_size


@dataclass(frozen=True)
class StreamHandle:
    """What DSL calls return: a reference to one output port."""

    op: str
    port: str = "out"

    def __str__(self) -> str:
        return f"{self.op}.{self.port}"


StreamLike = StreamHandle | str


def count_window(size: int, slide: int | None = None) -> Window:
    """The last ``size`` tuples, emitted every ``slide`` tuples (default: tumbling)."""
    return Window("count", size, size if slide is None else slide)


def time_window(attr: str, size: float, slide: float | None = None) -> Window:
    """Event-time windows ``[k*slide, k*slide+size)`` over attribute ``attr``."""
    return Window("time", size, size if slide is None else slide, attr)


def symbol_of(obj: Any, what: str) -> SymbolRef:
    """The import path of a module-level function or class, or a clear error."""
    if isinstance(obj, SymbolRef):
        return obj
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if not module or not qualname or "<locals>" in qualname or "<lambda>" in qualname:
        msg = (f"{what}: {obj!r} is not a module-level function or class; PEs import user code "
               f"by name, so define it at the top level of a module")
        raise UsageError(msg)
    return SymbolRef(module, qualname)


def _caller_line() -> str:
    frame = sys._getframe(3)
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


@dataclass
class _Decl:
    name: str
    kind: str
    inputs: dict[str, list[StreamLike]]
    raw: dict[str, Any]
    out_ports: tuple[str, ...] = ("out",)
    out_schemas: dict[str, Schema] | None = None  # declared (source, custom); else derived
    state: str = STATELESS
    key: tuple[str, ...] = ()
    tuple_generating: dict[str, bool] = field(default_factory=dict)
    line: str = ""
    problems: list[str] = field(default_factory=list)


class App:
    """A mutable builder for one application graph; ``build()`` freezes it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._decls: list[_Decl] = []
        self._colocate: list[tuple[str, ...]] = []
        self._exlocate: list[tuple[str, ...]] = []
        self._host: list[tuple[str, int]] = []
        self._fuse: list[tuple[str, ...]] = []
        self._parallel: list[tuple[str, tuple[str, ...], int]] = []

    # ---- operators -------------------------------------------------------------------
    def _add(self, decl: _Decl) -> None:
        decl.line = _caller_line()
        self._decls.append(decl)

    def _schema(self, spec: Any, decl: _Decl, what: str) -> Schema | None:
        try:
            return Schema.parse(spec)
        except UsageError as exc:
            decl.problems.append(f"operator '{decl.name}' {what}: {exc}")
            return None

    def source(self, name: str, schema: Any, *, generator: Callable | None = None,
               args: Mapping[str, Any] | None = None, file: str | None = None,
               format: str | None = None) -> StreamHandle:
        """A source: a seeded generator ``generator(**args)`` yielding tuples, or a file
        replay (CSV with a header, JSON lines, or Parquet) of ``file``. A generator marked
        ``spadeopt.toolkit.sources.splittable`` yields splits instead, and may lead a
        parallel region (each channel reads its own splits)."""
        decl = _Decl(name, "source", {}, {}, state=STATEFUL)
        sch = self._schema(schema, decl, "schema")
        decl.out_schemas = {"out": sch} if sch else None
        if (generator is None) == (file is None):
            decl.problems.append(f"source '{name}': give exactly one of generator= or file=")
        elif file is not None:
            file = os.path.abspath(file)  # PEs may run elsewhere: resolve against the builder's cwd
            fmt = format or file.rsplit(".", 1)[-1].lower()
            readers = {"csv": "read_csv", "jsonl": "read_jsonl", "json": "read_jsonl", "parquet": "read_parquet"}
            if fmt not in readers:
                decl.problems.append(f"source '{name}': unknown file format '{fmt}'; use csv, jsonl or parquet")
            else:
                decl.raw["params"] = SourceParams(
                    SymbolRef("spadeopt.toolkit.sources", readers[fmt]),
                    (("path", file), ("schema", sch.to_json() if sch else [])),
                )
        else:
            try:
                try:
                    split = split_size(generator, dict(args or {}))
                except ValueError as exc:
                    raise UsageError(f"source '{name}': {exc}") from None
                if split and {"part", "parts"} & set(args or {}):
                    raise UsageError(f"source '{name}': args must not set part/parts of a splittable "
                                     f"generator; fission sets them for each channel")
                decl.raw["params"] = SourceParams(symbol_of(generator, f"source '{name}'"),
                                                  tuple(sorted((args or {}).items())), split=split)
            except UsageError as exc:
                decl.problems.append(str(exc))
        self._add(decl)
        return StreamHandle(name)

    def functor(self, name: str, input: StreamLike, *, output: Mapping[str, str] | None = None,
                filter: str | None = None, functions: Iterable[Callable] = ()) -> StreamHandle:
        """Compute or project attributes (``{"name[:type]": expr}``) and/or filter tuples."""
        decl = _Decl(name, "functor", {"in": [input]}, {"output": dict(output) if output is not None else None, "filter": filter})
        decl.raw["functions"] = self._functions(functions, decl)
        self._add(decl)
        return StreamHandle(name)

    def aggregate(self, name: str, input: StreamLike, *, window: Window, output: Mapping[str, str],
                  by: Iterable[str] = (), functions: Iterable[Callable] = ()) -> StreamHandle:
        """Windowed aggregation: outputs are group-by attributes, ``count()``, ``sum(e)``,
        ``avg(e)``, ``min(e)``, ``max(e)``, ``first(e)``, ``last(e)``, ``wstart()``, ``wend()``."""
        by = tuple(by)
        decl = _Decl(name, "aggregate", {"in": [input]}, {"window": window, "by": by, "output": dict(output)},
                     state=PARTITIONED if by else STATEFUL, key=by)
        decl.raw["functions"] = self._functions(functions, decl)
        self._add(decl)
        return StreamHandle(name)

    def join(self, name: str, left: StreamLike, right: StreamLike, *, on: str | tuple, order: str | tuple,
             window: tuple[Window, Window], output: Mapping[str, str], where: str | None = None,
             functions: Iterable[Callable] = ()) -> StreamHandle:
        """Windowed equi-join. Both inputs must be ordered by their ``order`` attribute; a
        tuple arriving on one side probes the other side's window, then enters its own
        side's window (``window=(left_window, right_window)``; ``count_window(0)`` keeps none).
        Tuples are processed in merged ``order`` (left first on ties), so the result does
        not depend on arrival timing."""
        lk, rk = (on, on) if isinstance(on, str) else on
        lo, ro = (order, order) if isinstance(order, str) else order
        lk = (lk,) if isinstance(lk, str) else tuple(lk)
        rk = (rk,) if isinstance(rk, str) else tuple(rk)
        decl = _Decl(name, "join", {"left": [left], "right": [right]},
                     {"left_key": lk, "right_key": rk, "left_order": lo, "right_order": ro,
                      "left_window": window[0], "right_window": window[1], "output": dict(output),
                      "where": where}, state=PARTITIONED if lk else STATEFUL, key=lk)
        decl.raw["functions"] = self._functions(functions, decl)
        self._add(decl)
        return StreamHandle(name)

    def split(self, name: str, input: StreamLike, *, n: int | None = None, by: str | None = None,
              predicates: Iterable[str] | None = None, functions: Iterable[Callable] = ()) -> tuple[StreamHandle, ...]:
        """Route by a stable hash of ``by`` to ``n`` outputs, or by ``predicates`` (one output each)."""
        preds = list(predicates) if predicates is not None else None
        count = len(preds) if preds is not None else (n or 0)
        decl = _Decl(name, "split", {"in": [input]}, {"n": count, "by": by, "predicates": preds},
                     out_ports=tuple(f"out{i}" for i in range(count)))
        if count < 1:
            decl.problems.append(f"split '{name}': needs n >= 1 outputs (got {count})")
        decl.raw["functions"] = self._functions(functions, decl)
        self._add(decl)
        return tuple(StreamHandle(name, f"out{i}") for i in range(count))

    def union(self, name: str, inputs: Iterable[StreamLike]) -> StreamHandle:
        """Interleave streams in arrival order (not deterministic across fusions; use merge)."""
        decl = _Decl(name, "union", {"in": list(inputs)}, {"params": UnionParams()})
        self._add(decl)
        return StreamHandle(name)

    def merge(self, name: str, inputs: Iterable[StreamLike], *, order_by: str) -> StreamHandle:
        """Order-preserving merge of streams each ordered by ``order_by`` (ties: input order)."""
        ins = list(inputs)
        decl = _Decl(name, "merge", {f"in{i}": [s] for i, s in enumerate(ins)},
                     {"params": MergeParams(order_by), "order_by": order_by}, state=STATEFUL)
        if len(ins) < 1:
            decl.problems.append(f"merge '{name}': needs at least one input")
        self._add(decl)
        return StreamHandle(name)

    def custom(self, name: str, cls: type, *, inputs: Mapping[str, StreamLike | list[StreamLike]],
               outputs: Mapping[str, Any], args: Mapping[str, Any] | None = None,
               state: str = STATEFUL, key: Iterable[str] = (),
               tuple_generating: Mapping[str, bool] | None = None) -> dict[str, StreamHandle]:
        """A user class with ``process(port, tup, submit)`` and optionally ``on_final(submit)``."""
        decl = _Decl(name, "custom",
                     {p: (list(s) if isinstance(s, list) else [s]) for p, s in inputs.items()}, {},
                     out_ports=tuple(outputs), state=state, key=tuple(key),
                     tuple_generating=dict(tuple_generating or {}))
        schemas = {p: self._schema(s, decl, f"output '{p}'") for p, s in outputs.items()}
        decl.out_schemas = schemas if all(schemas.values()) else None
        if state not in (STATELESS, PARTITIONED, STATEFUL):
            decl.problems.append(f"custom '{name}': state must be stateless, partitioned or stateful")
        try:
            decl.raw["params"] = CustomParams(symbol_of(cls, f"custom '{name}'"), tuple(sorted((args or {}).items())))
        except UsageError as exc:
            decl.problems.append(str(exc))
        for p in decl.tuple_generating:
            if p not in inputs:
                decl.problems.append(f"custom '{name}': tuple_generating names unknown input port '{p}'")
        self._add(decl)
        return {p: StreamHandle(name, p) for p in outputs}

    def sink(self, name: str, input: StreamLike | list[StreamLike], *, mode: str = "file") -> None:
        """Write tuples as JSON lines to ``<out>/<name>.jsonl`` (``mode="file"``) or only count them."""
        decl = _Decl(name, "sink", {"in": list(input) if isinstance(input, list) else [input]},
                     {"params": SinkParams(mode)}, out_ports=(), state=STATEFUL)
        if mode not in ("file", "count"):
            decl.problems.append(f"sink '{name}': mode must be 'file' or 'count', got '{mode}'")
        self._add(decl)

    def _functions(self, functions: Iterable[Callable], decl: _Decl) -> tuple:
        out = []
        for fn in functions:
            try:
                ref = symbol_of(fn, f"operator '{decl.name}' function")
                out.append((ref.qualname.rsplit(".", 1)[-1], ref))
            except UsageError as exc:
                decl.problems.append(str(exc))
        return tuple(sorted(out, key=lambda x: x[0]))

    # ---- manual fusion annotations ---------------------------------------------------
    def colocate(self, *ops: str) -> None:
        """A constraint: these operators must share one PE under FMAN and FATM alike."""
        self._colocate.append(tuple(ops))

    def fuse(self, *ops: str) -> None:
        """The developer's manual fusion: one PE under FMAN. A choice, not a constraint:
        the optimizer (FATM) makes its own."""
        self._fuse.append(tuple(ops))

    def exlocate(self, *ops: str) -> None:
        """These operators must each be in a different PE."""
        self._exlocate.append(tuple(ops))

    def parallel(self, *ops: str, width: int = 2, name: str | None = None) -> str:
        """Declare a parallel region: ``ops`` run as ``width`` channels (fission), fed by a
        split and followed by an order-preserving merge, so answers do not change. The
        width is the developer's choice (used by FMAN; ``--width NAME=K`` overrides it for
        any strategy). Returns the region's name (default: its first operator's)."""
        region = name or (ops[0] if ops else "")
        self._parallel.append((region, tuple(ops), width))
        return region

    def place(self, op: str, node: int) -> None:
        """Put the PE holding ``op`` on node ``node`` (FMAN placement; FATM places by itself)."""
        self._host.append((op, node))

    # ---- build + validation ------------------------------------------------------------
    def build(self, params: Mapping[str, Any] | None = None, module: str = "") -> AppGraph:
        """Validate and freeze; raises ``GraphError`` listing every problem."""
        from spadeopt.model.validate import build_graph

        return build_graph(self, params or {}, module)


# ---- app specs: parameterised builders ----------------------------------------------


@dataclass(frozen=True)
class AppSpec:
    """A builder function whose keyword defaults are the app's parameters."""

    builder: Callable[..., App]

    @property
    def name(self) -> str:
        return self.builder.__name__

    @property
    def defaults(self) -> dict[str, Any]:
        sig = inspect.signature(self.builder)
        return {k: p.default for k, p in sig.parameters.items() if p.default is not inspect.Parameter.empty}

    def coerce(self, overrides: Mapping[str, str | Any]) -> dict[str, Any]:
        """Parse ``-p KEY=VALUE`` strings to the defaults' types; unknown keys are errors."""
        defaults = self.defaults
        out = dict(defaults)
        problems = []
        for key, value in overrides.items():
            if key not in defaults:
                problems.append(f"unknown parameter '{key}'; this app takes: "
                                + ", ".join(f"{k}={v!r}" for k, v in defaults.items()))
                continue
            typ = type(defaults[key])
            try:
                if not isinstance(value, str):
                    out[key] = typ(value)
                elif typ is bool:
                    if value.lower() not in ("1", "0", "true", "false", "yes", "no"):
                        raise ValueError(value)
                    out[key] = value.lower() in ("1", "true", "yes")
                else:
                    out[key] = typ(value)
            except (TypeError, ValueError):
                problems.append(f"parameter '{key}' must be {typ.__name__}, got {value!r}")
        if problems:
            raise GraphError(self.name, problems)
        return out

    def build(self, overrides: Mapping[str, Any] | None = None) -> AppGraph:
        params = self.coerce(overrides or {})
        try:
            builder_app = self.builder(**params)
        except SpadeoptError:
            raise
        except Exception as exc:  # noqa: BLE001 - anything the user's builder raises
            raise user_failure(exc, f"app '{self.name}': its builder raised") from None
        if not isinstance(builder_app, App):
            msg = f"app '{self.name}': the builder must return an App, got {type(builder_app).__name__}"
            raise UsageError(msg)
        return builder_app.build(params, module=self.builder.__module__)


def app(builder: Callable[..., App]) -> AppSpec:
    """Decorator: turn ``def myapp(param=default, ...) -> App`` into an ``AppSpec``."""
    return AppSpec(builder)


__all__ = [
    "App", "AppSpec", "StreamHandle", "app", "count_window", "time_window", "symbol_of",
    "InPort", "OutPort", "Operator", "PortRef", "Stream", "Annotations", "is_identifier",
]
