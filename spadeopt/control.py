"""The control protocol: every message of the control plane, as a frozen, versioned record.

``wire`` is the data plane (batches, finals, barriers, markers between PEs); this module
is the control plane, one home for what the driver, the node agents, the PEs and the
checkpoint coordinator say to each other:

* the driver's job spec for a node agent (``JobSpec``; what a caller of
  ``deploy.launcher.run_build`` changes of a run's settings is ``deploy.options.SettingsChange``,
  never on a wire);
* a PE's config (``PEConfig``, on its command line), the agent's commands to a PE
  (``Connect``, ``Start``, ``Exit``) and the PE's events (``Bound``, ``Ready``, ``Beat``,
  ``Done``, ``Failed``; ``Exited`` is the agent's own note that the process ended) and
  its live metrics to the driver (``PEMetrics``);
* the checkpoint messages between a PE and the coordinator (``Hello``, ``Restore``,
  ``Trigger``, ``Part``, ``Ack``, ``Complete``, ``FirstOutput``);
* a node agent's failure and result to the driver (``NodeFailure``, ``NodeReport``)
  and the driver's answers to a node agent on the rendezvous (``RestartInPlace``,
  ``Refusal``, ``StopRequest``).

Every record has ``to_bytes`` / ``from_bytes`` (msgpack, for ZeroMQ) and ``to_line`` /
``from_line`` (one JSON line, for the agent's pipes and a PE's command line): a map with
the protocol version ``v``, the message type ``t`` and the record's fields. Reading
checks everything before anything is built: a message that is not a map, of another
version, of an unknown or unexpected type, with a field missing, unknown or of the wrong
type is refused with ``ControlError`` naming the field. Nothing received is executed;
the links that carry these messages are authenticated (CURVE, the run's token) as
before. This module imports only msgpack and the standard library: PEs, agents and the
driver all import it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import Any, ClassVar

import msgpack

from spadeopt.fieldcheck import (
    BOOL,
    BYTES,
    INT,
    NUM,
    STR,
    Check,
    describe,
    list_of,
    map_of,
    matches,
    number_in,
    optional,
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


def _record(cls: type[Record]) -> type[Record]:
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


# ---- the driver: a node agent's job, a run's settings ---------------------------------

@_record
@dataclass(frozen=True)
class JobSpec(Record):
    """What the launcher tells each node agent (in the Spark task's closure): the shipped
    bundle, the app, where outputs go, the rendezvous (None: a node that meets nobody)."""

    KIND = "job"
    FIELDS = {"bundle": STR, "app_ref": STR, "return_outputs": BOOL, "out_dir": optional(STR), "log_dir": STR,
              "progress_dir": optional(STR),
              "rendezvous": optional(shape(endpoint=STR, server_key=Z85_KEY, token=TOKEN)), "in_place": BOOL,
              "metrics": optional(LIVE)}
    OPTIONAL = frozenset({"metrics"})
    bundle: str
    app_ref: str
    return_outputs: bool
    out_dir: str | None
    log_dir: str
    progress_dir: str | None
    rendezvous: dict[str, str] | None
    in_place: bool
    metrics: dict[str, str] | None = None  # the driver's live-metrics channel (deploy.live_metrics)


# ---- a PE: its config, the agent's commands, its events -------------------------------

SCHEMA = optional(list_of(list_of(STR)))  # [[name, type], ...] of a port, or unknown
PROFILE = optional(map_of(STR, lambda v: None))  # plan.deployment.Sampling.to_json, read by the profiler


@_record
@dataclass(frozen=True)
class PEConfig(Record):
    """A PE's config, made by its node agent, on the PE's command line (nothing secret:
    CURVE secret keys are made inside the PE)."""

    KIND = "pe-config"
    FIELDS = {"pe": STR, "module": STR, "app_ref": STR, "out_dir": optional(STR), "ipc_dir": optional(STR),
              "host": optional(STR), "batch_size": INT, "hwm": INT, "profile": PROFILE, "duration": optional(NUM),
              "progress_file": optional(STR), "insecure_links": BOOL, "max_frame": INT, "max_batch_delay": NUM,
              "source_limit": optional(INT), "stop_file": optional(STR), "out_links": list_of(STR),
              "schemas": map_of(STR, SCHEMA), "pythonpath": optional(STR)}
    pe: str
    module: str
    app_ref: str
    out_dir: str | None
    ipc_dir: str | None
    host: str | None
    batch_size: int
    hwm: int
    profile: dict[str, Any] | None
    duration: float | None
    progress_file: str | None
    insecure_links: bool
    max_frame: int
    max_batch_delay: float
    source_limit: int | None
    stop_file: str | None
    out_links: list[str]
    schemas: dict[str, list | None]
    pythonpath: str | None


_OUT_LINK = shape(link=STR, endpoint=STR, server_key=optional(Z85_KEY))
_UPSTREAM = shape(key=optional(Z85_KEY), **{"from": STR})


@_record
@dataclass(frozen=True)
class Connect(Record):
    """Agent -> PE: where each output port's links go (with the server key each must
    show), which link keys each input port admits, and the checkpoint coordinator's
    channel (None: no checkpoints)."""

    KIND = "connect"
    FIELDS = {"links": map_of(STR, list_of(_OUT_LINK)), "upstream": map_of(STR, map_of(STR, _UPSTREAM)),
              "checkpoint": optional(CHANNEL), "metrics": optional(LIVE)}
    OPTIONAL = frozenset({"metrics"})
    links: dict[str, list[dict[str, Any]]]
    upstream: dict[str, dict[str, dict[str, Any]]]
    checkpoint: dict[str, Any] | None = None
    metrics: dict[str, Any] | None = None  # the driver's live-metrics channel, or None


@_record
@dataclass(frozen=True)
class Start(Record):
    """Agent -> PE: start the sources (every PE of every node is connected)."""

    KIND = "start"
    FIELDS = {}


@_record
@dataclass(frozen=True)
class Exit(Record):
    """Agent -> PE: every PE of every node is done; close the sockets and exit."""

    KIND = "exit"
    FIELDS = {}


PE_COMMANDS = (Connect, Start, Exit)


@_record
@dataclass(frozen=True)
class Bound(Record):
    """PE -> agent: its input ports' endpoints and its public keys (server, per link)."""

    KIND = "bound"
    FIELDS = {"endpoints": map_of(STR, map_of(STR, STR)),
              "keys": map_of(STR, optional(lambda v: None if type(v) in (str, dict) else describe(v)))}
    endpoints: dict[str, dict[str, str]]
    keys: dict[str, Any]


