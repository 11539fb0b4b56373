"""Plan, generate and run an app on this machine without Spark (``deploy.local.run_local``
runs the build): the tests, the micro-benchmarks and calibration use it where a JVM per
run would only add noise and seconds."""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from spadeopt.codegen.render import generate
from spadeopt.deploy.local import LocalRun, run_local
from spadeopt.frontend.dsl import App
from spadeopt.model.graph import AppGraph
from spadeopt.optimize.strategies import plan_for
from spadeopt.plan.plan import Plan


def build_and_run(graph: AppGraph | App, fusion: str | Plan = "none", *, app_ref: str | None = None,
                  workdir: Path | None = None, settings: Mapping[str, Any] | None = None,
                  instrumented: bool = False) -> LocalRun:
    """Generate and run ``graph`` under ``fusion`` on one node; returns its sinks, the
    node's report, the work directory and the ``plan`` (``deploy.local.LocalRun``).

    ``fusion`` is a strategy name (``instrumented``: its profiling plan) or a plan;
    ``settings`` changes run settings (``plan.deployment.RunSettings`` fields: batch
    size, HWM, max frame, profile sampling) for this run. ``app_ref`` must name the
    module holding the app's user functions, if any (a path like ``tests/apps/x.py``);
    defaults to the graph's module. The build goes to ``workdir/build``.
    """
    if isinstance(graph, App):
        graph = graph.build()
    plan = fusion if isinstance(fusion, Plan) else plan_for(graph, fusion, instrumented=instrumented)
    work = Path(workdir or tempfile.mkdtemp(prefix="spadeopt-test-"))
    build = generate(graph, plan, work / "build", app_ref or graph.module)
    return dataclasses.replace(run_local(build.directory, work, settings=settings, deploy=build.deploy), plan=plan)
