"""The library calls behind every CLI command (the CLI only parses arguments)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from spadeopt.codegen.render import Build, generate
from spadeopt.deploy.launcher import RunResult, run_build
from spadeopt.deploy.options import RunOptions
from spadeopt.errors import SpadeoptError, UsageError
from spadeopt.frontend.dsl import App, AppSpec
from spadeopt.model.graph import AppGraph
from spadeopt.optimize.strategies import honours_of, plan_for
from spadeopt.plan.deployment import Deployment, Sampling
from spadeopt.plan.plan import Plan, check_plan
from spadeopt.runtime.loader import canonical_ref, load_module, split_ref

# One profiling default everywhere (profile, optimize's Makefile target, compare, demo):
# one PE (FALL) measures every operator without processes contending for the cores, and
# refinement makes an operator's CPU fraction independent of what it was fused with; one
# tuple in 100 gives rare links enough samples in a short run for a few per cent of
# overhead (docs/benchmarks.md, "profiling overhead").
PROFILE_FUSION = "all"
PROFILE_SAMPLE_RATE = 0.01


def load_app(ref: str) -> Any:
    """Return the ``AppSpec`` (or ``App``) object an app reference names (its module
    imported by ``runtime.loader``, which PEs share; the app types are the frontend's, so
    finding the app happens here, above both)."""
    target, attr = split_ref(ref)
    module = load_module(target)
    obj = getattr(module, attr, None)
    if not isinstance(obj, AppSpec | App) and attr == "app":
        # No `app = ...` export: an app file that defines exactly one app is unambiguous.
        found = sorted(k for k, v in vars(module).items() if isinstance(v, AppSpec | App) and not k.startswith("_"))
        if len(found) == 1:
            return getattr(module, found[0])
        if found:
            msg = (f"'{target}' defines several apps ({', '.join(found)}) and exports none as 'app'; "
                   f"name one, e.g. {target}:{found[0]}")
            raise UsageError(msg)
    if not isinstance(obj, AppSpec | App):
        msg = (f"'{ref}' has no app: expected a module attribute '{attr}' made with @spadeopt.app "
               f"(found {type(obj).__name__})")
        raise UsageError(msg)
    return obj


def load_graph(app_ref: str, params: Mapping[str, str] | None = None) -> tuple[AppGraph, str]:
    """Load and validate an app; returns the graph and a reference PEs can import."""
    ref = canonical_ref(app_ref)
    obj = load_app(ref)
    if isinstance(obj, App):
        if params:
            raise UsageError(f"app '{obj.name}' takes no parameters (it is a plain App, not an @app builder)")
        return obj.build(), ref
    assert isinstance(obj, AppSpec)
    return obj.build(params or {}), ref


def plan_file(fusion: str | Plan, widths: Mapping[str, int] | None = None) -> str | Plan:
    """``fusion`` itself, or the plan its ``.json`` path holds, read and checked field by
    field (``plan.artefacts``). Commands call it before claiming any output, so a bad
    plan.json is refused with nothing written."""
    if isinstance(fusion, str) and fusion.endswith(".json"):
        if widths:
            raise UsageError("--width cannot change a plan.json; it records its regions' widths")
        return Plan.load(Path(fusion))
    return fusion


def make_plan(graph: AppGraph, fusion: str | Plan, nodes: int = 1, cores: int = 2,
              widths: Mapping[str, int] | None = None, collapse: bool = True) -> Plan:
    """A plan for ``fusion``: a strategy name, a path to a plan.json, or a ``Plan`` read
    by ``plan_file``. ``widths`` sets parallel regions' widths (``--width REGION=K``); a
    plan.json carries its own. ``collapse=False`` (``--no-collapse``) keeps operator
    boundaries inside static runs (``codegen.collapse``)."""
    fusion = plan_file(fusion, widths)
    if isinstance(fusion, Plan):
        plan = fusion
        check_plan(plan, graph, honours_of(plan.strategy))
    else:
        plan = plan_for(graph, fusion, nodes, cores, widths=dict(widths or {}))
    return plan if collapse else dataclasses.replace(plan, collapse=False)


def build(app_ref: str, fusion: str = "none", params: Mapping[str, str] | None = None,
          nodes: int = 1, cores: int = 2, out: Path | None = None, force: bool = False,
          flag: str = "-o", widths: Mapping[str, int] | None = None, collapse: bool = True,
          checkpoints: bool = False) -> Build:
    """Generate a build. ``out`` (default ``build/<app>/<strategy>``) must be new, empty or a
    previous build holding nothing else (``spadeopt.output_paths``); ``force`` moves other content aside.
    ``checkpoints``: the PEs register their operators' state, so the build can run with
    ``--checkpoint-interval`` (a state that cannot be checkpointed is refused here)."""
    from spadeopt.output_paths import claim_dir

    fusion = plan_file(fusion, widths)
    if out is not None:
        claim_dir(out, "build", flag, force)
    graph, ref = load_graph(app_ref, params)
    plan = make_plan(graph, fusion, nodes, cores, widths, collapse)
    if checkpoints:
        plan = dataclasses.replace(plan, checkpoints=True)
    if out is None:
        out = Path("build") / graph.name / plan.strategy
        claim_dir(out, "build", f"{flag} (default)", force)
    return generate(graph, plan, Path(out), ref)


def is_build(target: str | Path) -> bool:
    return Path(target).is_dir() and (Path(target) / "deploy.json").exists()


def run(target: str, fusion: str = "none", params: Mapping[str, str] | None = None, *, nodes: int = 1,
        cores: int = 2, build_dir: Path | None = None, widths: Mapping[str, int] | None = None,
        collapse: bool = True, options: RunOptions | None = None) -> RunResult:
    """Build (unless ``target`` is already a build directory) and run on Spark.

    Everything that can be checked is checked before anything is written or Spark
    starts: the output paths, the app, the master URL against the plan's nodes x cores,
    Java, and the input files of file sources. ``options`` (``deploy.options.RunOptions``)
    say where and how: master and Spark conf, ``out`` for the sinks, progress lines;
    links are authenticated and encrypted (CURVE) unless ``insecure_links`` (for
    measurements only); a run whose PEs make no progress for ``stall_timeout`` seconds
    fails naming them.
    """
    from spadeopt.deploy.preflight import preflight
    from spadeopt.orchestrate import verify_fission as verify
    from spadeopt.output_paths import claim_dir
    from spadeopt.plan.artefacts import load_deploy

    options = options or RunOptions()
    master, out, force, progress = options.master, options.out, options.force, options.progress
    built = is_build(target)
    if built:  # the build's files are checked before any output is claimed
        if params or widths:
            raise UsageError("-p and --width cannot change an existing build; rebuild it with `spadeopt build`")
        if options.verify_fission is not None:
            raise UsageError("--verify-fission builds a width-1 reference from the app: give the app "
                             "(apps/x.py), not a build directory")
        deploy = load_deploy(Path(target))
        check_build_consistent(Path(target), deploy)
    else:
        fusion = plan_file(fusion, widths)
    if out is not None:
        claim_dir(out, "sinks", "--out", force)
    if built:
        graph = _graph_of_build(deploy, options)
        preflight(graph, master or deploy.spark.master, deploy.nodes, deploy.cores, progress)
        options.say(f"running the build {target} of app '{deploy.app}' ({deploy.strategy}) with the parameters it "
                    f"was built with: {_params_text(deploy.params)} (to change them, build again with -p)")
        result = _launch(Path(target), options)
    else:
        if build_dir is not None:
            claim_dir(build_dir, "build", "--build-dir", force)
        graph, ref = load_graph(target, params)
        if options.verify_fission is not None:
            verify.check_verifiable(graph, options.verify_fission)
        plan = make_plan(graph, fusion, nodes, cores, widths, collapse)
        if options.checkpoints is not None:  # the generated code registers operator state
            plan = dataclasses.replace(plan, checkpoints=True)
        preflight(graph, master, plan.nodes, plan.cores, progress)
        if build_dir is None:
            build_dir = Path("build") / graph.name / plan.strategy
            claim_dir(build_dir, "build", "--build-dir (default)", force)
        b = generate(graph, plan, Path(build_dir), ref)
        for note in b.notes:  # what its checkpoints guarantee short of a failure-free run's output
            options.say(f"checkpoints: {note}")
        if options.verify_fission is not None:
            verify.verify(graph, ref, plan, b.directory, options, options.verify_fission)
        result = _launch(b.directory, options)
    if out is not None:
        _mark_sinks(out, result)
    if result.latency and graph is not None and backlog_sources(graph):
        result.latency["backlog_sources"] = backlog_sources(graph)
    return result


def _params_text(params: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in sorted(dict(params).items())) or "none"


def backlog_sources(graph: AppGraph) -> list[str]:
    """Live, unbounded Redis sources that start at the beginning of their streams (the
    default): their first latency markers include the backlog read at the start."""
    from spadeopt.deploy.preflight import connectors

    return [op for op, factory, args in connectors(graph)
            if factory.endswith(":RedisStreamSource") and args.get("start") == "beginning"
            and args.get("start_time") is None and args.get("until") is None and args.get("count") is None]


def _graph_of_build(deploy: Deployment, options: RunOptions) -> AppGraph | None:
    """The graph a build was made from (its ``app_ref`` and ``params``), so a prebuilt
    build's input files and brokers are checked before it runs as an app's are; None,
    said, when the app cannot be loaded here or is no longer the one built."""
    try:
        graph, _ = load_graph(deploy.app_ref, deploy.params)
    except SpadeoptError as exc:
        options.say(f"the build's app {deploy.app_ref} does not load here ({str(exc).splitlines()[0]}): its "
                    f"input files and brokers are not checked before the run")
        return None
    if graph.fingerprint != deploy.fingerprint:
        options.say(f"the app {deploy.app_ref} changed since this build was made (graph {graph.fingerprint}, "
                    f"built from {deploy.fingerprint}): the build's input files and brokers are not checked "
                    f"before the run")
        return None
    return graph


def _launch(build_dir: Path, options: RunOptions) -> RunResult:
    """``run_build``, or with checkpoints ``deploy.checkpointed_run.run`` (restarts, resume)."""
    if options.checkpoints is None:
        return run_build(build_dir, options)
    from spadeopt.deploy import checkpointed_run as checkpoints

    return checkpoints.run(build_dir, options, options.checkpoints)


def run_submitted(build_dir: Path, options: RunOptions) -> RunResult:
    """Run a build under spark-submit (``spadeopt.submit``): the master and conf are
    spark-submit's; ``options.out`` is claimed and marked as under ``spadeopt run``."""
    from spadeopt.output_paths import claim_dir
    from spadeopt.plan.artefacts import load_deploy

    check_build_consistent(Path(build_dir), load_deploy(Path(build_dir)))
    if options.out is not None:
        claim_dir(options.out, "sinks", "--out", options.force)
    result = run_build(Path(build_dir), options, submitted=True)
    if options.out is not None:
        _mark_sinks(options.out, result)
    return result


