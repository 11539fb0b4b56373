"""The control protocol's ground: the ``Record`` every message is, its registry, and
reading a message with every field checked (``check``, ``decode``, ``decode_line``).
The messages themselves are in the sibling modules; ``spadeopt.control`` is the one
name callers import."""


from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import Any, ClassVar

import msgpack

from spadeopt.fieldcheck import (
    Check,
    describe,
    matches,
    number_in,
    shape,
)

VERSION = 1
"""The control protocol's version: a message of another version is refused."""


class ControlError(ValueError):
    """A control message refused: not a map, another version, an unknown type, or a
    field missing, unknown or of the wrong type (the message names it)."""


Z85_KEY = matches(r"[0-9a-zA-Z.\-:+=^!/*?&<>()\[\]{}@%$#]{40}", "a CURVE key (40 Z85 characters)")
TOKEN = matches(r"[0-9a-f]{32}", "a run token (32 hex digits)")
CHANNEL_ENDPOINT = matches(r"tcp://[A-Za-z0-9._\-]{1,253}:\d{1,5}", "a tcp:// endpoint")
CHANNEL = shape(endpoint=CHANNEL_ENDPOINT,
                server_key=Z85_KEY, token=TOKEN, interval=number_in(0, 86400, lo_open=True))
"""A checkpoint coordinator's channel (``plan.deployment.CheckpointChannel.to_json``)."""
LIVE = shape(endpoint=CHANNEL_ENDPOINT, server_key=Z85_KEY, token=TOKEN)
"""The driver's live-metrics channel (``deploy.live_metrics.Collector.channel``)."""
MAX_GEN = 1 << 16  # generations (in-place restarts) of one run
MAX_DELAY_S = 60.0  # the longest backoff a restart may ask for


@dataclass(frozen=True)
class Record:
    """A control message. ``KIND`` is its ``t``; ``FIELDS`` checks each field as it
    comes off the wire (every dataclass field, in order); ``OPTIONAL`` may be absent
    (their default applies)."""

    KIND: ClassVar[str] = ""
    FIELDS: ClassVar[dict[str, Check]] = {}
    OPTIONAL: ClassVar[frozenset[str]] = frozenset()

    def to_doc(self) -> dict[str, Any]:
        """The record as a map: its fields, then ``v`` and ``t`` (last, so a PE's command
        line still begins ``{"pe": ...``, as ``ps`` and the tests read it)."""
        return {**{f.name: getattr(self, f.name) for f in fields(self)}, "v": VERSION, "t": self.KIND}

    def to_bytes(self) -> bytes:
        return msgpack.packb(self.to_doc())

    def to_line(self) -> str:
        return json.dumps(self.to_doc())

    @classmethod
    def from_doc(cls, doc: Any) -> Record:
        return check(doc, cls)

    @classmethod
    def from_bytes(cls, data: bytes) -> Record:
        return decode(data, cls)

    @classmethod
    def from_line(cls, line: str) -> Record:
        return decode_line(line, cls)


KINDS: dict[str, type[Record]] = {}


def register(cls: type[Record]) -> type[Record]:
    """Register a record class under its ``KIND``; its ``FIELDS`` must name its fields
    (never ``t`` or ``v``, the message's type and version)."""
    assert cls.KIND and cls.KIND not in KINDS and list(cls.FIELDS) == [f.name for f in fields(cls)], cls
    assert not {"t", "v"} & set(cls.FIELDS), f"{cls.__name__}: a field may not be named 't' or 'v'"
    KINDS[cls.KIND] = cls
    return cls


def check(doc: Any, *allowed: type[Record]) -> Record:
    """The record ``doc`` (a decoded map) holds, one of ``allowed``; ``ControlError``
    naming the field that does not fit."""
    if type(doc) is not dict:
        raise ControlError(f"a control message is a map, got {describe(doc)}")
    if doc.get("v") != VERSION:
        raise ControlError(f"field 'v': protocol version {doc.get('v')!r:.20}, this end speaks {VERSION}")
    kind = doc.get("t")
    cls = KINDS.get(kind) if type(kind) is str else None
    if cls is None or cls not in allowed:
        raise ControlError(f"field 't': unexpected message type {kind!r:.40} (expected "
                           f"{', '.join(c.KIND for c in allowed)})")
    extra = sorted(map(str, set(doc) - {"v", "t"} - set(cls.FIELDS)))
    if extra:
        raise ControlError(f"'{kind}' message: unknown field {extra[0]!r:.40}")
    for name, fits in cls.FIELDS.items():
        if name not in doc:
            if name in cls.OPTIONAL:
                continue
            raise ControlError(f"'{kind}' message: field '{name}' missing")
        if (why := fits(doc[name])) is not None:
            raise ControlError(f"'{kind}' message: field '{name}' is {why}")
    return cls(**{k: doc[k] for k in cls.FIELDS if k in doc})


def decode(data: bytes, *allowed: type[Record]) -> Record:
    """The record in msgpack ``data`` (``Record.to_bytes``), one of ``allowed``."""
    try:
        doc = msgpack.unpackb(data, raw=False)
    except Exception as exc:  # noqa: BLE001 - msgpack raises several kinds for garbage
        raise ControlError(f"not a control message ({type(exc).__name__})") from None
    return check(doc, *allowed)


def decode_line(line: str, *allowed: type[Record]) -> Record:
    """The record in one JSON line (``Record.to_line``), one of ``allowed``."""
    try:
        doc = json.loads(line)
    except ValueError as exc:
        raise ControlError(f"not a control message (not JSON: {exc})") from None
    return check(doc, *allowed)