@_record
@dataclass(frozen=True)
class Ready(Record):
    """PE -> agent: connected (and restored, in a checkpointing run)."""

    KIND = "ready"
    FIELDS = {}


@_record
@dataclass(frozen=True)
class Beat(Record):
    """PE -> agent, every second: a progress counter and the ports still waiting (with
    the upstream links whose final has not come)."""

    KIND = "beat"
    FIELDS = {"progress": INT, "waiting": map_of(STR, list_of(STR))}
    progress: int
    waiting: dict[str, list[str]]


@_record
@dataclass(frozen=True)
class Done(Record):
    """PE -> agent: it ran to the end; its stats (``runtime.pe.PERuntime.run``)."""

    KIND = "done"
    FIELDS = {"stats": map_of(STR, lambda v: None)}
    stats: dict[str, Any]


@_record
@dataclass(frozen=True)
class Failed(Record):
    """PE -> agent: it failed: where (operator, input port, thread), why, the user's
    traceback; ``kind`` "link" for a refused frame."""

    KIND = "error"
    FIELDS = {"op": optional(STR), "port": optional(STR), "thread": optional(STR), "message": STR,
              "traceback": optional(STR), "kind": optional(STR)}
    OPTIONAL = frozenset({"kind"})
    op: str | None
    port: str | None
    thread: str | None
    message: str
    traceback: str | None
    kind: str | None = None


