"""Lowering: an operator's params -> the code fragments its kind's template spells.

Each kind lowers itself (``Kind.lower`` in ``spadeopt.kinds``; shared helpers in
``spadeopt.kinds.lowering``); this is the one place codegen dispatches on it.
"""

from __future__ import annotations

from typing import Any

from spadeopt.kinds import kind_of
from spadeopt.kinds.kind import Imports
from spadeopt.model.graph import AppGraph, Operator


def lower_op(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    """The template context of ``op``; user objects it needs are added to ``imports``."""
    return kind_of(op).lower(graph, op, imports)
