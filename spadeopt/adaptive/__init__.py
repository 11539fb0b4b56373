"""``spadeopt run APP --adaptive``: measure under FALL, re-plan with FATM once, switch at a
checkpoint (issue 39; docs/decisions/069-adaptive-run-switches-once-at-a-checkpoint.md).

Phase 1 runs the app's FALL plan (or ``--fusion none|manual``, ``--width``, or a given
build's plan: ``spadeopt run BUILD --adaptive``) as an *instrumented* build with checkpoints on (the
build ``spadeopt profile`` runs, plus state hooks). After ``adapt_after`` seconds, at the
next checkpoint that completes, the driver asks the PEs to end their sources (the stop
file ``--duration`` and Ctrl-C use): they drain and write their samples; what they
emit after that checkpoint is discarded, since the run resumes from it. The samples
become a profile by the same Spark refinement ``spadeopt refine`` runs; FATM plans
from it (``api.optimize``) for the run's cores; the new build resumes from the
checkpoint (``deploy.checkpointed_run``: state regrouped by operator, 066, keyed
regions moved to other widths, 068). A width change the checkpoint cannot make is
answered by FATM's plan with every region at the width phase 1 ran, then by phase 1's
plan's production build; FATM must be predicted 1.05x phase 1's plan to be taken.
One switch per run; the explanation is ``Switch.to_json``.

A run with a live source (a broker stream, no end of its own) switches when its feed
outgrows phase 1's plan, not at the end of the window: after ``adapt_after`` seconds the
driver watches the sources' lag in the live metrics and stops at the next checkpoint
once it keeps growing (``adaptive.lag.LagWatch``). A feed that phase 1 keeps up with is
never re-planned; the run ends (``--duration``, Ctrl-C) under phase 1's plan. With
``--duration`` the run ends its sources that long after phase 1 started, phase 2
taking what is left (record 071).
"""

from __future__ import annotations

import math
import shutil
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from spadeopt import api
from spadeopt.deploy.launcher import RunResult, run_master
from spadeopt.deploy.options import RunOptions
from spadeopt.errors import SpadeoptError, UsageError

DEFAULT_ADAPT_AFTER = 5.0  # s of measurement before the switch
DEFAULT_INTERVAL = 1.0  # s between checkpoints when --checkpoint-interval is not given
GAIN = 1.05  # FATM's predicted rate must beat FALL's by this factor to be chosen
SAMPLE_RATE = 0.002
"""Phase 1's sampling rate: a fifth of `spadeopt profile`'s. The refinement in the pause
reads every sample line (peer at 1 %: 36 MB after 5 s, refine 4.9 s of a 7.8 s pause);
a few seconds at full speed still give each operator thousands of samples."""


@dataclass(frozen=True)
class AdaptOptions:
    """``--adaptive``'s settings: the measurement window, the checkpoints, the sampling."""

    adapt_after: float = DEFAULT_ADAPT_AFTER
    interval: float = DEFAULT_INTERVAL
    checkpoint_dir: Path | None = None  # default: WORK/checkpoints
    keep: int = 3
    restart_attempts: int = 3
    sample_rate: float = SAMPLE_RATE
    calibration: Path | None = None
    start: str = "all"  # phase 1's plan: a strategy (all, none, manual) or a plan.json (a given build's)
    widths: Mapping[str, int] | None = None  # phase 1's region widths (--width; default: every region at 1)

    def __post_init__(self) -> None:
        if not (isinstance(self.adapt_after, int | float) and math.isfinite(self.adapt_after)
                and self.adapt_after >= 0):
            raise UsageError(f"--adapt-after must be a number of seconds >= 0 (how long phase 1 measures "
                             f"before the switch), got {self.adapt_after!r}")
        if not (self.interval > 0):
            raise UsageError(f"--checkpoint-interval must be a positive number of seconds, got {self.interval!r}")


