"""The deployment descriptor (``deploy.json``) as a typed, frozen record.

A build is a directory: one ``<pe>.py`` per PE, ``plan.json`` and ``deploy.json``.
``deploy.json`` says where every PE runs and how the PEs are wired; it is written by
``codegen.render`` and read back by the launcher, the node agents, the plan picture and
``refine``. This module is its one home: the fields, their defaults, the schema version
and the per-run settings a run may change (``RunSettings``). Files read from disk are
checked first (``plan.artefacts.check_deploy``); ``from_json`` only converts.

>>> d = Deployment.from_json({"schema_version": 1, "app": "a", "app_ref": "apps/a.py", "params": {},
...     "fingerprint": "ab", "strategy": "fused-all", "nodes": 1, "cores": 2,
...     "pes": [{"pe": "pe1", "module": "pe1.py", "node": 0, "operators": ["src", "sink"],
...              "inputs": {}, "outputs": {}}], "links": [], "streams": [["src.out", "sink.in"]],
...     "spark": {"master": "local[2]", "conf": {}, "submit": "spark-submit ..."}, "hwm": 8})
>>> d.pes[0].operators, d.settings.hwm, d.settings.batch_size
(('src', 'sink'), 8, 512)
>>> d.to_json()["hwm"], "batch_size" in d.to_json()
(8, False)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spadeopt.wire import DEFAULT_BATCH, DEFAULT_BATCH_DELAY, DEFAULT_HWM, DEFAULT_MAX_FRAME

SCHEMA_VERSION = 1
RESCALE_FILE = "rescale.json"
"""A checkpointing build's facts for resuming under other region widths (``codegen.rescale_facts``)."""


@dataclass(frozen=True)
class Sampling:
    """Where and how a profiling run samples (``spadeopt profile``); never read from a file."""

    sample_rate: float
    reservoir_size: int
    seed: int
    run_dir: str

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class CheckpointChannel:
    """Where a checkpointing run's PEs reach the driver's coordinator
    (``deploy.checkpointed_run``): its endpoint and CURVE server key, the run's token (sent
    to the PEs on stdin, never on a command line) and the checkpoint interval."""

    endpoint: str
    server_key: str
    token: str
    interval: float

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class RunSettings:
    """What one run of a build may change without rebuilding it; the defaults live here.

    ``batch_size`` tuples per frame between PEs, ``hwm`` frames queued per link,
    ``max_frame`` the largest frame an input port accepts (bytes), ``max_batch_delay``
    seconds a live source's partial batch may wait for more records before it is sent
    (0: sent at once), ``duration`` seconds until the sources stop (None: until they end),
    ``stall_timeout`` seconds without progress before a node fails (None: the agent's
    default), ``insecure_links`` plain TCP/IPC links (measurements only), ``profile``
    sampling settings of an instrumented build."""

    batch_size: int = DEFAULT_BATCH
    hwm: int = DEFAULT_HWM
    max_frame: int = DEFAULT_MAX_FRAME
    max_batch_delay: float = DEFAULT_BATCH_DELAY
    duration: float | None = None
    stall_timeout: float | None = None
    insecure_links: bool = False
    profile: Sampling | None = None
    checkpoint: CheckpointChannel | None = None  # set per run (deploy.checkpointed_run), never in a file
    source_limit: int | None = None  # records each source passes on, then ends (--verify-fission); never in a file

    def changed(self, **changes: Any) -> RunSettings:
        """These settings with ``changes`` applied; a change of None keeps the setting."""
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})


_DEFAULTS = RunSettings()


@dataclass(frozen=True)
class DeployedPE:
    pe: str
    module: str  # the PE's generated module, next to deploy.json
    node: int
    operators: tuple[str, ...]
    inputs: Mapping[str, int]  # exposed input port -> upstream links
    outputs: Mapping[str, tuple[str, ...]]  # exposed output port -> link ids

    def to_json(self) -> dict[str, Any]:
        return {"pe": self.pe, "module": self.module, "node": self.node, "operators": list(self.operators),
                "inputs": dict(self.inputs), "outputs": {k: list(v) for k, v in self.outputs.items()}}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> DeployedPE:
        return cls(doc["pe"], doc["module"], doc["node"], tuple(doc["operators"]), dict(doc.get("inputs", {})),
                   {k: tuple(v) for k, v in doc.get("outputs", {}).items()})


