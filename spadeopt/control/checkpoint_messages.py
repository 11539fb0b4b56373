"""Checkpoint messages between a PE and the driver's coordinator."""

from __future__ import annotations

from dataclasses import dataclass

from spadeopt.control.message import Record, register
from spadeopt.fieldcheck import BOOL, BYTES, INT, STR, map_of, optional

# ---- checkpoints: a PE and the driver's coordinator -----------------------------------

@register
@dataclass(frozen=True)
class Hello(Record):
    """PE -> coordinator: it is up (``sources``: it has sources, so it takes triggers)."""

    KIND = "hello"
    FIELDS = {"pe": STR, "token": STR, "sources": BOOL}
    pe: str
    token: str
    sources: bool


@register
@dataclass(frozen=True)
class Part(Record):
    """PE -> coordinator: its part of checkpoint ``id``: its state, each file sink's
    lines since the previous barrier, the state's SHA-256."""

    KIND = "part"
    FIELDS = {"pe": STR, "token": STR, "id": INT, "state": BYTES, "sinks": map_of(STR, BYTES), "sha256": STR}
    pe: str
    token: str
    id: int
    state: bytes
    sinks: dict[str, bytes]
    sha256: str


@register
@dataclass(frozen=True)
class FirstOutput(Record):
    """PE -> coordinator: its sinks took their first tuple since it started (a restart's
    time to the first new output)."""

    KIND = "output"
    FIELDS = {"pe": STR, "token": STR}
    pe: str
    token: str


FROM_PE = (Hello, Part, FirstOutput)


@register
@dataclass(frozen=True)
class Restore(Record):
    """Coordinator -> PE, the answer to ``Hello``: its part of the checkpoint it restores
    from (None: none), the checkpoint directory's lineage and this run's id."""

    KIND = "restore"
    FIELDS = {"part": optional(BYTES), "lineage": STR, "run": STR}
    part: bytes | None
    lineage: str
    run: str


@register
@dataclass(frozen=True)
class Trigger(Record):
    """Coordinator -> a PE with sources: take checkpoint ``id``."""

    KIND = "trigger"
    FIELDS = {"id": INT}
    id: int


@register
@dataclass(frozen=True)
class Ack(Record):
    """Coordinator -> PE: its part of checkpoint ``id`` is stored."""

    KIND = "ack"
    FIELDS = {"id": INT}
    id: int


@register
@dataclass(frozen=True)
class Complete(Record):
    """Coordinator -> every PE: checkpoint ``id`` is complete (transactional sinks commit)."""

    KIND = "complete"
    FIELDS = {"id": INT}
    id: int


TO_PE = (Restore, Trigger, Ack, Complete)
