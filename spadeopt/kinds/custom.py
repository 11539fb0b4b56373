"""``custom``: a user class with ``process(port, tup, submit)`` and optionally
``on_final(submit)``. Output schemas are declared; stateful unless it declares
``state=``; its code may block, so profiling timing windows never cover it.

A parallel region may hold it when it declares ``state="stateless"`` or
``state="partitioned", key=[...]`` (trusted, as 002 trusts operator models). Its channel
copy hands the user the width-1 tuple (the sequence number stripped) and numbers every
tuple the user submits with the number of the input tuple being processed; pulses are
passed on after the batch's output. ``on_final``: a partitioned copy numbers a row
``B + n``, ``B`` its final base (``plan.fission.final_base``), ``n`` the number of the first tuple of the row's key (read from
the row's key attributes), so the merge puts final rows in the order their keys first
appeared (the order of a dict filled as tuples arrive, grouped by key); a stateless copy
keeps what channel 0's ``on_final`` submits, numbered ``B`` (a stateless operator's final rows cannot
depend on its channel's tuples). ``submit`` from any other thread, or outside
``process``/``on_final``, is refused naming the PE and operator: such a tuple has no
input tuple to take its number from. A partitioned copy forwards its key attributes
(it is trusted to keep them under their names).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from spadeopt.errors import UsageError
from spadeopt.kinds.kind import (
    Decl,
    Imports,
    Kind,
    derive_declared,
    parse_schema,
    stateful_problem,
    symbol_of,
)
from spadeopt.kinds.lowering import alias, call_args, key_source
from spadeopt.model.graph import PARTITIONED, STATEFUL, STATELESS, AppGraph, Operator, SymbolRef
from spadeopt.protocol import FINAL_BASE, SEQ


@dataclass(frozen=True)
class CustomParams:
    cls: SymbolRef
    args: tuple[tuple[str, Any], ...] = ()
    channel: int = -1  # a parallel region's channel copy: its channel (-1: not a copy)


def declare(name: str, cls: type, *, inputs: Mapping[str, Any], outputs: Mapping[str, Any],
            args: Mapping[str, Any] | None = None, state: str = STATEFUL, key: Iterable[str] = (),
            tuple_generating: Mapping[str, bool] | None = None) -> Decl:
    decl = Decl(name, "custom", {p: (list(s) if isinstance(s, list) else [s]) for p, s in inputs.items()}, {},
                out_ports=tuple(outputs), state=state, key=tuple(key),
                tuple_generating=dict(tuple_generating or {}))
    schemas = {p: parse_schema(s, decl, f"output '{p}'") for p, s in outputs.items()}
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
    decl.raw["outputs"] = decl.out_schemas
    return decl


def lower(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    p = op.params
    ctx: dict[str, Any] = {"cls": alias(p.cls, imports), "args": call_args(op, p.args), "seq": False}
    if any(i.schema is not None and SEQ in i.schema for i in op.inputs):
        # a channel copy: inputs and outputs carry the sequence number last
        label = f"{op.name.rsplit('__', 1)[0]}@{p.channel}"  # the logical operator and its channel
        ctx.update(seq=True, channel=p.channel, label=label, final_base=FINAL_BASE, partitioned=op.state == PARTITIONED,
                   in_keys={i.name: key_source(op.key, i.schema) for i in op.inputs},
                   row_keys={o.name: (key_source(op.key, o.schema, "tup")
                                      if all(k in o.schema for k in op.key) else None) for o in op.outputs},
                   key_names=list(op.key))
    return ctx


def region_problem(op: Operator) -> str | None:
    return stateful_problem(op, "a custom operator is stateful unless it declares state='stateless' or "
                                "'partitioned'")


def forwards(op: Operator, attr: str) -> bool:
    """A partitioned custom operator keeps its key attributes (declared, trusted)."""
    return (op.state == PARTITIONED and attr in op.key
            and all(o.schema is not None and attr in o.schema for o in op.outputs))


def final_rows(op: Operator) -> bool:
    """``on_final`` may submit (whether the class has one is known only where it runs)."""
    return True


def channel_params(op: Operator, channel: int, width: int, dynamic: bool) -> CustomParams:
    return dataclasses.replace(op.params, channel=channel) if dynamic else op.params


def checkpoint_problem(op: Operator) -> str | None:
    """A custom operator's state is the user's object: checkpointed only through its
    ``snapshot()`` and ``restore(state)`` methods (checked where the class is loaded)."""
    import sys

    cls: Any = sys.modules.get(op.params.cls.module)
    for part in op.params.cls.qualname.split("."):
        cls = getattr(cls, part, None)
    if cls is None:
        return None  # not loaded here: the PE refuses it when it registers the state
    missing = [m + "()" for m in ("snapshot", "restore") if not callable(getattr(cls, m, None))]
    if missing:
        return (f"custom operator '{op.name}' ({op.params.cls}) has no {' or '.join(missing)}: checkpoints "
                f"need snapshot() -> state (None, bool, int, float, str, bytes, list, tuple, dict) and "
                f"restore(state) on every custom operator")
    return None


def rescale(op: Operator) -> str:
    """A custom operator's state is what its ``snapshot()`` returns, one opaque value per
    channel copy: which part of it belongs to which key is not known, so it cannot move."""
    return ("a custom operator's snapshot() is one opaque value per channel copy (not kept per key), so its "
            "keys' state cannot move to the channels that own them at another width")


KIND = Kind("custom", declare, derive_declared, lower, "ops/custom.py.j2", declares_outputs=True,
            region_problem=region_problem, forwards=forwards, channel_params=channel_params,
            final_rows=final_rows, never_blocks=False, checkpoint_problem=checkpoint_problem,
            state_declared=True, rescale=rescale)
