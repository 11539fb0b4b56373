"""The library calls behind every CLI command (the CLI only parses arguments)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from spadeopt.codegen.render import Build, generate
from spadeopt.deploy.launcher import RunResult, run_build
from spadeopt.errors import UsageError
from spadeopt.model.dsl import App, AppSpec
from spadeopt.model.graph import AppGraph
from spadeopt.optimize.strategies import plan_for
from spadeopt.plan.plan import Plan, check_plan
from spadeopt.runtime.loader import canonical_ref, load_app


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


def make_plan(graph: AppGraph, fusion: str, nodes: int = 1, cores: int = 2, collapse: bool = True) -> Plan:
    """A plan for ``fusion``: a strategy name, or a path to a plan.json. ``collapse=False``
    (``--no-collapse``) keeps operator boundaries inside static runs (``codegen.collapse``)."""
    if fusion.endswith(".json"):
        plan = Plan.load(Path(fusion))
        check_plan(plan, graph)
    else:
        plan = plan_for(graph, fusion, nodes, cores)
    return plan if collapse else dataclasses.replace(plan, collapse=False)


def build(app_ref: str, fusion: str = "none", params: Mapping[str, str] | None = None,
          nodes: int = 1, cores: int = 2, out: Path | None = None, force: bool = False,
          flag: str = "-o", collapse: bool = True) -> Build:
    """Generate a build. ``out`` (default ``build/<app>/<strategy>``) must be new, empty or a
    previous build holding nothing else (``spadeopt.outputs``); ``force`` moves other content aside."""
    from spadeopt.outputs import claim_dir

    if out is not None:
        claim_dir(out, "build", flag, force)
    graph, ref = load_graph(app_ref, params)
    plan = make_plan(graph, fusion, nodes, cores, collapse)
    if out is None:
        out = Path("build") / graph.name / plan.strategy
        claim_dir(out, "build", f"{flag} (default)", force)
    return generate(graph, plan, Path(out), ref)


def is_build(target: str | Path) -> bool:
    return Path(target).is_dir() and (Path(target) / "deploy.json").exists()


def run(target: str, fusion: str = "none", params: Mapping[str, str] | None = None, nodes: int = 1,
        cores: int = 2, master: str | None = None, out: Path | None = None, build_dir: Path | None = None,
        progress: Callable[[str], None] | None = None, force: bool = False, collapse: bool = True) -> RunResult:
    """Build (unless ``target`` is already a build directory) and run on Spark.

    Everything that can be checked is checked before anything is written or Spark
    starts: the output paths, the app, the master URL against the plan's nodes x cores,
    Java, and the input files of file sources.
    """
    from spadeopt.deploy.launcher import load_deploy
    from spadeopt.deploy.preflight import preflight
    from spadeopt.outputs import claim_dir, mark_dir

    if out is not None:
        claim_dir(out, "sinks", "--out", force)
    if is_build(target):
        if params:
            raise UsageError("-p parameters cannot change an existing build; rebuild it with `spadeopt build`")
        deploy = load_deploy(Path(target))
        check_build_consistent(Path(target), deploy)
        preflight(None, master or deploy["spark"]["master"], deploy["nodes"], deploy["cores"], progress)
        result = run_build(Path(target), master, out, progress)
    else:
        if build_dir is not None:
            claim_dir(build_dir, "build", "--build-dir", force)
        graph, ref = load_graph(target, params)
        plan = make_plan(graph, fusion, nodes, cores, collapse)
        preflight(graph, master, plan.nodes, plan.cores, progress)
        if build_dir is None:
            build_dir = Path("build") / graph.name / plan.strategy
            claim_dir(build_dir, "build", "--build-dir (default)", force)
        b = generate(graph, plan, Path(build_dir), ref)
        result = run_build(b.directory, master, out, progress)
    if out is not None:
        mark_dir(out, "sinks", (f"{name}.jsonl" for name in result.sinks if (Path(out) / f"{name}.jsonl").exists()))
    return result


def check_build_consistent(build_dir: Path, deploy: dict[str, Any]) -> None:
    """``plan.json`` and ``deploy.json`` of a build must describe the same PEs; an edited
    plan.json has no effect on a build, so say so rather than run something else."""
    path = Path(build_dir) / "plan.json"
    if not path.is_file():
        raise UsageError(f"{build_dir} has deploy.json but no plan.json: not a complete spadeopt build; "
                         f"regenerate it with `spadeopt build`")
    plan = Plan.load(path)
    built = {p["pe"]: (tuple(p["operators"]), p["node"]) for p in deploy["pes"]}
    planned = {pe.pe_id: (tuple(pe.operators), pe.node) for pe in plan.pes}
    diffs = []
    if (plan.app, plan.strategy, plan.nodes, plan.cores) != (deploy["app"], deploy["strategy"], deploy["nodes"],
                                                            deploy["cores"]):
        diffs.append(f"plan.json says app '{plan.app}', {plan.strategy}, {plan.nodes} node(s) x {plan.cores} "
                     f"core(s); deploy.json says app '{deploy['app']}', {deploy['strategy']}, {deploy['nodes']} "
                     f"node(s) x {deploy['cores']} core(s)")
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


def profile(app_ref: str, run_dir: Path, fusion: str = "none", params: Mapping[str, str] | None = None,
            sample_rate: float = 0.001, reservoir: int = 5000, duration: float | None = None,
            seed: int = 0, nodes: int = 1, cores: int = 2, master: str | None = None,
            progress: Callable[[str], None] | None = None) -> tuple[RunResult, Path]:
    """Stage 1: run an instrumented build of the app and write its raw samples.

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
    if isinstance(reservoir, bool) or not isinstance(reservoir, int) or reservoir < 1:
        raise UsageError(f"--reservoir must be an integer >= 1, got {reservoir!r}")
    if duration is not None and not duration > 0:
        raise UsageError(f"--duration must be a positive number of seconds, got {duration!r}")
    run_dir = check_run_dir(run_dir)
    graph, ref = load_graph(app_ref, params)
    plan = dataclasses.replace(make_plan(graph, fusion, nodes, cores), instrumented=True)
    preflight(graph, master, plan.nodes, plan.cores, progress)  # before the build is written
    build_dir = Path(run_dir) / "build"
    generate(graph, plan, build_dir, ref)
    started = time.time()
    overrides = {"profile": {"sample_rate": sample_rate, "reservoir_size": reservoir, "seed": seed,
                             "run_dir": str(Path(run_dir).resolve())},
                 "duration": duration}
    result = run_build(build_dir, master, None, progress, overrides)
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
    return result, Path(run_dir)


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
             force: bool = False, collapse: bool = True):
    """Stage 2: GreedyFuse + placement from a refined profile; writes a runnable build.

    The app is rebuilt with the parameters recorded in the profile (``params`` may
    repeat or override them; the graph fingerprint must still match the profile's).
    """
    from spadeopt.optimize.fatm import OperatorProfile, fuse_auto
    from spadeopt.optimize.rate import parse_rate
    from spadeopt.outputs import claim_dir
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
    comm = CommCost.for_this_host(calibration or default_calibration())  # MIPS-scaled if another CPU
    auto = fuse_auto(graph, OperatorProfile(prof.app, prof.graph_fingerprint, prof.load, prof.link_tuples(),
                                            prof.source_rate),
                     comm, nodes, cores, max_frac, min_util, exact, rate=rate, absorb=absorb)
    plan = auto.plan if collapse else dataclasses.replace(auto.plan, collapse=False)
    build = generate(graph, plan, Path(out), ref)
    auto.explain["profile"] = str(Path(profile_path).resolve())
    auto.explain["calibration"] = comm.source
    write_json(build.directory / "explain.json", auto.explain)
    return build, auto.explain


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


