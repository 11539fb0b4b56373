"""``sink``: write tuples as JSON lines to ``<out>/<name>.jsonl`` (``mode="file"``), only
count them, or write them to a connector (``connector=``: a Redis stream). Its input is not tuple-generating (it ends a PE's call chain). A
counting sink may be in a parallel region (each channel's copy counts and the run
reports the sum under the logical name), and so may an unordered file sink
(``mode="unordered"``: the order of its lines is not part of the answer; each channel's
copy writes its own part, the run's commit sorts every part's lines into
``<name>.jsonl``, ``runtime.sinks``). A file sink (``mode="file"``) writes in the
stream's order and is never replicated."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from spadeopt.connectors.declared import ConnectorSpec
from spadeopt.kinds.kind import Decl, Derived, Imports, Kind, Problems
from spadeopt.kinds.lowering import alias, call_args
from spadeopt.model.graph import STATEFUL, AppGraph, Operator, SymbolRef
from spadeopt.model.schema import Schema
from spadeopt.protocol import SEQ

MODES = ("file", "unordered", "count")


@dataclass(frozen=True)
class SinkParams:
    mode: str  # "file" | "unordered" (a file whose line order is not part of the answer) | "count"
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
    if mode not in MODES:
        decl.problems.append(f"sink '{name}': mode must be 'file', 'unordered' or 'count', got '{mode}'")
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
    strip = bool(names) and names[-1] == SEQ and op.params.mode == "unordered"  # a channel copy's lines
    if strip:
        names, types = names[:-1], types[:-1]
    ctx = {"mode": op.params.mode, "names": names, "types": types, "strip": strip,
           "report_as": op.params.report_as or op.name, "connector": None}
    if isinstance(op.params, ConnectorSinkParams):
        args = (*op.params.args, ("name", op.name), ("names", names), ("types", types))
        ctx["connector"] = f"{alias(op.params.connector, imports)}({call_args(op, tuple(sorted(args)))})"
    return ctx


def region_problem(op: Operator) -> str | None:
    if isinstance(op.params, ConnectorSinkParams):
        return (f"operator '{op.name}' is a connector sink: it writes in the stream's order, so it is "
                f"never replicated")
    if op.params.mode in ("count", "unordered"):
        return None  # commutative: each channel counts (writes its part), the run sums (sorts) them
    return (f"operator '{op.name}' is a file sink: it writes in the stream's order, so it is never "
            f"replicated (a counting sink is: each channel counts, the run reports the sum; so is an "
            f"unordered one, mode='unordered': each channel writes its lines, the run sorts them)")


def checkpoint_problem(op: Operator) -> str | None:
    if op.params.mode == "unordered":
        return (f"sink '{op.name}' is unordered (mode='unordered'), which does not take checkpoints yet; "
                f"use mode='file' for a checkpointed run")
    return None


def channel_params(op: Operator, channel: int, width: int, dynamic: bool) -> SinkParams:
    return dataclasses.replace(op.params, report_as=op.name)  # every copy reports under the logical name


def rescale(op: Operator) -> dict[str, Any] | str:
    """A counting sink's copies checkpoint their counts, which add up to the run's: summed
    into channel 0 at another width (``deploy.checkpoint_rescale``)."""
    mode = getattr(op.params, "mode", "connector")
    if mode == "count":
        return {"count": True}
    return f"a {mode} sink's output is not moved to another width yet"


KIND = Kind("sink", declare, derive, lower, "ops/sink.py.j2", region_problem=region_problem,
            channel_params=channel_params, checkpoint_problem=checkpoint_problem, rescale=rescale)