@dataclass
class Switch:
    """What ``--adaptive`` saw and did; ``to_json`` is the run's ``adaptive`` record."""

    switched: bool = False
    reason: str = ""
    checkpoint: int | None = None
    measured_s: float = 0.0
    before: dict[str, Any] = field(default_factory=dict)  # phase 1: plan, rate, per-PE busy
    after: dict[str, Any] = field(default_factory=dict)  # phase 2: plan, rate
    predicted: dict[str, Any] = field(default_factory=dict)  # FATM's model: fall, chosen, gain
    refused: list[str] = field(default_factory=list)  # plans the checkpoint could not resume
    pause_s: float | None = None  # stopping checkpoint completed -> every new PE running
    trigger: dict[str, Any] | None = None  # a live feed's lag growth that stopped phase 1 (None: the window)
    profile: str | None = None
    timings: dict[str, float] = field(default_factory=dict)  # refine_s, plan_s: parts of the pause

    def grew(self) -> str:
        """What tripped a live run's switch: "the lag grew by N entries in S s" ('' for the window)."""
        t = self.trigger
        return f"the lag grew by {t['grew_by']:,} entries in {t['over_s']:.1f} s" if t else ""

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("switched", "reason", "checkpoint", "measured_s", "before", "after",
                                              "predicted", "refused", "pause_s", "profile", "timings", "trigger")}


def options_from(app_ref: str, fusion: str | None, widths, resume, adapt_after, interval, directory, keep: int,
                 attempts: int, calibration) -> AdaptOptions:
    """``run --adaptive``'s flags as ``AdaptOptions``; what it cannot combine with, refused."""
    if api.is_build(app_ref):
        if fusion is not None or widths:
            raise UsageError(f"--adaptive starts from the plan of build {app_ref}: drop --fusion and --width")
        fusion = str(Path(app_ref) / "plan.json")
    from spadeopt.optimize.strategies import STRATEGY_BY_NAME

    found = STRATEGY_BY_NAME.get(fusion or "")
    if found is not None and found.needs_profile:
        raise UsageError(f"--adaptive measures the profile {found.label} plans from: start from --fusion all (the "
                         f"default), none, manual or a build's plan.json, not {fusion}")
    if widths and fusion is not None and fusion.endswith(".json"):
        raise UsageError("--width cannot change a plan.json: it records its regions' widths")
    if resume is not None:
        raise UsageError("--adaptive starts a run afresh: it cannot --resume (resume its checkpoint directory "
                         "with `spadeopt run BUILD --resume DIR`)")
    if keep < 1 or attempts < 0:
        raise UsageError(f"--checkpoints-kept must be >= 1 and --restart-attempts >= 0 (got {keep}, {attempts})")
    return AdaptOptions(DEFAULT_ADAPT_AFTER if adapt_after is None else adapt_after,
                        DEFAULT_INTERVAL if interval is None else interval, directory, keep, attempts,
                        calibration=calibration, start=fusion or "all", widths=dict(widths) if widths else None)


