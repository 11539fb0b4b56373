"""A toy operator kind defined only in tests: ``sample`` keeps every k-th tuple (of each
key, with ``by=``). It is what ``docs/architecture.md`` shows: one kind module (this
file) plus its template (``sample.py.j2`` next to it), registered with
``spadeopt.kinds.register``; no other part of spadeopt knows about it.

Partitioned on ``by`` (stateful without), so it may run in a parallel region keyed by
``by``; it forwards every attribute unchanged, tuples and fission's sequence number
included, so its channel copies need no parameter change (the default)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spadeopt.kinds import register
from spadeopt.kinds.kind import Decl, Derived, Imports, Kind, Problems
from spadeopt.kinds.lowering import key_source
from spadeopt.model.graph import PARTITIONED, STATEFUL, AppGraph, Operator
from spadeopt.model.schema import Schema


@dataclass(frozen=True)
class SampleParams:
    k: int
    by: tuple[str, ...] = ()


def declare(name: str, input: Any, *, k: int, by: tuple[str, ...] = ()) -> Decl:
    by = tuple(by)
    decl = Decl(name, "sample", {"in": [input]}, {"k": k, "by": by},
                state=PARTITIONED if by else STATEFUL, key=by)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        decl.problems.append(f"sample '{name}': k must be an integer >= 1, got {k!r}")
    return decl


def derive(where: str, raw: dict, ins: dict[str, Schema], problems: Problems) -> Derived:
    schema = ins["in"]
    missing = [b for b in raw["by"] if b not in schema]
    problems.extend(f"{where}: key attribute '{b}' is not in the input schema ({schema})" for b in missing)
    if missing:
        return None, None
    return SampleParams(raw["k"], raw["by"]), {"out": schema}


def lower(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    return {"k": op.params.k, "key": key_source(op.params.by, op.in_port("in").schema)}


def forwards(op: Operator, attr: str) -> bool:
    return True


KIND = register(Kind("sample", declare, derive, lower, str(Path(__file__).with_name("sample.py.j2")),
                     forwards=forwards))
