"""A node agent and the driver: the job spec, the agent's failure and result, the
rendezvous rounds and the driver's answers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spadeopt.control.message import (
    CHANNEL,
    LIVE,
    MAX_DELAY_S,
    MAX_GEN,
    TOKEN,
    Z85_KEY,
    ControlError,
    Record,
    register,
)
from spadeopt.fieldcheck import (
    BOOL,
    INT,
    NUM,
    STR,
    describe,
    list_of,
    map_of,
    number_in,
    optional,
    shape,
)

# ---- the driver: a node agent's job, a run's settings ---------------------------------

@register
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




# ---- a node agent to the driver: its failure, its result -------------------------------

@register
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


@register
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




# ---- the rendezvous: a node agent's round, the driver's answers -----------------------

MAX_ROUND = 16  # rounds of one generation's meetings (three are used)


@register
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


@register
@dataclass(frozen=True)
class Gathered(Record):
    """Driver -> every agent: a round's answer, every node's message in node order."""

    KIND = "gathered"
    FIELDS = {"msgs": list_of(STR)}
    msgs: list[str]



@register
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


@register
@dataclass(frozen=True)
class Refusal(Record):
    """Driver -> every agent: generation ``gen``'s failure is not restarted in place."""

    KIND = "fail"
    FIELDS = {"gen": INT}
    gen: int


@register
@dataclass(frozen=True)
class StopRequest(Record):
    """Driver -> every agent: end the live sources (Ctrl-C or SIGTERM on the driver)."""

    KIND = "stop"
    FIELDS = {}


TO_AGENT = (Gathered, RestartInPlace, Refusal, StopRequest)