def run_adaptive(app_ref: str, params: Mapping[str, str] | None, *, nodes: int, cores: int,
                 work: Path | None, options: RunOptions, adapt: AdaptOptions) -> tuple[RunResult, Switch]:
    """Phase 1 (instrumented FALL, checkpoints), at most one switch, phase 2 (FATM's build
    resumed from the stopping checkpoint). The last phase's ``RunResult`` and the switch."""
    from spadeopt.deploy.checkpoint_store import CheckpointStore
    from spadeopt.deploy.preflight import preflight
    from spadeopt.output_paths import claim_dir

    _refuse_options(options)
    app_ref, params = _app_of(app_ref, params)
    graph, ref = api.load_graph(app_ref, params)
    live = _live_sources(graph)
    if live and options.metrics_port is None:
        raise UsageError(f"--adaptive watches the lag of live source(s) {', '.join(live)} in the run's live metrics: "
                         f"drop --no-metrics")
    if adapt.checkpoint_dir is not None and Path(adapt.checkpoint_dir).exists() \
            and any(Path(adapt.checkpoint_dir).iterdir()):
        raise UsageError(f"--checkpoint-dir {adapt.checkpoint_dir} is not empty: --adaptive starts afresh; choose "
                         f"a new or empty directory")
    if options.out is not None:
        claim_dir(options.out, "sinks", "--out", options.force)
    flag = "--build-dir" if work is not None else "--build-dir (default)"
    work = Path(work) if work is not None else Path("build") / graph.name / "adaptive"
    claim_dir(work, "build", flag, options.force)
    store = CheckpointStore(adapt.checkpoint_dir or work / "checkpoints", adapt.keep, options.say)
    plan = replace(_start_plan(graph, adapt, nodes, cores), instrumented=True, checkpoints=True)
    preflight(graph, options.master, plan.nodes, plan.cores, options.progress)
    run_dir = work / "phase1"
    build1 = api.generate(graph, plan, run_dir / "build", ref)
    store.root.mkdir(parents=True, exist_ok=True)
    sw = Switch()
    session = (run_master(build1.deploy, options), plan.cores)  # the runs' Spark session
    options.say("adaptive: warming up the refinement's Spark query (so the switch does not wait for it)")
    from spadeopt.refine.job import warm_up

    sw.timings["warm_up_s"] = round(warm_up(*session, conf=options.conf), 3)
    options.say(f"adaptive: phase 1 runs '{graph.name}' under {_label(plan)}, instrumented, checkpoints every "
                f"{adapt.interval:g} s; it re-plans after {adapt.adapt_after:g} s at the next checkpoint")
    t_start = time.time()
    result, stop = _measure(build1, plan, store, adapt, options, run_dir, work / "phase1-out", bool(live))
    sw.before = _phase(result, build1)
    if stop is None:
        sw.reason = ("the live sources' lag never kept growing (phase 1's plan kept up with the feed): no switch, "
                     "the run is phase 1's" if live else "the sources ended before the measurement window and a "
                     "checkpoint after it: no switch, the run is phase 1's")
        options.say(f"adaptive: {sw.reason}")
        _finish_unswitched(work / "phase1-out", options.out)
        if options.out is not None:
            _mark_sinks(options.out, result)
        return result, sw
    sw.checkpoint, sw.measured_s, sw.trigger = stop["checkpoint"], stop["measured_s"], stop.get("lag")
    _write_manifest(graph, plan, run_dir, result, adapt)
    build2 = _replan(app_ref, ref, params, graph, run_dir, work, store, adapt, options, plan, sw, session)
    if options.duration is not None:  # the run's sources end --duration after phase 1 started
        options = options.replace(duration=max(1.0, options.duration - (time.time() - t_start)))
    final = _resume(build2, store, adapt, options, sw, stop["t_checkpoint"])
    if options.out is not None:
        _mark_sinks(options.out, final)
    return final, sw


def _app_of(app_ref: str, params: Mapping[str, str] | None) -> tuple[str, Mapping[str, str] | None]:
    """The app and parameters to plan: ``app_ref``'s own, or a given build's (its deploy.json
    records where its app is and the parameters it was built with; ``-p`` overrides)."""
    if not api.is_build(app_ref):
        return app_ref, params
    from spadeopt.plan.artefacts import load_deploy

    d = load_deploy(app_ref)
    return d.app_ref, {**{k: str(v) for k, v in d.params.items()}, **(params or {})}


def _start_plan(graph, adapt: AdaptOptions, nodes: int, cores: int):
    """Phase 1's plan (not yet instrumented): FALL with every region at width 1 by default,
    another strategy, or a given plan.json, whose fingerprint must be the app's."""
    start = api.plan_file(adapt.start, adapt.widths)
    if isinstance(start, str):
        widths = {name: 1 for name, _, _ in graph.annotations.parallel} | dict(adapt.widths or {})
        return api.make_plan(graph, start, nodes, cores, widths)
    if start.fingerprint != graph.fingerprint:
        raise UsageError(f"{adapt.start} is a plan of another version of '{graph.name}' (its graph differs): "
                         f"rebuild it, or start from --fusion all")
    return replace(start, instrumented=False, checkpoints=False)


