"""A PE's control messages: its config, the agent's commands, its events, its live metrics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spadeopt.control.message import CHANNEL, LIVE, TOKEN, Z85_KEY, Record, register
from spadeopt.fieldcheck import BOOL, INT, NUM, STR, describe, list_of, map_of, optional, shape

# ---- a PE: its config, the agent's commands, its events -------------------------------

SCHEMA = optional(list_of(list_of(STR)))  # [[name, type], ...] of a port, or unknown
PROFILE = optional(map_of(STR, lambda v: None))  # plan.deployment.Sampling.to_json, read by the profiler


@register
@dataclass(frozen=True)
class PEConfig(Record):
    """A PE's config, made by its node agent, on the PE's command line (nothing secret:
    CURVE secret keys are made inside the PE)."""

    KIND = "pe-config"
    FIELDS = {"pe": STR, "module": STR, "app_ref": STR, "out_dir": optional(STR), "ipc_dir": optional(STR),
              "host": optional(STR), "batch_size": INT, "hwm": INT, "profile": PROFILE, "duration": optional(NUM),
              "progress_file": optional(STR), "insecure_links": BOOL, "max_frame": INT, "max_batch_delay": NUM,
              "source_limit": optional(INT), "stop_file": optional(STR), "out_links": list_of(STR),
              "schemas": map_of(STR, SCHEMA), "pythonpath": optional(STR), "cyclic_inputs": list_of(STR)}
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
    cyclic_inputs: list[str]  # input ports a cycle of PEs closes through (Deployment.cyclic_inputs)


_OUT_LINK = shape(link=STR, endpoint=STR, server_key=optional(Z85_KEY))
_UPSTREAM = shape(key=optional(Z85_KEY), **{"from": STR})


@register
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


@register
@dataclass(frozen=True)
class Start(Record):
    """Agent -> PE: start the sources (every PE of every node is connected)."""

    KIND = "start"
    FIELDS = {}


@register
@dataclass(frozen=True)
class Exit(Record):
    """Agent -> PE: every PE of every node is done; close the sockets and exit."""

    KIND = "exit"
    FIELDS = {}


PE_COMMANDS = (Connect, Start, Exit)


@register
@dataclass(frozen=True)
class Bound(Record):
    """PE -> agent: its input ports' endpoints and its public keys (server, per link)."""

    KIND = "bound"
    FIELDS = {"endpoints": map_of(STR, map_of(STR, STR)),
              "keys": map_of(STR, optional(lambda v: None if type(v) in (str, dict) else describe(v)))}
    endpoints: dict[str, dict[str, str]]
    keys: dict[str, Any]


@register
@dataclass(frozen=True)
class Ready(Record):
    """PE -> agent: connected (and restored, in a checkpointing run)."""

    KIND = "ready"
    FIELDS = {}


@register
@dataclass(frozen=True)
class Beat(Record):
    """PE -> agent, every second: a progress counter and the ports still waiting (with
    the upstream links whose final has not come)."""

    KIND = "beat"
    FIELDS = {"progress": INT, "waiting": map_of(STR, list_of(STR))}
    progress: int
    waiting: dict[str, list[str]]


@register
@dataclass(frozen=True)
class Done(Record):
    """PE -> agent: it ran to the end; its stats (``runtime.pe.PERuntime.run``)."""

    KIND = "done"
    FIELDS = {"stats": map_of(STR, lambda v: None)}
    stats: dict[str, Any]


@register
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


@register
@dataclass(frozen=True)
class Exited(Record):
    """The agent's own note (never on a wire) that a PE process ended with ``code``."""

    KIND = "exited"
    FIELDS = {"code": optional(INT)}
    code: int | None


PE_EVENTS = (Bound, Ready, Beat, Done, Failed)


@register
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