@dataclass(frozen=True)
class DeployedLink:
    id: str
    src_pe: str
    src: str  # op.port
    dst_pe: str
    dst: str  # op.port
    transport: str  # "ipc" (same node) or "tcp"
    schema: tuple[tuple[str, str], ...] | None = None  # what the receiving port checks

    def to_json(self) -> dict[str, Any]:
        doc = {"id": self.id, "src_pe": self.src_pe, "src": self.src, "dst_pe": self.dst_pe, "dst": self.dst,
               "transport": self.transport}
        if self.schema is not None:
            doc["schema"] = [list(a) for a in self.schema]
        return doc

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> DeployedLink:
        schema = doc.get("schema")
        return cls(doc["id"], doc["src_pe"], doc["src"], doc["dst_pe"], doc["dst"], doc["transport"],
                   None if schema is None else tuple((a, t) for a, t in schema))


@dataclass(frozen=True)
class SparkSettings:
    master: str  # the master the plan's nodes x cores fit (local mode)
    conf: Mapping[str, str]
    submit: str  # a spark-submit line that runs the build

    def to_json(self) -> dict[str, Any]:
        return {"master": self.master, "conf": dict(self.conf), "submit": self.submit}


@dataclass(frozen=True)
class Deployment:
    """A build's deployment: its PEs on nodes, the links between them, Spark settings."""

    app: str
    app_ref: str  # where the app's module is (a path or a module name)
    fingerprint: str  # the logical graph's, as in plan.json
    strategy: str
    nodes: int
    cores: int
    pes: tuple[DeployedPE, ...]
    links: tuple[DeployedLink, ...]
    spark: SparkSettings
    params: Mapping[str, Any] = field(default_factory=dict)
    instrumented: bool = False
    collapse: bool = True
    checkpoints: bool = False  # the generated code registers operator state (plan.json's too)
    streams: tuple[tuple[str, str], ...] = ()  # every stream of the physical graph, in-PE ones too
    settings: RunSettings = _DEFAULTS
    schema_version: int = SCHEMA_VERSION

    def pes_on(self, node: int) -> tuple[DeployedPE, ...]:
        return tuple(p for p in self.pes if p.node == node)

    def node_of(self) -> dict[str, int]:
        return {p.pe: p.node for p in self.pes}

    def pe_successors(self) -> dict[str, set[str]]:
        """PE -> the other PEs its links go to (the graph of PEs)."""
        succ: dict[str, set[str]] = {}
        for ln in self.links:
            if ln.src_pe != ln.dst_pe:
                succ.setdefault(ln.src_pe, set()).add(ln.dst_pe)
        return succ

    def cyclic_inputs(self, pe: str) -> list[str]:
        """``pe``'s input ports (``op.port``) fed by a PE that ``pe`` reaches along links: a
        cycle of PEs closes through them. While ``pe``'s main thread waits on a full link
        it keeps taking their frames (``runtime.pe_inputs.InputLoop.wait_to_send``)."""
        succ = self.pe_successors()
        seen: set[str] = set()
        todo = list(succ.get(pe, ()))
        while todo:
            x = todo.pop()
            if x not in seen:
                seen.add(x)
                todo.extend(succ.get(x, ()))
        return sorted({ln.dst for ln in self.links if ln.dst_pe == pe and ln.src_pe in seen and ln.src_pe != pe})

    def with_settings(self, **changes: Any) -> Deployment:
        """This deployment with some run settings changed (None keeps one)."""
        return dataclasses.replace(self, settings=self.settings.changed(**changes))

    def to_json(self) -> dict[str, Any]:
        """The ``deploy.json`` document (:data:`DEPLOY_FIELDS`): run settings only where
        they differ from the defaults, ``checkpoints`` only when on, never ``profile``."""
        doc: dict[str, Any] = {}
        for f in DEPLOY_FIELDS:
            if f.written == "never":
                continue
            value = getattr(self.settings if f.settings else self, f.key)
            if (f.written == "if_true" and not value) or (f.settings and value == getattr(_DEFAULTS, f.key)):
                continue
            doc[f.key] = _ENCODE.get(f.rule, _same)(value)
        return doc

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Deployment:
        """Convert a checked document (``plan.artefacts.check_deploy``); a field it lacks
        keeps its default, as does a run setting given as null."""
        values: dict[str, Any] = {}
        settings: dict[str, Any] = {}
        for f in DEPLOY_FIELDS:
            if f.written == "never" or f.key not in doc or (f.settings and doc[f.key] is None):
                continue
            (settings if f.settings else values)[f.key] = _DECODE.get(f.rule, _same)(doc[f.key])
        return cls(**values, settings=RunSettings(**settings))


