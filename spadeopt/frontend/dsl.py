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
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from spadeopt.errors import GraphError, SpadeoptError, UsageError, user_failure
from spadeopt.frontend.custom_check import check_custom
from spadeopt.frontend.validate import build_graph, where_declared
from spadeopt.kinds import (
    KINDS,
    aggregate,
    custom,
    functor,
    join,
    merge,
    sink,
    source,
    split,
    union,
)
from spadeopt.kinds.kind import Decl, symbol_of
from spadeopt.kinds.windows import Window
from spadeopt.model.graph import (
    STATEFUL,
    Annotations,
    AppGraph,
    InPort,
    Operator,
    OutPort,
    PortRef,
    Stream,
)
from spadeopt.model.schema import is_identifier


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


def time_window(attr: str, size: float, slide: float | None = None, allowed_lateness: float = 0) -> Window:
    """Event-time windows ``[k*slide, k*slide+size)`` over attribute ``attr``; a window
    closes once event time passed its end by ``allowed_lateness``."""
    return Window("time", size, size if slide is None else slide, attr, allowed_lateness)


def _caller_line() -> str:
    """``file:line`` of the developer's call of an ``App`` method (three frames up)."""
    frame = sys._getframe(3)
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


class App:
    """A mutable builder for one application graph; ``build()`` freezes it.

    Each operator method hands its arguments to its kind's ``declare``
    (``spadeopt.kinds``); ``operator`` does the same for any registered kind."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._decls: list[Decl] = []
        self._colocate: list[tuple[str, ...]] = []
        self._exlocate: list[tuple[str, ...]] = []
        self._host: list[tuple[str, int]] = []
        self._fuse: list[tuple[str, ...]] = []
        self._parallel: list[tuple[str, tuple[str, ...], int]] = []

    # ---- operators -------------------------------------------------------------------
    def _add(self, decl: Decl) -> Decl:
        decl.line = _caller_line()
        self._decls.append(decl)
        return decl

    def source(self, name: str, schema: Any, *, generator: Callable | None = None,
               args: Mapping[str, Any] | None = None, file: str | None = None,
               format: str | None = None, connector: Any = None) -> StreamHandle:
        """A source: a seeded generator ``generator(**args)`` yielding tuples, a file
        replay (CSV with a header, JSON lines, or Parquet) of ``file``, or a live
        ``connector`` (``spadeopt.connectors.redis_source``, ``tcp_source``,
        ``folder_source``; docs/connectors.md). A generator marked
        ``spadeopt.toolkit.sources.splittable`` yields splits instead, and may lead a
        parallel region (each channel reads its own splits)."""
        self._add(source.declare(name, schema, generator=generator, args=args, file=file, format=format,
                                 connector=connector))
        return StreamHandle(name)

    def functor(self, name: str, input: StreamLike, *, output: Mapping[str, str] | None = None,
                filter: str | None = None, functions: Iterable[Callable] = ()) -> StreamHandle:
        """Compute or project attributes (``{"name[:type]": expr}``) and/or filter tuples."""
        self._add(functor.declare(name, input, output=output, filter=filter, functions=functions))
        return StreamHandle(name)

    def aggregate(self, name: str, input: StreamLike, *, window: Window, output: Mapping[str, str],
                  by: Iterable[str] = (), functions: Iterable[Callable] = (), late: bool = False
                  ) -> StreamHandle | tuple[StreamHandle, StreamHandle]:
        """Windowed aggregation: outputs are group-by attributes, ``count()``, ``sum(e)``,
        ``avg(e)``, ``min(e)``, ``max(e)``, ``first(e)``, ``last(e)``, ``wstart()``, ``wend()``.
        ``late=True`` (event-time windows): returns ``(rows, late)``, ``late`` the stream
        of the input tuples dropped as late (port ``late``)."""
        decl = self._add(aggregate.declare(name, input, window=window, output=output, by=by, functions=functions,
                                           late=late))
        return (StreamHandle(name), StreamHandle(name, "late")) if "late" in decl.out_ports else StreamHandle(name)

    def join(self, name: str, left: StreamLike, right: StreamLike, *, on: str | tuple, order: str | tuple,
             window: tuple[Window, Window], output: Mapping[str, str], where: str | None = None,
             functions: Iterable[Callable] = ()) -> StreamHandle:
        """Windowed equi-join. Both inputs must be ordered by their ``order`` attribute; a
        tuple arriving on one side probes the other side's window, then enters its own
        side's window (``window=(left_window, right_window)``; ``count_window(0)`` keeps none).
        Tuples are processed in merged ``order`` (left first on ties), so the result does
        not depend on arrival timing."""
        self._add(join.declare(name, left, right, on=on, order=order, window=window, output=output,
                               where=where, functions=functions))
        return StreamHandle(name)

    def split(self, name: str, input: StreamLike, *, n: int | None = None, by: str | None = None,
              predicates: Iterable[str] | None = None, functions: Iterable[Callable] = ()) -> tuple[StreamHandle, ...]:
        """Route by a stable hash of ``by`` to ``n`` outputs, or by ``predicates`` (one output each)."""
        decl = self._add(split.declare(name, input, n=n, by=by, predicates=predicates, functions=functions))
        return tuple(StreamHandle(name, p) for p in decl.out_ports)

    def union(self, name: str, inputs: Iterable[StreamLike]) -> StreamHandle:
        """Interleave streams in arrival order (not deterministic across fusions; use merge)."""
        self._add(union.declare(name, inputs))
        return StreamHandle(name)

    def merge(self, name: str, inputs: Iterable[StreamLike], *, order_by: str) -> StreamHandle:
        """Order-preserving merge of streams each ordered by ``order_by`` (ties: input order)."""
        self._add(merge.declare(name, inputs, order_by=order_by))
        return StreamHandle(name)

    def custom(self, name: str, cls: type, *, inputs: Mapping[str, StreamLike | list[StreamLike]],
               outputs: Mapping[str, Any], args: Mapping[str, Any] | None = None,
               state: str = STATEFUL, key: Iterable[str] = (),
               tuple_generating: Mapping[str, bool] | None = None) -> dict[str, StreamHandle]:
        """A user class with ``process(port, tup, submit)`` and optionally ``on_final(submit)``."""
        decl = self._add(custom.declare(name, cls, inputs=inputs, outputs=outputs, args=args, state=state, key=key,
                                        tuple_generating=tuple_generating))
        decl.problems.extend(check_custom(name, cls, outputs, args, inputs, where_declared(decl.line)))
        return {p: StreamHandle(name, p) for p in outputs}

    def sink(self, name: str, input: StreamLike | list[StreamLike], *, mode: str = "file",
             connector: Any = None) -> None:
        """Write tuples as JSON lines to ``<out>/<name>.jsonl`` (``mode="file"``), only count
        them, or write them to a ``connector`` (``spadeopt.connectors.redis_sink``)."""
        self._add(sink.declare(name, input, mode=mode, connector=connector))

    def operator(self, kind: str, name: str, *inputs: StreamLike, **args: Any
                 ) -> StreamHandle | tuple[StreamHandle, ...] | None:
        """An operator of any registered kind (``spadeopt.kinds.register``): ``inputs`` and
        ``args`` go to the kind's ``declare``. Returns the handle of its one output port,
        a tuple of handles when it has several (in port order), or None when it has none."""
        if kind not in KINDS or KINDS[kind].declare is None:
            known = ", ".join(sorted(k for k, v in KINDS.items() if v.declare is not None))
            msg = f"operator '{name}': unknown operator kind '{kind}'; known kinds: {known}"
            raise UsageError(msg)
        decl = self._add(KINDS[kind].declare(name, *inputs, **args))
        handles = tuple(StreamHandle(name, p) for p in decl.out_ports)
        return handles[0] if len(handles) == 1 else (handles or None)

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
        ann = Annotations(tuple(self._colocate), tuple(self._exlocate), tuple(self._host), tuple(self._fuse),
                          tuple(self._parallel))
        return build_graph(self.name, self._decls, ann, params or {}, module)


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
