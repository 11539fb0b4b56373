"""The operator kinds: one module per kind, collected in ``KINDS``, which every stage
dispatches on (the DSL and validation, ``plan.regions`` and ``plan.fission``,
``codegen``). ``docs/architecture.md`` shows how to add a kind.

``register`` adds a kind defined elsewhere (an extension, a test); a built-in kind's
name cannot be taken.
"""

from __future__ import annotations

from typing import Any

from spadeopt.errors import UsageError
from spadeopt.kinds import (
    aggregate,
    custom,
    exchange_merge,
    exchange_split,
    fission_merge,
    fission_split,
    functor,
    join,
    merge,
    sink,
    source,
    split,
    union,
)
from spadeopt.kinds.kind import Kind
from spadeopt.model.graph import Operator

BUILTIN: tuple[Kind, ...] = tuple(m.KIND for m in (
    source, functor, aggregate, join, split, union, merge, custom, sink, fission_split, fission_merge,
    exchange_split, exchange_merge))

KINDS: dict[str, Kind] = {k.name: k for k in BUILTIN}


def register(kind: Kind) -> Kind:
    """Add ``kind`` to ``KINDS`` (again: replaced); returns it. A built-in name is refused."""
    if any(k.name == kind.name for k in BUILTIN):
        msg = f"operator kind '{kind.name}' is built in; choose another name"
        raise UsageError(msg)
    KINDS[kind.name] = kind
    return kind


def kind_of(op: Operator) -> Kind:
    """The ``Kind`` of ``op``."""
    return KINDS[op.kind]


def selectivity(op: Operator) -> str:
    """``STATIC`` when ``op`` emits exactly one tuple per input tuple, else ``DYNAMIC``."""
    return KINDS[op.kind].selectivity(op)


def generator_of(op: Operator) -> Any:
    """What a source operator reads (its generator or connector factory, a ``SymbolRef``);
    None for any other operator."""
    return KINDS[op.kind].generator(op)


__all__ = ["BUILTIN", "KINDS", "Kind", "generator_of", "kind_of", "register", "selectivity"]