def _label(plan) -> str:
    """A plan as the messages name it: FALL, NONE, FMAN, FATM (``optimize.strategies``)."""
    from spadeopt.optimize.strategies import label_of

    return label_of(plan.strategy)


def _refuse_options(options: RunOptions) -> None:
    if options.checkpoints is not None:
        raise UsageError("--adaptive takes its own checkpoints: give their interval and directory in AdaptOptions")
    if options.verify_fission is not None:
        raise UsageError("--adaptive cannot be combined with --verify-fission")
    if options.insecure_links:
        raise UsageError("--adaptive switches at a checkpoint, and checkpoints need authenticated links: "
                         "drop --insecure-links")


def _live_sources(graph) -> list[str]:
    """The app's live sources (broker streams): their lag says when the feed outgrows the plan."""
    from spadeopt.connectors.declared import is_live
    from spadeopt.deploy.preflight import connectors
    from spadeopt.kinds import kind_of

    return [op for op, factory, _ in connectors(graph)
            if kind_of(graph.op(op)).generator(graph.op(op)) is not None and is_live(*factory.split(":", 1))]


def _measure(build, plan, store, adapt: AdaptOptions, options: RunOptions, run_dir: Path,
             scratch: Path, live: bool = False) -> tuple[RunResult, dict[str, Any] | None]:
    """Run phase 1 as a checkpointed run (a failed PE restarts from the last checkpoint,
    ``--restart-attempts``); stop its sources at the first checkpoint completed after the
    window (with a live source: after the window, once its lag keeps growing,
    ``_LagTrigger``). The run's result, and the stop (checkpoint id, times, the lag's
    growth) or None when the run ended first (its sinks then complete in ``scratch``)."""
    from spadeopt.deploy import checkpointed_run
    from spadeopt.deploy.launcher import request_stop
    from spadeopt.plan.deployment import Sampling

    t0 = time.time()
    stop: dict[str, Any] = {}
    done = threading.Event()
    attempts: list = []  # the run's Recovery (its coord: the current attempt's coordinator)
    trigger = _LagTrigger(options) if live else None
    run_options = options.replace(out=scratch, on_live=trigger.on_live) if trigger else options.replace(out=scratch)
    when = ("once the live sources' lag keeps growing" if live else "at the first checkpoint")
    view = {"adaptive": {"phase": 1, "plan": f"{_label(plan)}, {len(build.deploy.pes)} PE(s), instrumented: measuring",
                         "why": f"re-plans with FATM after {adapt.adapt_after:g} s, {when}"}}
    run_options = run_options.replace(live_extras=lambda: view)

    def watch(rec) -> None:
        seen, coord = 0, None
        while not done.wait(0.02):
            if rec.coord is not coord:  # a restart: the new attempt's coordinator
                seen, coord = 0, rec.coord
            running = rec.first.t_running  # the window starts when every PE runs (not at Spark's start)
            if not running or time.time() - running < adapt.adapt_after or (trigger and not trigger.fired()):
                seen = len(coord.completed)
                continue
            if len(coord.completed) > seen:  # a checkpoint completed after the window: stop at it
                stop.update(checkpoint=coord.completed[-1], t_checkpoint=coord.t_last,
                            measured_s=round(time.time() - running, 3))
                if trigger:
                    stop["lag"] = trigger.said
                request_stop(build.directory / "progress")
                return

    def on_start(rec) -> None:
        attempts.append(rec)
        threading.Thread(target=watch, args=(rec,), daemon=True, name="adaptive-watch").start()

    ck = checkpointed_run.CheckpointOptions(adapt.interval, store.root, adapt.keep, adapt.restart_attempts)
    sampling = Sampling(adapt.sample_rate, 5000, 0, str(run_dir.resolve()))
    try:
        result = checkpointed_run.run(build.directory, run_options, ck, sampling=sampling, on_start=on_start)
    finally:
        done.set()
    if not stop:
        return result, None
    # one more may have completed before the sources saw the stop: the resume takes the newest
    coord = attempts[0].coord
    if coord.completed:
        stop.update(checkpoint=coord.completed[-1], t_checkpoint=coord.t_last)
    stop.update(started=t0, finished=time.time())
    return result, stop


