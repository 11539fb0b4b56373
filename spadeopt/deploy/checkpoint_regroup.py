"""Resume a checkpoint under another plan of the same operators: its state regrouped by operator.

A checkpoint's parts are per PE, but what a part holds is per operator: each stateful
operator's state, each source's position, each sink's count and a transactional sink's
open epochs, all keyed by the operator's (physical) name
(``runtime.barrier_alignment.Checkpointer.take``). An aligned checkpoint has nothing in
flight between PEs: every tuple before the barrier is in some operator's state or a
sink, every tuple after it is replayed from the sources. So a plan that fuses and
places the *same* operators differently (another ``--fusion``, FATM's plan, another
number of nodes; the same parallel widths, which name the channel copies) can start
from it: ``regroup`` decodes every part (``checkpoint_codec.decode_state``: msgpack,
known types only, after the store checked each part's SHA-256), moves each operator's
entries to the PE of the new plan that holds the operator, and encodes one part per
new PE. This is the first half of re-planning a running job (issue 39): stop at a
checkpoint, resume under a new plan.

Refused, naming what differs, when the new plan's operators are not exactly the
checkpoint's (the app's graph or a region's width changed: a key's state would have to
move between channels), or when the checkpoint predates the manifest's operator list.
"""

from __future__ import annotations

from typing import Any

from spadeopt.deploy.checkpoint_rescale import Rescale, rescale_entries
from spadeopt.plan.deployment import Deployment
from spadeopt.runtime.checkpoint_codec import CheckpointError, decode_state, encode_state

PART_FIELDS = ("ops", "sources", "sinks", "commits")  # what a part keys by operator name


def plan_operators(deploy: Deployment) -> list[str]:
    """Every operator of the plan (channel copies by their own names), sorted."""
    return sorted(op for p in deploy.pes for op in p.operators)


def regroup_problem(manifest: dict[str, Any], deploy: Deployment) -> str | None:
    """Why a checkpoint of another plan cannot start ``deploy`` (None: it can)."""
    had = manifest.get("operators")
    if not isinstance(had, list):
        return "the checkpoint does not list its plan's operators (written before regrouping was possible)"
    now = plan_operators(deploy)
    if sorted(had) != now:
        gone, new = sorted(set(had) - set(now)), sorted(set(now) - set(had))
        return (f"its plan's operators differ (only there: {', '.join(gone[:6]) or '-'}; only here: "
                f"{', '.join(new[:6]) or '-'}): a parallel region's width or the app's graph changed")
    return None


def _entries(parts: dict[str, bytes], checkpoint: int) -> dict[str, dict[str, Any]]:
    """Every part's entries together: field -> operator -> value."""
    flat: dict[str, dict[str, Any]] = {field: {} for field in PART_FIELDS}
    for old_pe, data in sorted(parts.items()):
        doc = decode_state(data)
        if type(doc) is not dict or doc.get("id") != checkpoint or type(doc.get("ops")) is not dict:
            raise CheckpointError(f"checkpoint {checkpoint}: the part of PE {old_pe} is not a snapshot part")
        for field in PART_FIELDS:
            entries = doc.get(field, {})
            if type(entries) is not dict:
                raise CheckpointError(f"checkpoint {checkpoint}, PE {old_pe}: '{field}' is not a map")
            for name, value in entries.items():
                if name in flat[field]:
                    raise CheckpointError(f"checkpoint {checkpoint}: operator '{name}' is in two parts")
                flat[field][name] = value
    return flat


def regroup(parts: dict[str, bytes], deploy: Deployment, checkpoint: int,
            rescale: Rescale | None = None) -> dict[str, bytes]:
    """One part per PE of ``deploy`` from the parts of another plan of the same operators
    (or, with ``rescale``, of the same operators at other region widths: its channel
    copies' state moved first, ``checkpoint_rescale``)."""
    flat = _entries(parts, checkpoint)
    if rescale is not None:
        rescale_entries(flat, rescale)
    where = {op: p.pe for p in deploy.pes for op in p.operators}
    new: dict[str, dict[str, Any]] = {p.pe: {"pe": p.pe, "id": checkpoint, "ops": {}, "sources": {}, "sinks": {}}
                                      for p in deploy.pes}
    for field, entries in flat.items():
        for name, value in entries.items():
            pe = where.get(name)
            if pe is None:
                raise CheckpointError(f"checkpoint {checkpoint}: '{field}' names '{name}', "
                                      f"an operator this plan does not have")
            new[pe].setdefault(field, {})[name] = value
    return {pe: encode_state(doc) for pe, doc in new.items()}