@dataclass(frozen=True)
class DeployField:
    """One top-level field of ``deploy.json``: its key (the :class:`Deployment` attribute,
    or the :class:`RunSettings` one when ``settings``), the ``rule`` it is checked by
    (``plan.artefacts.DEPLOY_RULES``) and converted by, whether a file must have it, and
    when it is written (``always``; ``if_true``; a run setting only when it is not the
    default; ``never``: a per-run value a file may not carry)."""

    key: str
    rule: str
    required: bool = True
    settings: bool = False
    written: str = "always"


DEPLOY_FIELDS: tuple[DeployField, ...] = (
    DeployField("schema_version", "version"),
    DeployField("app", "app_name"),
    DeployField("app_ref", "app_ref"),
    DeployField("params", "params", required=False),
    DeployField("fingerprint", "fingerprint"),
    DeployField("strategy", "strategy"),
    DeployField("nodes", "nodes"),
    DeployField("cores", "cores"),
    DeployField("instrumented", "bool", required=False),
    DeployField("collapse", "bool", required=False),
    DeployField("checkpoints", "bool", required=False, written="if_true"),
    DeployField("pes", "pes"),
    DeployField("links", "links"),
    DeployField("streams", "streams", required=False),
    DeployField("spark", "spark"),
    DeployField("batch_size", "count", required=False, settings=True),
    DeployField("hwm", "count", required=False, settings=True),
    DeployField("max_frame", "frame_bytes", required=False, settings=True),
    DeployField("max_batch_delay", "delay", required=False, settings=True),
    DeployField("duration", "seconds", required=False, settings=True),
    DeployField("stall_timeout", "seconds", required=False, settings=True),
    DeployField("insecure_links", "bool", required=False, settings=True),
    DeployField("profile", "absent", required=False, settings=True, written="never"),
)
"""``deploy.json``'s schema, the one list: :meth:`Deployment.to_json` writes,
:meth:`Deployment.from_json` reads and ``plan.artefacts.check_deploy`` checks these
fields, in this order (``nodes`` before ``pes``, ``pes`` before ``links``: later
checks use earlier values)."""


def _same(v: Any) -> Any:
    return v


_ENCODE: dict[str, Any] = {
    "params": dict,
    "pes": lambda pes: [p.to_json() for p in pes],
    "links": lambda links: [ln.to_json() for ln in links],
    "streams": lambda streams: [list(s) for s in streams],
    "spark": lambda spark: spark.to_json(),
}
_DECODE: dict[str, Any] = {
    "params": dict,
    "bool": bool,
    "pes": lambda pes: tuple(DeployedPE.from_json(p) for p in pes),
    "links": lambda links: tuple(DeployedLink.from_json(ln) for ln in links),
    "streams": lambda streams: tuple((a, b) for a, b in streams),
    "spark": lambda spark: SparkSettings(spark["master"], dict(spark.get("conf", {})), spark.get("submit", "")),
}