def _mark_sinks(out: Path, result: RunResult) -> None:
    from spadeopt.output_paths import mark_dir

    mark_dir(out, "sinks", (f"{name}.jsonl" for name in result.sinks if (Path(out) / f"{name}.jsonl").exists()))


def check_build_consistent(build_dir: Path, deploy: Deployment) -> None:
    """``plan.json`` and ``deploy.json`` of a build must describe the same PEs; an edited
    plan.json has no effect on a build, so say so rather than run something else."""
    path = Path(build_dir) / "plan.json"
    if not path.is_file():
        raise UsageError(f"{build_dir} has deploy.json but no plan.json: not a complete spadeopt build; "
                         f"regenerate it with `spadeopt build`")
    plan = Plan.load(path)
    built = {p.pe: (p.operators, p.node) for p in deploy.pes}
    planned = {pe.pe_id: (tuple(pe.operators), pe.node) for pe in plan.pes}
    diffs = []
    if (plan.app, plan.strategy, plan.nodes, plan.cores) != (deploy.app, deploy.strategy, deploy.nodes,
                                                            deploy.cores):
        diffs.append(f"plan.json says app '{plan.app}', {plan.strategy}, {plan.nodes} node(s) x {plan.cores} "
                     f"core(s); deploy.json says app '{deploy.app}', {deploy.strategy}, {deploy.nodes} "
                     f"node(s) x {deploy.cores} core(s)")
    for pe in sorted(set(built) | set(planned)):
        if built.get(pe) != planned.get(pe):
            diffs.append(f"{pe}: plan.json {_pe_text(planned.get(pe))}, deploy.json {_pe_text(built.get(pe))}")
    if diffs:
        shown = "\n".join(f"  - {d}" for d in diffs[:8]) + (f"\n  ... {len(diffs) - 8} more" if len(diffs) > 8 else "")
        raise UsageError(
            f"{path} does not match the build's deploy.json (was plan.json edited after the build?):\n{shown}\n"
            f"The PE modules follow deploy.json. To run the edited plan, build it: "
            f"spadeopt build APP --fusion {path} -o NEW_DIR")


