"""Run a plan on this machine without Spark: one node, the real node agent, real PE
processes and real ZeroMQ links.

Calibration (``refine.calibrate``), the micro-benchmarks and the tests use it where a
JVM per run would only add noise and seconds; every deployment a user makes goes
through Spark (``spadeopt.api.run``, ``deploy.launcher``).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from spadeopt.codegen.render import generate
from spadeopt.deploy.agent import run_node
from spadeopt.frontend.dsl import App
from spadeopt.model.graph import AppGraph
from spadeopt.optimize.strategies import plan_for
from spadeopt.plan.plan import Plan
from spadeopt.runtime.sinks import commit


def read_sinks(out_dir: Path) -> dict[str, list[dict[str, Any]]]:
    return {p.stem: [json.loads(line) for line in p.read_text().splitlines()]
            for p in sorted(Path(out_dir).glob("*.jsonl"))}


def run_local(graph: AppGraph | App, fusion: str | Plan = "none", *, app_ref: str | None = None,
              workdir: Path | None = None, settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Generate and run ``graph`` under ``fusion`` on one node; returns sinks and stats.

    ``settings`` changes run settings (``plan.deployment.RunSettings`` fields: batch
    size, HWM, max frame, profile sampling) for this run.

    ``app_ref`` must name the module holding the app's user functions, if any
    (a path like ``tests/apps/x.py``); defaults to the graph's module.
    """
    if isinstance(graph, App):
        graph = graph.build()
    plan = fusion if isinstance(fusion, Plan) else plan_for(graph, fusion)
    work = Path(workdir or tempfile.mkdtemp(prefix="spadeopt-test-"))
    build = generate(graph, plan, work / "build", app_ref or graph.module)
    deploy = build.deploy.with_settings(**(settings or {}))
    out = work / "out"
    report = run_node(0, deploy, str(build.directory), str(out), str(work / "logs"))
    commit(out)  # as the driver does once every node succeeded
    return {"sinks": read_sinks(out), "report": report, "plan": plan, "dir": work}