@_record
@dataclass(frozen=True)
class Exited(Record):
    """The agent's own note (never on a wire) that a PE process ended with ``code``."""

    KIND = "exited"
    FIELDS = {"code": optional(INT)}
    code: int | None


PE_EVENTS = (Bound, Ready, Beat, Done, Failed)


@_record
@dataclass(frozen=True)
class PEMetrics(Record):
    """PE -> the driver's live metrics (``deploy.live_metrics``), every second and once at
    its end (``final``): counts since the PE process started (``runtime.pe_live``).
    ``ports_out``: sender port -> [tuples, bytes, batches, seconds blocked on a full link];
    ``ports_in``: input port -> tuples; ``operators``: operator -> out port -> tuples;
    ``latency``: samples per ``runtime.latency.BUCKETS_MS`` bucket, then their sum (ms)."""

    KIND = "pe-metrics"
    FIELDS = {"pe": STR, "token": TOKEN, "host": STR, "pid": INT, "seq": INT, "at": NUM, "final": BOOL, "cpu_s": NUM,
              "wall_s": NUM, "idle_s": NUM, "ports_out": map_of(STR, list_of(NUM)), "ports_in": map_of(STR, INT),
              "operators": map_of(STR, map_of(STR, INT)), "sources": map_of(STR, INT), "sinks": map_of(STR, INT),
              "lags": map_of(STR, optional(INT)), "counters": map_of(STR, map_of(STR, INT)),
              "latency": list_of(NUM)}
    pe: str
    token: str
    host: str
    pid: int
    seq: int
    at: float  # the PE's wall clock when it was made
    final: bool
    cpu_s: float
    wall_s: float
    idle_s: float
    ports_out: dict[str, list[float]]
    ports_in: dict[str, int]
    operators: dict[str, dict[str, int]]
    sources: dict[str, int]
    sinks: dict[str, int]
    lags: dict[str, int | None]
    counters: dict[str, dict[str, int]]
    latency: list[float]


# ---- a node agent to the driver: its failure, its result -------------------------------

@_record
@dataclass(frozen=True)
class NodeFailure(Record):
    """Agent -> driver: this node failed (in the Spark task's error, and on the rendezvous
    when the run may restart in place): the PE, operator, input port and thread, what
    happened (``kind``: "link", "stall", "restart" or None for an operator's exception),
    the user's traceback, the PE log's tail."""

    KIND = "node-failure"
    FIELDS = {"pe": optional(STR), "node": INT, "op": optional(STR), "port": optional(STR),
              "kind": optional(STR), "thread": optional(STR), "message": STR, "traceback": optional(STR),
              "log": optional(STR)}
    OPTIONAL = frozenset({"kind", "thread", "traceback", "log"})
    pe: str | None
    node: int
    op: str | None
    port: str | None
    kind: str | None = None
    thread: str | None = None
    message: str = ""
    traceback: str | None = None
    log: str | None = None


@_record
@dataclass(frozen=True)
class NodeReport(Record):
    """Agent -> driver (the Spark task's result): where the node ran, when its sources
    started, each PE's stats, its in-place restarts; on a cluster also the executor and
    the sink parts and sample files it brings back (``files``)."""

    KIND = "node-report"
    FIELDS = {"node": INT, "host": STR, "executor_pid": INT, "started": NUM,
              "pes": list_of(map_of(STR, lambda v: None)), "restarts_in_place": list_of(map_of(STR, lambda v: None)),
              "executor": optional(STR), "files": optional(map_of(STR, lambda v: None))}
    OPTIONAL = frozenset({"executor", "files"})
    node: int
    host: str
    executor_pid: int
    started: float
    pes: list[dict[str, Any]]
    restarts_in_place: list[dict[str, Any]]
    executor: str | None = None
    files: dict[str, Any] | None = None


# ---- checkpoints: a PE and the driver's coordinator -----------------------------------

@_record
@dataclass(frozen=True)
class Hello(Record):
    """PE -> coordinator: it is up (``sources``: it has sources, so it takes triggers)."""

    KIND = "hello"
    FIELDS = {"pe": STR, "token": STR, "sources": BOOL}
    pe: str
    token: str
    sources: bool