def _pe_text(entry: tuple | None) -> str:
    if entry is None:
        return "has no such PE"
    ops, node = entry
    return f"has [{', '.join(ops)}] on node {node}"


def write_json(path: Path, doc: Any) -> None:
    from spadeopt.atomic import write_atomic

    write_atomic(Path(path), json.dumps(doc, indent=2, sort_keys=True) + "\n")


def profile(app_ref: str, run_dir: Path, fusion: str = PROFILE_FUSION, params: Mapping[str, str] | None = None, *,
            sample_rate: float = PROFILE_SAMPLE_RATE, reservoir: int = 5000, seed: int = 0, nodes: int = 1, cores: int = 2,
            production_probe: bool = True, options: RunOptions | None = None) -> tuple[RunResult, Path]:
    """Stage 1: run an instrumented build of the app and write its raw samples; then
    (``production_probe``) run its production FALL build (:func:`_production_probe`).
    ``options`` (``deploy.options.RunOptions``; its ``out`` is unused) say where and
    how, and ``duration`` how long to sample an app whose sources do not end.

    Everything is checked before anything is written: the sampling parameters, the
    run directory (writable, holding no other run) and the app itself.
    """
    import platform
    import time

    from spadeopt.deploy.preflight import preflight
    from spadeopt.profiling import Manifest, check_run_dir, host_info, stride_of, write_manifest
    from spadeopt.profiling.records import pe_file

    try:
        stride_of(sample_rate)
    except UsageError as exc:
        raise UsageError(f"--sample-rate: {exc}") from None
    options = (options or RunOptions()).replace(out=None)
    master, progress = options.master, options.progress
    if isinstance(reservoir, bool) or not isinstance(reservoir, int) or reservoir < 1:
        raise UsageError(f"--reservoir must be an integer >= 1, got {reservoir!r}")
    fusion = plan_file(fusion)
    run_dir = check_run_dir(run_dir)
    graph, ref = load_graph(app_ref, params)
    # profiles describe logical operators: parallel regions are profiled at width 1
    unreplicated = {} if isinstance(fusion, Plan) else {name: 1 for name, _, _ in graph.annotations.parallel}
    plan = dataclasses.replace(make_plan(graph, fusion, nodes, cores, unreplicated), instrumented=True)
    preflight(graph, master, plan.nodes, plan.cores, progress)  # before the build is written
    build_dir = Path(run_dir) / "build"
    generate(graph, plan, build_dir, ref)
    started = time.time()
    sampling = Sampling(sample_rate, reservoir, seed, str(Path(run_dir).resolve()))
    result = run_build(build_dir, options, sampling=sampling)
    finished = time.time()
    host = host_info()
    manifest = Manifest(
        app=graph.name, graph_fingerprint=graph.fingerprint, plan=plan.to_json(),
        params=dict(graph.params), host=host.host or platform.node(), cores=host.cores,
        cpu_model=host.cpu_model, duration=finished - started, seed=seed, sample_rate=sample_rate,
        reservoir_size=reservoir, started=started, finished=finished,
        pe_files=tuple(pe_file(pe.pe_id) for pe in plan.pes),
    )
    write_manifest(run_dir, manifest)
    if production_probe:
        _production_probe(graph, ref, Path(run_dir), nodes, cores, options)
    return result, Path(run_dir)


