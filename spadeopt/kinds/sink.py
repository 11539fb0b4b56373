"""``sink``: write tuples as JSON lines to ``<out>/<name>.jsonl`` (``mode="file"``) or only
count them. Its input is not tuple-generating (it ends a PE's call chain). Only a
counting sink may be in a parallel region: each channel's copy counts and the run
reports the sum under the logical name."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from spadeopt.kinds.base import Decl, Derived, Imports, Kind, Problems
from spadeopt.model.graph import STATEFUL, AppGraph, Operator
from spadeopt.model.schema import Schema


@dataclass(frozen=True)
class SinkParams:
    mode: str  # "file" | "count"
    report_as: str = ""  # a counting sink's channel copy reports its count under this (logical) name


def declare(name: str, input: Any, *, mode: str = "file") -> Decl:
    decl = Decl(name, "sink", {"in": list(input) if isinstance(input, list) else [input]},
                {"mode": mode}, out_ports=(), state=STATEFUL, tuple_generating={"in": False})
    if mode not in ("file", "count"):
        decl.problems.append(f"sink '{name}': mode must be 'file' or 'count', got '{mode}'")
    return decl


def derive(where: str, raw: dict, ins: dict[str, Schema], problems: Problems) -> Derived:
    return SinkParams(raw["mode"]), {}


def lower(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    schema = op.in_port("in").schema
    return {"mode": op.params.mode, "names": list(schema.names), "types": [t for _, t in schema.attrs],
            "report_as": op.params.report_as or op.name}


def region_problem(op: Operator) -> str | None:
    if op.params.mode == "count":
        return None  # commutative: each channel counts, the run reports the sum
    return (f"operator '{op.name}' is a file sink: it writes in the stream's order, so it is never "
            f"replicated (only a counting sink is: each channel counts, the run reports the sum)")


def channel_params(op: Operator, channel: int, width: int, dynamic: bool) -> SinkParams:
    return dataclasses.replace(op.params, report_as=op.name)  # every copy reports under the logical name


KIND = Kind("sink", declare, derive, lower, "ops/sink.py.j2", region_problem=region_problem,
            channel_params=channel_params)
