"""The logical application graph: a frozen IR built by the DSL and read by every stage.

Operators reference each other by name through ``PortRef``s, never by pointer, so the
graph is a plain value: hashable fingerprint, JSON-able, safe to share between passes.
Adjacency indexes are derived (cached) properties, never stored state.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, is_dataclass
from functools import cached_property
from typing import Any

from spadeopt.model.schema import Schema

STATELESS, PARTITIONED, STATEFUL = "stateless", "partitioned", "stateful"  # state kinds
STATIC, DYNAMIC = "static", "dynamic"  # selectivity: one tuple out per tuple in, or data-dependent
ARRIVAL = "arrival"  # a region's third ordering: led by a partitioned source, merged as batches come


@dataclass(frozen=True, order=True)
class PortRef:
    op: str
    port: str

    def __str__(self) -> str:
        return f"{self.op}.{self.port}"


@dataclass(frozen=True)
class SymbolRef:
    """An importable, module-level Python object (function or class)."""

    module: str
    qualname: str

    def __str__(self) -> str:
        return f"{self.module}:{self.qualname}"


@dataclass(frozen=True)
class InPort:
    name: str
    schema: Schema | None  # None: accepts any schema (sinks)
    tuple_generating: bool = True


@dataclass(frozen=True)
class OutPort:
    name: str
    schema: Schema


@dataclass(frozen=True)
class Operator:
    name: str
    kind: str
    inputs: tuple[InPort, ...]
    outputs: tuple[OutPort, ...]
    params: Any  # a kind-specific frozen dataclass (``spadeopt.kinds.<kind>``)
    state: str = STATELESS
    key: tuple[str, ...] = ()
    line: str = ""  # where the developer declared it (file:line), for messages

    @property
    def is_source(self) -> bool:
        return not self.inputs

    def in_port(self, name: str) -> InPort:
        return next(p for p in self.inputs if p.name == name)

    def out_port(self, name: str) -> OutPort:
        return next(p for p in self.outputs if p.name == name)


@dataclass(frozen=True)
class Stream:
    """One subscription: an output port publishing into an input port."""

    src: PortRef
    dst: PortRef


@dataclass(frozen=True)
class Annotations:
    """The developer's manual fusion knobs (SPADE's partition/host constraints)."""

    colocate: tuple[tuple[str, ...], ...] = ()
    exlocate: tuple[tuple[str, ...], ...] = ()
    host: tuple[tuple[str, int], ...] = ()  # operator -> node index (FMAN placement)
    fuse: tuple[tuple[str, ...], ...] = ()  # the developer's manual fusion (FMAN only)
    # parallel regions: (name, operators, width); the width is the developer's choice (FMAN)
    parallel: tuple[tuple[str, tuple[str, ...], int], ...] = ()
    # physical graphs only (plan.fission): each replicated region's channels, as the
    # copies in each channel; fusion never puts two channels of one region in one PE
    channels: tuple[tuple[tuple[str, ...], ...], ...] = ()
    # physical graphs only (plan.fission): the two sides of each key exchange (the
    # upstream region's channels with their senders, the receivers with the downstream
    # region's channels); no PE holds operators of both: two such PEs would send to each
    # other, and a cycle of single-threaded PEs with bounded queues can deadlock
    apart: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class AppGraph:
    name: str
    operators: tuple[Operator, ...]
    streams: tuple[Stream, ...]
    annotations: Annotations = field(default_factory=Annotations)
    params: tuple[tuple[str, Any], ...] = ()
    module: str = ""  # module name of the app's own code (symbols there load via the app)

    @cached_property
    def by_name(self) -> dict[str, Operator]:
        return {op.name: op for op in self.operators}

    @cached_property
    def memo(self) -> dict[Any, Any]:
        """Results of pure functions of this (frozen) graph, kept with it so that stages
        share them instead of recomputing: ``plan.fission.physical_graph`` per regions."""
        return {}

    def op(self, name: str) -> Operator:
        return self.by_name[name]

    @cached_property
    def _subs(self) -> dict[PortRef, tuple[PortRef, ...]]:
        out: dict[PortRef, list[PortRef]] = {}
        for s in self.streams:
            out.setdefault(s.src, []).append(s.dst)
        return {k: tuple(v) for k, v in out.items()}

    @cached_property
    def _pubs(self) -> dict[PortRef, tuple[PortRef, ...]]:
        out: dict[PortRef, list[PortRef]] = {}
        for s in self.streams:
            out.setdefault(s.dst, []).append(s.src)
        return {k: tuple(v) for k, v in out.items()}

    def subscribers(self, src: PortRef) -> tuple[PortRef, ...]:
        return self._subs.get(src, ())

    def publishers(self, dst: PortRef) -> tuple[PortRef, ...]:
        return self._pubs.get(dst, ())

    @cached_property
    def acyclic(self) -> bool:
        """Whether the streams form no cycle (self-loops included), by Kahn's algorithm."""
        indeg = {op.name: 0 for op in self.operators}
        out: dict[str, list[str]] = {}
        for s in self.streams:
            indeg[s.dst.op] += 1
            out.setdefault(s.src.op, []).append(s.dst.op)
        ready = [n for n, d in indeg.items() if d == 0]
        seen = 0
        while ready:
            n = ready.pop()
            seen += 1
            for m in out.get(n, ()):
                indeg[m] -= 1
                if indeg[m] == 0:
                    ready.append(m)
        return seen == len(indeg)

    @cached_property
    def fingerprint(self) -> str:
        """A hash of the graph's structure and parameters (not of the app params' names)."""
        return self.fingerprint_with(lambda op: op.params)

    def fingerprint_with(self, params_of: Callable[[Operator], Any]) -> str:
        """:attr:`fingerprint` with each operator's parameters as ``params_of`` gives them
        (``spadeopt.optimize.profile_match`` leaves out what only bounds a source's length)."""
        doc = {
            "name": self.name,
            "operators": [
                {
                    "name": op.name,
                    "kind": op.kind,
                    "inputs": [[p.name, p.schema.to_json() if p.schema else None, p.tuple_generating] for p in op.inputs],
                    "outputs": [[p.name, p.schema.to_json()] for p in op.outputs],
                    "params": to_jsonable(params_of(op)),
                    "state": op.state,
                    "key": list(op.key),
                }
                for op in self.operators
            ],
            "streams": [[str(s.src), str(s.dst)] for s in self.streams],
        }
        blob = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def params_dict(self) -> dict[str, Any]:
        return dict(self.params)


def to_jsonable(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        if isinstance(value, Schema):
            return value.to_json()
        if isinstance(value, SymbolRef):
            return str(value)
        return {k: to_jsonable(v) for k, v in asdict(value).items()}
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return value.hex()
    return value
