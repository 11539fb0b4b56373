"""``sink``: write tuples as JSON lines to ``<out>/<name>.jsonl`` (``mode="file"``), only
count them, or write them to a connector (``connector=``: a Redis stream). Its input is not tuple-generating (it ends a PE's call chain). Only a
counting sink may be in a parallel region: each channel's copy counts and the run
reports the sum under the logical name."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from spadeopt.connectors.spec import ConnectorSpec
from spadeopt.kinds.base import Decl, Derived, Imports, Kind, Problems
from spadeopt.kinds.lowering import alias, call_args
from spadeopt.model.graph import STATEFUL, AppGraph, Operator, SymbolRef
from spadeopt.model.schema import Schema


@dataclass(frozen=True)
class SinkParams:
    mode: str  # "file" | "count"
    report_as: str = ""  # a counting sink's channel copy reports its count under this (logical) name


@dataclass(frozen=True)
class ConnectorSinkParams(SinkParams):
    """A sink that writes to a connector (``spadeopt.connectors``, e.g. ``redis_sink``):
    the factory is called with ``args`` and the sink's name, attribute names and types."""

    connector: SymbolRef | None = None
    args: tuple[tuple[str, Any], ...] = ()


def declare(name: str, input: Any, *, mode: str = "file", connector: ConnectorSpec | None = None) -> Decl:
    decl = Decl(name, "sink", {"in": list(input) if isinstance(input, list) else [input]},
                {"mode": mode}, out_ports=(), state=STATEFUL, tuple_generating={"in": False})
    if mode not in ("file", "count"):
        decl.problems.append(f"sink '{name}': mode must be 'file' or 'count', got '{mode}'")
    if connector is not None:
        if not isinstance(connector, ConnectorSpec) or connector.role != "sink":
            what = f"a {connector.role} connector" if isinstance(connector, ConnectorSpec) else repr(connector)
            decl.problems.append(f"sink '{name}': connector= takes a sink connector (spadeopt.connectors."
                                 f"redis_sink), got {what}")
        elif mode != "file":
            decl.problems.append(f"sink '{name}': give mode= or connector=, not both")
        else:
            decl.problems.extend(f"sink '{name}' ({connector.describe}): {p}" for p in connector.problems)
            decl.raw["connector"] = connector
    return decl


def derive(where: str, raw: dict, ins: dict[str, Schema], problems: Problems) -> Derived:
    spec = raw.get("connector")
    if spec is not None:
        return ConnectorSinkParams("connector", connector=SymbolRef(spec.module, spec.qualname),
                                   args=spec.args), {}
    return SinkParams(raw["mode"]), {}


def lower(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    schema = op.in_port("in").schema
    names, types = list(schema.names), [t for _, t in schema.attrs]
    ctx = {"mode": op.params.mode, "names": names, "types": types,
           "report_as": op.params.report_as or op.name, "connector": None}
    if isinstance(op.params, ConnectorSinkParams):
        args = (*op.params.args, ("name", op.name), ("names", names), ("types", types))
        ctx["connector"] = f"{alias(op.params.connector, imports)}({call_args(op, tuple(sorted(args)))})"
    return ctx


def region_problem(op: Operator) -> str | None:
    if isinstance(op.params, ConnectorSinkParams):
        return (f"operator '{op.name}' is a connector sink: it writes in the stream's order, so it is "
                f"never replicated")
    if op.params.mode == "count":
        return None  # commutative: each channel counts, the run reports the sum
    return (f"operator '{op.name}' is a file sink: it writes in the stream's order, so it is never "
            f"replicated (only a counting sink is: each channel counts, the run reports the sum)")


def channel_params(op: Operator, channel: int, width: int, dynamic: bool) -> SinkParams:
    return dataclasses.replace(op.params, report_as=op.name)  # every copy reports under the logical name


KIND = Kind("sink", declare, derive, lower, "ops/sink.py.j2", region_problem=region_problem,
            channel_params=channel_params)
