"""Run a build on this machine without Spark: one node, the real node agent, real PE
processes and real ZeroMQ links.

A runner like the rest of ``deploy``: a build directory (its ``deploy.json``, a
``plan.deployment.Deployment``) goes in, the sinks and the node's report come out. What
makes the build first (plan, generate, then run) is ``orchestrate.build_local.build_and_run``,
above; calibration (``refine.calibrate``), the micro-benchmarks and the tests use that
where a JVM per run would only add noise and seconds. Every deployment a user makes
goes through Spark (``spadeopt.api.run``, ``deploy.launcher``).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spadeopt.deploy.agent import run_node
from spadeopt.plan.artefacts import load_deploy
from spadeopt.plan.deployment import Deployment
from spadeopt.runtime.sinks import commit


def read_sinks(out_dir: Path) -> dict[str, list[dict[str, Any]]]:
    return {p.stem: [json.loads(line) for line in p.read_text().splitlines()]
            for p in sorted(Path(out_dir).glob("*.jsonl"))}


@dataclass(frozen=True)
class LocalRun:
    """What a run on this machine without Spark gives back."""

    sinks: dict[str, list[dict[str, Any]]]  # sink -> its rows, as committed (``out/<sink>.jsonl``)
    report: dict[str, Any]  # the node agent's report (``deploy.agent.run_node``): ``pes``, one stats map per PE
    dir: Path  # the work directory: sinks under ``out/``, logs under ``logs/``
    plan: Any = None  # the plan it ran, when ``orchestrate.build_local.build_and_run`` made the build


def run_local(build_dir: str | Path, workdir: Path | None = None, *, settings: Mapping[str, Any] | None = None,
              deploy: Deployment | None = None) -> LocalRun:
    """Run the build in ``build_dir`` on one node; returns its sinks, the node's report
    and the work directory (``LocalRun``).

    ``deploy``: the build's ``Deployment`` when the caller has it (else read and checked
    from ``deploy.json``); ``settings`` changes run settings (``plan.deployment.RunSettings``
    fields: batch size, HWM, max frame, profile sampling) for this run.
    """
    work = Path(workdir or tempfile.mkdtemp(prefix="spadeopt-test-"))
    deploy = (deploy or load_deploy(build_dir)).with_settings(**(settings or {}))
    out = work / "out"
    report = run_node(0, deploy, str(build_dir), str(out), str(work / "logs"))
    commit(out)  # as the driver does once every node succeeded
    return LocalRun(read_sinks(out), report, work)