class _LagTrigger:
    """Phase 1's live sources' lag, from the run's live metrics (their server is handed to
    ``on_live``), sampled at most twice a second by the watch thread; ``fired()`` once
    ``LagWatch`` says it keeps growing (then it stays fired; ``said`` tells how)."""

    def __init__(self, options: RunOptions) -> None:
        from spadeopt.adaptive.lag import LagWatch

        self._user = options.on_live
        self._server: Any = None
        self._watch = LagWatch()
        self._last = 0.0
        self.said: dict[str, Any] | None = None

    def on_live(self, server: Any) -> None:
        self._server = server
        if self._user is not None:
            self._user(server)

    def fired(self) -> bool:
        now = time.time()
        if self.said is not None or self._server is None or now - self._last < 0.5:
            return self.said is not None
        self._last = now
        rows = self._server.state()["sources"]
        lags = [r["lag"] for r in rows if r.get("live") and isinstance(r.get("lag"), int)]
        if lags and self._watch.add(now, sum(lags)):
            grew, lag, over = self._watch.growth()
            self.said = {"grew_by": int(grew), "lag": lag, "over_s": round(over, 3), "at": now}
        return self.said is not None


def _finish_unswitched(scratch: Path, out: Path | None) -> None:
    """Phase 1 ran to its end: its sinks (completed in ``scratch`` by the checkpointed
    run: committed lines, then its tail) are the run's."""
    if out is None:
        return
    Path(out).mkdir(parents=True, exist_ok=True)
    for p in sorted(scratch.glob("*.jsonl")):
        shutil.move(str(p), str(Path(out) / p.name))


def _phase(result: RunResult, build) -> dict[str, Any]:
    """A phase's plan and what was measured of it: source rate, each PE's busy (CPU / wall).
    ``widths``: the plan's regions wider than 1 (its ``plan.json``)."""
    deploy = build.deploy
    busy = {p["pe"]: round(p["cpu_s"] / p["wall_s"], 3) for p in result.per_pe
            if p.get("wall_s") and "cpu_s" in p and "pe" in p}
    return {"strategy": deploy.strategy, "pes": len(deploy.pes),
            "plan": {p.pe: list(p.operators) for p in deploy.pes},
            "widths": _widths(build),
            "instrumented": bool(getattr(deploy, "instrumented", False)),
            "rate": result.throughput, "steady_rate": result.steady_throughput, "tuples": result.tuples,
            "wall_s": result.wall_s, "busy": busy,
            "restarts": [r["cause"] for r in (result.checkpoints or {}).get("restarts", [])]}


def _widths(build) -> dict[str, int]:
    """A build's regions wider than 1 and their widths (its ``plan.json``)."""
    return {r.name: r.width for r in build.plan.regions if r.width > 1}


def _write_manifest(graph, plan, run_dir: Path, result: RunResult, adapt: AdaptOptions) -> None:
    """Phase 1's run directory as ``spadeopt profile`` writes it, so ``refine`` reads it."""
    import platform

    from spadeopt.profiling import Manifest, host_info, write_manifest
    from spadeopt.profiling.records import pe_file

    host = host_info()
    t_end = time.time()
    write_manifest(run_dir, Manifest(
        app=graph.name, graph_fingerprint=graph.fingerprint, plan=plan.to_json(), params=dict(graph.params),
        host=host.host or platform.node(), cores=host.cores, cpu_model=host.cpu_model, duration=result.wall_s,
        seed=0, sample_rate=adapt.sample_rate, reservoir_size=5000, started=t_end - result.wall_s,
        finished=t_end, pe_files=tuple(pe_file(pe.pe_id) for pe in plan.pes)))