@_record
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


@_record
@dataclass(frozen=True)
class FirstOutput(Record):
    """PE -> coordinator: its sinks took their first tuple since it started (a restart's
    time to the first new output)."""

    KIND = "output"
    FIELDS = {"pe": STR, "token": STR}
    pe: str
    token: str


FROM_PE = (Hello, Part, FirstOutput)


@_record
@dataclass(frozen=True)
class Restore(Record):
    """Coordinator -> PE, the answer to ``Hello``: its part of the checkpoint it restores
    from (None: none), the checkpoint directory's lineage and this run's id."""

    KIND = "restore"
    FIELDS = {"part": optional(BYTES), "lineage": STR, "run": STR}
    part: bytes | None
    lineage: str
    run: str


@_record
@dataclass(frozen=True)
class Trigger(Record):
    """Coordinator -> a PE with sources: take checkpoint ``id``."""

    KIND = "trigger"
    FIELDS = {"id": INT}
    id: int


@_record
@dataclass(frozen=True)
class Ack(Record):
    """Coordinator -> PE: its part of checkpoint ``id`` is stored."""

    KIND = "ack"
    FIELDS = {"id": INT}
    id: int


@_record
@dataclass(frozen=True)
class Complete(Record):
    """Coordinator -> every PE: checkpoint ``id`` is complete (transactional sinks commit)."""

    KIND = "complete"
    FIELDS = {"id": INT}
    id: int


TO_PE = (Restore, Trigger, Ack, Complete)


# ---- the rendezvous: a node agent's round, the driver's answers -----------------------

MAX_ROUND = 16  # rounds of one generation's meetings (three are used)


@_record
@dataclass(frozen=True)
class Meet(Record):
    """Agent -> driver: node ``node``'s message of round ``round`` of generation ``gen``
    (its endpoint table, an empty one for a barrier, a failure report), with the run's
    token. The driver also checks ``node`` against the run's nodes and the token in
    constant time (``deploy.rendezvous``)."""

    KIND = "meet"
    FIELDS = {"token": TOKEN, "gen": number_in(0, MAX_GEN - 1), "round": number_in(0, MAX_ROUND - 1),
              "node": number_in(0, 1 << 16), "msg": STR}
    token: str
    gen: int
    round: int
    node: int
    msg: str

    def __post_init__(self) -> None:
        for name in ("gen", "round", "node"):
            if type(getattr(self, name)) is not int:
                raise ControlError(f"'meet' message: field '{name}' is {describe(getattr(self, name))}, "
                                   f"expected int")


@_record
@dataclass(frozen=True)
class Gathered(Record):
    """Driver -> every agent: a round's answer, every node's message in node order."""

    KIND = "gathered"
    FIELDS = {"msgs": list_of(STR)}
    msgs: list[str]



@_record
@dataclass(frozen=True)
class RestartInPlace(Record):
    """Driver -> every agent: restart the PEs as generation ``gen`` from the new
    coordinator's ``checkpoint`` channel, after ``delay`` seconds of backoff."""

    KIND = "restart"
    FIELDS = {"gen": number_in(1, MAX_GEN - 1), "checkpoint": CHANNEL, "delay": number_in(0, MAX_DELAY_S)}
    gen: int
    checkpoint: dict[str, Any]
    delay: float

    def __post_init__(self) -> None:
        if type(self.gen) is not int:
            raise ControlError(f"'restart' message: field 'gen' is {describe(self.gen)}, expected int")


@_record
@dataclass(frozen=True)
class Refusal(Record):
    """Driver -> every agent: generation ``gen``'s failure is not restarted in place."""

    KIND = "fail"
    FIELDS = {"gen": INT}
    gen: int


@_record
@dataclass(frozen=True)
class StopRequest(Record):
    """Driver -> every agent: end the live sources (Ctrl-C or SIGTERM on the driver)."""

    KIND = "stop"
    FIELDS = {}


TO_AGENT = (Gathered, RestartInPlace, Refusal, StopRequest)