PRODUCTION_PROBE = "production.json"
PROBE_RUNS = 3
"""Runs of the production probe; FATM fits on the median (one run on this shared VM
swung the fitted rate by up to 1.6x between minutes:
docs/decisions/020-production-probe-fits-the-model.md)."""


def _production_probe(graph: AppGraph, ref: str, run_dir: Path, nodes: int, cores: int,
                      options: RunOptions) -> None:
    """Run the production FALL build (one PE, not instrumented, static runs collapsed) of
    the profiled app ``PROBE_RUNS`` times and record the run of median steady source rate
    in ``RUN_DIR/production.json`` (every run's rate under ``runs``).

    The profile's loads come from an instrumented build with operator boundaries; this
    figure is what the same operators cost fused and collapsed, so FATM can fit what
    collapsing saves (``spadeopt.optimize.fatm.collapse_fraction``) instead of guessing."""
    unreplicated = {name: 1 for name, _, _ in graph.annotations.parallel}
    # the profile's nodes: the one PE runs on node 0, but the app's place() calls must fit
    plan = make_plan(graph, "all", nodes, cores, unreplicated)
    build = generate(graph, plan, run_dir / "build-production", ref)
    results = []
    for i in range(PROBE_RUNS):
        options.say(f"production probe {i + 1}/{PROBE_RUNS}: the FALL production build, to measure what "
                    f"collapsing saves")
        results.append(run_build(build.directory, options))
    res = sorted(results, key=lambda r: r.steady_throughput)[len(results) // 2]
    write_json(run_dir / PRODUCTION_PROBE, {
        "fusion": "all", "collapse": plan.collapse, "tuples": res.tuples, "wall_s": res.wall_s,
        "throughput": res.throughput, "steady_throughput": res.steady_throughput,
        "cpu_s": math.fsum(p["cpu_s"] for p in res.per_pe),
        "runs": [r.steady_throughput for r in results]})


CALIBRATION_DIR = Path(__file__).resolve().parent.parent / "profiles" / "calibration"


def default_calibration() -> Path:
    """This host's calibration if there is one, else the newest committed one."""
    import socket

    own = CALIBRATION_DIR / f"{socket.gethostname()}.json"
    if own.is_file():
        return own
    found = sorted(CALIBRATION_DIR.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    if not found:
        raise UsageError(f"no calibration found in {CALIBRATION_DIR}; run `spadeopt calibrate -o "
                         f"profiles/calibration/{socket.gethostname()}.json` or pass --calibration")
    return found[0]


def optimize(app_ref: str, profile_path: Path, out: Path, calibration: Path | None = None,
             params: Mapping[str, str] | None = None, max_frac: float = 0.5, min_util: float = 0.95,
             nodes: int = 1, cores: int = 2, exact: bool = False, rate: str | float = "max", absorb: bool = True,
             force: bool = False, cpu_score: float | None = None, widths: Mapping[str, int] | None = None,
             fission: bool = True, collapse: bool = True, checkpoints: bool = False):
    """Stage 2: fission widths + GreedyFuse + placement from a refined profile; writes a runnable build.

    FATM chooses the width of every declared parallel region (``widths``, from
    ``--width``, pins some; ``fission=False`` keeps all at width 1). ``checkpoints``: the
    build registers operator state and FATM plans no cycle of PEs, which an aligned
    checkpoint barrier cannot cross (record 074).

    The app is rebuilt with the parameters recorded in the profile (``params`` may
    repeat or override them; the graph fingerprint must still match the profile's).
    """
    from spadeopt.optimize.fatm import fuse_auto
    from spadeopt.optimize.rate import parse_rate
    from spadeopt.output_paths import claim_dir
    from spadeopt.refine.comm import CommCost
    from spadeopt.refine.profile import Profile

    claim_dir(out, "build", "-o", force)
    if not max_frac > 0:
        raise UsageError(f"--max-frac must be > 0, got {max_frac}")
    if not 0 < min_util <= 1:
        raise UsageError(f"--min-util must be in (0, 1], got {min_util}")
    if nodes < 1 or cores < 1:
        raise UsageError(f"--nodes and --cores must be >= 1 (got {nodes}, {cores})")
    rate = parse_rate(rate)
    prof = Profile.load_file(profile_path)
    check_profile_app(app_ref, prof.app, prof.params, profile_path)
    merged = {k: str(v) for k, v in prof.params.items()}
    merged.update(params or {})
    graph, ref = load_graph(app_ref, merged)
    if graph.name != prof.app:
        raise _foreign_profile(profile_path, prof.app, graph.name, app_ref)
    opprof, match_warnings = _profile_for_run(app_ref, prof, graph)
    calibration = Path(calibration or default_calibration())
    comm = CommCost.for_this_host(calibration, cpu_score)  # MIPS-scaled if another CPU
    model = perf_model(calibration, comm.scale)
    auto = fuse_auto(graph, opprof, comm, nodes, cores, max_frac, min_util, exact, rate=rate, absorb=absorb,
                     widths=dict(widths or {}), fission=fission, model=model, acyclic=checkpoints)
    plan = auto.plan if collapse else dataclasses.replace(auto.plan, collapse=False)
    if checkpoints:  # as `spadeopt build --checkpoints`
        plan = dataclasses.replace(plan, checkpoints=True)
    build = generate(graph, plan, Path(out), ref)
    auto.explain["profile"] = str(Path(profile_path).resolve())
    auto.explain["calibration"] = comm.source
    # Every input that decided the plan, so it can be reproduced (and compared) exactly.
    auto.explain["inputs"] = {
        "app": graph.name, "app_ref": ref, "params": dict(graph.params), "fingerprint": graph.fingerprint,
        "profile": {"path": str(Path(profile_path).resolve()), "sha256": _sha256(Path(profile_path))},
        "calibration": {"path": str(calibration.resolve()), "sha256": _sha256(calibration)},
        "comm_scaling": comm.scaling, "nodes": nodes, "cores": cores, "max_frac": max_frac,
        "min_util": min_util, "rate": rate, "absorb": absorb, "exact": exact,
        "fission": fission, "widths": dict(sorted((widths or {}).items())), "checkpoints": checkpoints,
        "perf_model": model.to_json(),
    }
    if match_warnings:
        auto.explain["profile_warnings"] = match_warnings
    write_json(build.directory / "explain.json", auto.explain)
    return build, auto.explain


def _profile_for_run(app_ref: str, prof, graph: AppGraph):
    """The optimizer's profile for ``graph`` and the warnings to print: a profile of the same
    operator graph plans a run whose sources differ only in their arguments
    (:mod:`spadeopt.optimize.profile_match`: a longer source is silent, other arguments
    warn); a profile of another graph is refused later by ``fatm.check_profile``."""
    import sys

    from spadeopt.optimize.profile_match import check_same_shape, source_warnings

    opprof = operator_profile(prof)
    if graph.fingerprint == prof.graph_fingerprint:
        return opprof, []
    profiled, _ = load_graph(app_ref, {k: str(v) for k, v in prof.params.items()})
    if profiled.fingerprint != prof.graph_fingerprint:
        return opprof, []  # the app's code changed since profiling: check_profile says so
    check_same_shape(profiled, graph)
    warnings = source_warnings(profiled, graph)
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    return dataclasses.replace(opprof, fingerprint=graph.fingerprint), warnings


def operator_profile(prof):
    """What the optimizer reads of a refined ``Profile``: loads, links, source rate, and
    whether it was one run of one PE (then that PE ran flat out: ``unattributed_call_s``)."""
    from spadeopt.optimize.fatm import OperatorProfile

    one_pe = len(prof.runs) == 1 and prof.runs[0].pes == 1
    probes = [r.production for r in prof.runs if r.production is not None]
    rates = [p.get("steady_throughput") or p.get("throughput") or 0.0 for p in probes]
    fall_rate = max(rates) if rates else 0.0
    fastest = probes[rates.index(fall_rate)] if rates else {}
    cpu, tuples = fastest.get("cpu_s"), fastest.get("tuples")
    cpu_per_tuple = cpu / tuples if isinstance(cpu, int | float) and isinstance(tuples, int) and tuples > 0 else 0.0
    busy = (prof.runs[0].source_thread_busy or 0.0) if one_pe else 0.0
    return OperatorProfile(prof.app, prof.graph_fingerprint, prof.load, prof.link_tuples(), prof.source_rate,
                           one_pe_run=one_pe, production_fall_rate=fall_rate,
                           production_fall_cpu_s=max(0.0, float(cpu_per_tuple)),
                           profiled_busy=float(busy) if isinstance(busy, int | float) and busy > 0 else 0.0,
                           keys={port.split(".", 1)[0]: (dict(k.top), k.other)
                                 for port, k in sorted(getattr(prof, "keys", {}).items())})


def perf_model(calibration: Path, scale: float = 1.0):
    """The prediction constants of a calibration file (:mod:`spadeopt.optimize.predict`);
    its split and merge CPU costs times ``scale`` (the calibration's CPU score over this
    host's, as for the link costs: ``CommCost.for_this_host``)."""
    from spadeopt.optimize.predict import model_from_calibration
    from spadeopt.refine.profile import read_json

    model = model_from_calibration(read_json(Path(calibration), "calibration", "recalibrate"), str(calibration))
    return model.with_fission_scaled(scale)


def predict_build(build_dir: Path, profile_path: Path, calibration: Path | None = None,
                  cpu_score: float | None = None):
    """The predicted source rate of any build (any strategy) from a refined profile of its app:
    the model FATM plans with, evaluated on the build's ``plan.json``."""
    from spadeopt.optimize.fatm import predict_plan
    from spadeopt.plan.artefacts import load_deploy
    from spadeopt.refine.comm import CommCost
    from spadeopt.refine.profile import Profile

    plan = Plan.load(Path(build_dir) / "plan.json")
    deploy = load_deploy(Path(build_dir))
    prof = Profile.load_file(profile_path)
    params = {k: str(v) for k, v in prof.params.items()}
    graph, _ = load_graph(deploy.app_ref or plan.app, params)
    calibration = Path(calibration or default_calibration())
    comm = CommCost.for_this_host(calibration, cpu_score)
    return predict_plan(graph, operator_profile(prof), plan, comm, perf_model(calibration, comm.scale))


def check_profile_app(app_ref: str, profiled: str, profiled_params: Mapping[str, Any],
                      profile_path: Path) -> None:
    """A profile of another app is refused by name before its parameters are applied
    (they would otherwise be reported as unknown parameters the user never typed)."""
    obj = load_app(canonical_ref(app_ref))
    if isinstance(obj, AppSpec) and set(profiled_params) - set(obj.defaults):
        raise _foreign_profile(profile_path, profiled, obj.name, app_ref)


def _foreign_profile(profile_path: Path, profiled: str, name: str, app_ref: str) -> UsageError:
    return UsageError(f"--profile {profile_path} is a profile of app '{profiled}', not of app '{name}' "
                      f"({app_ref}); profile '{name}' first (spadeopt profile {app_ref} -o RUN_DIR, then "
                      f"spadeopt refine RUN_DIR -o PROFILE.json)")


def draw_plan(build_dir: Path, png: Path | None = None, dot: Path | None = None,
              force: bool = False) -> list[Path]:
    """A picture of a build's plan, as PNG and/or Graphviz DOT; returns what was written.
    The build's files are read and checked before ``png`` and ``dot`` are claimed."""
    from spadeopt.atomic import write_atomic
    from spadeopt.output_paths import claim_file
    from spadeopt.plan.picture import load_picture, to_dot, to_png

    pic = load_picture(Path(build_dir))
    if png:
        claim_file(png, "plan picture (PNG)", "--png", force)
    if dot:
        claim_file(dot, "plan picture (DOT)", "--dot", force)
    written = []
    if png:
        to_png(pic, Path(png))
        written.append(Path(png))
    if dot:
        write_atomic(Path(dot), to_dot(pic))
        written.append(Path(dot))
    return written


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