def _replan(app_ref: str, ref: str, params, graph, run_dir: Path, work: Path, store, adapt: AdaptOptions,
            options: RunOptions, start, sw: Switch, session: tuple[str | None, int]):
    """Phase 1's samples -> a profile (``refine``, on Spark) -> the build phase 2 runs: FATM's
    plan when the model predicts a gain over phase 1's plan ``start`` and the checkpoint
    can move to it; else FATM at phase 1's widths; else ``start``'s production build
    (every step said in ``sw``)."""
    from spadeopt.refine.job import refine

    profile_path = work / "profile.json"
    options.say("adaptive: refining phase 1's samples into a profile (Spark, as `spadeopt refine`)")
    t0 = time.time()
    refine([run_dir], profile_path, session[0], session[1], progress=options.say, conf=options.conf)
    sw.profile, sw.timings["refine_s"], t0 = str(profile_path), round(time.time() - t0, 3), time.time()
    build = _choose(app_ref, ref, params, graph, profile_path, work, store, adapt, start, sw)
    sw.timings["plan_s"] = round(time.time() - t0, 3)
    return build


def _choose(app_ref: str, ref: str, params, graph, profile_path: Path, work: Path, store, adapt: AdaptOptions,
            start, sw: Switch):
    """FATM's build if predicted faster than phase 1's plan ``start`` and resumable; else
    FATM at phase 1's widths; else ``start``'s production build."""
    base = replace(start, instrumented=False, checkpoints=False)
    label0, base_rate = _label(base), _predict(graph, profile_path, base, adapt)
    sw.predicted = {"start": base_rate, "start_plan": label0}
    widths = {r.name: r.width for r in base.regions}
    kept = {"fission": False} if all(w == 1 for w in widths.values()) else {"widths": widths}
    tries = (("FATM", "fatm", {}), ("FATM at phase 1's widths", "fatm-kept", kept))
    for label, name, kw in tries:
        try:
            build, explain = api.optimize(app_ref, profile_path, work / name, adapt.calibration, params,
                                          nodes=base.nodes, cores=base.cores, checkpoints=True, **kw)
        except SpadeoptError as exc:
            sw.refused.append(f"{label}: {str(exc).splitlines()[0]}")
            continue
        rate = (explain.get("rate") or {}).get("predicted")
        sw.predicted[name] = rate
        if not rate or not base_rate or rate < base_rate * GAIN:
            sw.reason = (f"{label} is predicted at {_r(rate)}/s, {label0} at {_r(base_rate)}/s: no gain of "
                         f"{GAIN:g}x; phase 2 runs {label0}'s production build (not instrumented)")
            break
        problem = _cannot_resume(build, store)
        if problem:
            sw.refused.append(f"{label}: {problem}")
            continue
        sw.reason = (f"{label} is predicted at {_r(rate)}/s, {label0} at {_r(base_rate)}/s "
                     f"({rate / base_rate:.2f}x): the plan no longer fits; switching to it")
        sw.predicted.update(chosen=name, gain=rate / base_rate)
        return build
    else:
        sw.reason = f"no FATM plan could resume phase 1's checkpoint: phase 2 runs {label0}'s production build"
    sw.predicted.update(chosen="start", gain=1.0)
    return api.generate(graph, replace(base, checkpoints=True), work / "start", ref)


def _cannot_resume(build, store) -> str | None:
    """Why the checkpoint cannot resume under ``build`` exactly once (a width 068 does not
    move, a PE cycle no barrier crosses), or None.
    Tried on a quiet view of the store."""
    from spadeopt.deploy.checkpoint_rescale import load_facts
    from spadeopt.deploy.checkpoint_store import CheckpointStore
    from spadeopt.deploy.checkpointed_run import pe_cycle

    cycle = pe_cycle(build.deploy)
    if cycle:
        return f"its PEs form a cycle ({' -> '.join(cycle)}), which an aligned barrier cannot cross"
    try:
        CheckpointStore(store.root, store.keep, lambda line: None).latest(build.deploy, load_facts(build.directory))
    except SpadeoptError as exc:
        return str(exc).splitlines()[0]
    return None