def explain_text(build_dir: Path) -> str:
    """A readable account of an optimized build (``explain.json``)."""
    path = Path(build_dir) / "explain.json"
    if not path.is_file():
        raise UsageError(f"{build_dir} has no explain.json: only builds made by `spadeopt optimize` explain "
                         f"themselves")
    try:
        doc = json.loads(path.read_text())
        doc["max_frac"], doc["pes"], doc["objective"]  # noqa: B018 - the fields explain needs
    except (OSError, ValueError, TypeError, KeyError) as exc:
        reason = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        raise UsageError(f"{path} is not a readable explain.json ({reason}); regenerate the build with "
                         f"`spadeopt optimize`") from None
    lines = [f"MaxFrac {doc['max_frac']}, MinUtil {doc['min_util']}; objective (total inter-PE rate) "
             f"{doc['objective']:,.0f} tuples/s (one PE per operator: {doc['objective_none']:,.0f}); "
             f"{doc['merges']} merges", ""]
    lines.append(f"{'PE':<6}{'node':>5}{'OperLoad':>10}{'CommLoad':>10}{'EffUtil':>9}  operators")
    for pe in doc["pes"]:
        ops = ", ".join(pe["operators"])
        if len(ops) > 70:
            ops = ops[:67] + "..."
        lines.append(f"{pe['pe']:<6}{pe['node']:>5}{pe['oper_load']:>10.3f}{pe['comm_load']:>10.3f}"
                     f"{pe['effective_util']:>9.2f}  {ops}")
    if doc["not_merged"]:
        lines += ["", "neighbouring PEs not merged:"]
        lines += [f"  {a} + {b}: {r['why']}" for r in doc["not_merged"] for a, b in [r["pes"]]]
    if doc.get("exact"):
        e = doc["exact"]
        lines += ["", f"exact optimum: objective {e['objective']:,.0f} vs GreedyFuse {e['greedy_objective']:,.0f} "
                      f"(gap {e['gap']:.1%} of the unfused objective)"]
    for w in doc["warnings"]:
        lines.append(f"warning: {w}")
    lines.append(f"\nnode load (cores): {', '.join(f'{x:.2f}' for x in doc['node_load'])}; "
                 f"inter-node rate {doc['inter_node_rate']:,.0f} tuples/s")
    return "\n".join(lines)
