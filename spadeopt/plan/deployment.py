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
    (``deploy.checkpoints``): its endpoint and CURVE server key, the run's token (sent
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
    checkpoint: CheckpointChannel | None = None  # set per run (deploy.checkpoints), never in a file
    source_limit: int | None = None  # records each source passes on, then ends (--verify-fission); never in a file

    def changed(self, **changes: Any) -> RunSettings:
        """These settings with ``changes`` applied; a change of None keeps the setting."""
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})


_DEFAULTS = RunSettings()
_SETTINGS = tuple(f.name for f in dataclasses.fields(RunSettings) if f.name not in ("profile", "checkpoint", "source_limit"))


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

    def with_settings(self, **changes: Any) -> Deployment:
        """This deployment with some run settings changed (None keeps one)."""
        return dataclasses.replace(self, settings=self.settings.changed(**changes))

    def to_json(self) -> dict[str, Any]:
        """The ``deploy.json`` document; run settings only where they differ from the
        defaults, and never ``profile`` (set per run by ``spadeopt profile``)."""
        doc: dict[str, Any] = {
            "schema_version": self.schema_version, "app": self.app, "app_ref": self.app_ref,
            "params": dict(self.params), "fingerprint": self.fingerprint, "strategy": self.strategy,
            "nodes": self.nodes, "cores": self.cores, "instrumented": self.instrumented,
            "collapse": self.collapse, "pes": [p.to_json() for p in self.pes],
            "links": [ln.to_json() for ln in self.links], "streams": [list(s) for s in self.streams],
            "spark": self.spark.to_json(),
        }
        if self.checkpoints:
            doc["checkpoints"] = True
        for name in _SETTINGS:
            value = getattr(self.settings, name)
            if value != getattr(_DEFAULTS, name):
                doc[name] = value
        return doc

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Deployment:
        """Convert a checked document (``plan.artefacts.check_deploy``)."""
        spark = doc["spark"]
        settings = RunSettings(**{name: doc[name] for name in _SETTINGS if doc.get(name) is not None})
        return cls(
            app=doc["app"], app_ref=doc["app_ref"], fingerprint=doc["fingerprint"], strategy=doc["strategy"],
            nodes=doc["nodes"], cores=doc["cores"], pes=tuple(DeployedPE.from_json(p) for p in doc["pes"]),
            links=tuple(DeployedLink.from_json(ln) for ln in doc["links"]),
            spark=SparkSettings(spark["master"], dict(spark.get("conf", {})), spark.get("submit", "")),
            params=dict(doc.get("params", {})), instrumented=bool(doc.get("instrumented", False)),
            collapse=bool(doc.get("collapse", True)), checkpoints=bool(doc.get("checkpoints", False)),
            streams=tuple((a, b) for a, b in doc.get("streams", ())), settings=settings,
            schema_version=doc.get("schema_version", SCHEMA_VERSION),
        )