def _predict(graph, profile_path: Path, plan, adapt: AdaptOptions) -> float | None:
    """FATM's model's source rate of ``plan`` from the profile (``api.predict_build``'s)."""
    from spadeopt.optimize.fatm import predict_plan
    from spadeopt.refine.comm import CommCost
    from spadeopt.refine.profile import Profile

    calibration = Path(adapt.calibration or api.default_calibration())
    comm = CommCost.for_this_host(calibration, None)
    try:
        pred = predict_plan(graph, api.operator_profile(Profile.load_file(profile_path)), plan, comm,
                            api.perf_model(calibration, comm.scale))
    except SpadeoptError:
        return None
    return pred.rate


def _resume(build, store, adapt: AdaptOptions, options: RunOptions, sw: Switch, t_checkpoint: float) -> RunResult:
    """Phase 2: ``build`` resumed from the newest checkpoint (regrouped, rescaled), to the end."""
    from spadeopt.deploy import checkpointed_run

    ck = checkpointed_run.CheckpointOptions(adapt.interval, store.root, adapt.keep, adapt.restart_attempts,
                                            resume=True)
    options.say(f"adaptive: phase 2 resumes checkpoint {sw.checkpoint} under {build.deploy.strategy} "
                f"({len(build.deploy.pes)} PE(s))")
    b = sw.before
    view = {"adaptive": {
        "phase": 2, "plan": f"{build.deploy.strategy}, {len(build.deploy.pes)} PE(s), widths {_widths(build) or 'all 1'}",
        "switch": (f"switched at checkpoint {sw.checkpoint} from {b.get('strategy')} ({b.get('pes')} PE(s), "
                   f"{_r(b.get('steady_rate'))} tuples/s measured)" + (f" when {sw.grew()}" if sw.trigger else "")),
        "why": sw.reason, "checkpoint": sw.checkpoint, "predicted": sw.predicted}}
    result = checkpointed_run.run(build.directory, options.replace(live_extras=lambda: view), ck)
    sw.switched = True
    sw.after = _phase(result, build)
    running = (result.checkpoints or {}).get("running_at")
    sw.pause_s = round(running - t_checkpoint, 3) if running and t_checkpoint else None
    return result


def switch_lines(sw: Switch) -> list[str]:
    """The switch explained, for the run's output."""
    b, a = sw.before, sw.after
    if not sw.switched:
        return [f"adaptive: {sw.reason}"]
    busy = ", ".join(f"{pe} {v:.0%}" for pe, v in sorted(b.get("busy", {}).items()))
    pause = f"{sw.pause_s:.2f} s" if sw.pause_s is not None else "not measured"
    return [
        f"adaptive switch at checkpoint {sw.checkpoint} after {sw.measured_s:.1f} s of phase 1 "
        f"({b['strategy']}, {b['pes']} PE(s), instrumented) measured {_r(b['steady_rate'])} tuples/s, busy {busy}",
        *([f"  trigger: the live sources' {sw.grew()[4:]} (to {sw.trigger['lag']:,}): the feed outgrew the plan"]
          if sw.trigger else []),
        f"  decision: {sw.reason}",
        *(f"  refused: {r}" for r in sw.refused),
        f"  phase 2 ({a['strategy']}, {a['pes']} PE(s) {_pes(a['plan'])}, widths {a['widths'] or 'all 1'}) "
        f"measured {_r(a['steady_rate'])} tuples/s",
        f"  pause {pause}: checkpoint {sw.checkpoint} completed -> every new PE running (stop, drain, refine "
        f"{sw.timings.get('refine_s', 0):.1f} s, plan {sw.timings.get('plan_s', 0):.1f} s, restore)"]


def _pes(plan: dict[str, list[str]]) -> str:
    return "[" + "; ".join(f"{pe}: {' '.join(ops)}" for pe, ops in sorted(plan.items())) + "]"


def _r(rate: float | None) -> str:
    return "?" if rate is None else f"{rate:,.0f}"


def _mark_sinks(out: Path, result: RunResult) -> None:
    from spadeopt.output_paths import mark_dir

    mark_dir(out, "sinks", (f"{name}.jsonl" for name in result.sinks if (Path(out) / f"{name}.jsonl").exists()))
