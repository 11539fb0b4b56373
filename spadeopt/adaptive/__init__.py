"""``spadeopt run APP --adaptive``: measure under FALL, re-plan with FATM, switch at a
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
A bounded run switches once; the explanation is ``Switch.to_json``.

A run with a live source (a broker stream, no end of its own) switches when its feed
outgrows phase 1's plan, not at the end of the window: after ``adapt_after`` seconds the
driver watches the sources' lag in the live metrics and stops at the next checkpoint
once it keeps growing (``adaptive.lag.LagWatch``). A feed that phase 1 keeps up with is
never re-planned; the run ends (``--duration``, Ctrl-C) under phase 1's plan. With
``--duration`` the run ends its sources that long after phase 1 started, phase 2
taking what is left (record 071).

A live run keeps watching after its first switch (record 073): every later phase runs
instrumented too, and switches again when its lag keeps growing (FATM for the run's
cores; also when a PE stays above MaxFrac while a core idles, ``lag.SaturatedWatch``,
unless FATM planned the running plan for the run's cores: it was widened already)
or when its PEs idle (``lag.IdleWatch``: FATM for the fewest cores predicted at
``HEADROOM`` x the feed's rate), at most ``max_switches`` times. A decision that keeps
the running plan turns its rule off until the other rule switches (hysteresis beside each
phase's ``adapt_after`` and the rules' windows). A plan an up switch chose that reads
slower, while its lag grows, than the plan before it sustained is switched back from
(``choose.measured_slower``); the up rule is then off until the run scales down. Where
the decision is made while the phase runs (``ahead``, record 076), a live phase is also
reviewed every ``REVIEW_S`` seconds: FATM for its own cores on fresh costs, taken when
predicted ``REVIEW_GAIN`` x the running plan (a kept review costs no stop). Modules: ``settings``,
``watch`` (a phase's run and its triggers), ``lag`` (the rules), ``choose`` (the
decision), ``switch`` (the record and its lines).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from spadeopt import api
from spadeopt.adaptive.choose import cannot_resume, label, measured_slower, replan, switch_back
from spadeopt.adaptive.settings import (
    DEFAULT_ADAPT_AFTER,
    DEFAULT_INTERVAL,
    GAIN,
    HEADROOM,
    MAX_SWITCHES,
    REVIEW_S,
    SAMPLE_RATE,
    AdaptOptions,
    options_from,
)
from spadeopt.adaptive.switch import Switch, phase_record, rate, switch_lines, widths_of
from spadeopt.adaptive.watch import measure
from spadeopt.deploy.launcher import RunResult, run_master
from spadeopt.deploy.options import RunOptions
from spadeopt.errors import UsageError

__all__ = ["DEFAULT_ADAPT_AFTER", "DEFAULT_INTERVAL", "GAIN", "HEADROOM", "MAX_SWITCHES", "SAMPLE_RATE",
           "AdaptOptions", "Switch", "cannot_resume", "options_from", "run_adaptive", "switch_lines"]


def run_adaptive(app_ref: str, params: Mapping[str, str] | None, *, nodes: int, cores: int,
                 work: Path | None, options: RunOptions, adapt: AdaptOptions) -> tuple[RunResult, Switch]:
    """Phase 1 (instrumented FALL, checkpoints), a switch, phase 2 (FATM's build resumed
    from the stopping checkpoint); a live run keeps watching (``_keep_watching``). The
    last phase's ``RunResult`` and the first switch (the later ones in its ``later``)."""
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
    options.say(f"adaptive: phase 1 runs '{graph.name}' under {label(plan)}, instrumented, checkpoints every "
                f"{adapt.interval:g} s; it re-plans after {adapt.adapt_after:g} s at the next checkpoint")
    t_start = time.time()
    when = ("once the live sources' lag keeps growing or a PE stays above MaxFrac" if live
            else "at the first checkpoint")
    view = {"adaptive": {"phase": 1, "plan": f"{label(plan)}, {len(build1.deploy.pes)} PE(s), instrumented: measuring",
                         "why": f"re-plans with FATM after {adapt.adapt_after:g} s, {when}"}}
    app = (app_ref, ref, params)
    decide, ahead = _decider(app, graph, build1, run_dir, work, store, adapt, options, session, plan.cores, None,
                             None, sw, bool(live))
    result, stop = measure(build1, store, adapt, options, run_dir, work / "phase1-out", view, live=bool(live),
                           decide=ahead, review=REVIEW_S if ahead and adapt.max_switches > 1 else None)
    sw.before = phase_record(result, build1)
    if stop is None:
        sw.reason = ("the live sources' lag never kept growing and no PE stayed above MaxFrac (phase 1's plan kept "
                     "up with the feed): no switch, "
                     "the run is phase 1's" if live else "the sources ended before the measurement window and a "
                     "checkpoint after it: no switch, the run is phase 1's")
        if ahead is not None and ahead.asked and not live:
            sw.reason = ("the sources ended while the switch was being decided (after the measurement window): no "
                         "switch, the run is phase 1's; a longer run, or a shorter --adapt-after, leaves time for it")
        options.say(f"adaptive: {sw.reason}")
        return _finished(result, work / "phase1-out", options.out), sw
    sw.checkpoint, sw.measured_s, sw.trigger = stop["checkpoint"], stop["measured_s"], stop.get("lag")
    build2 = (ahead and ahead.build) or decide(sw, result.wall_s)
    if live and adapt.max_switches > 1:
        return _keep_watching(app, graph, build2, store, adapt, options, sw, stop["t_checkpoint"], session,
                              t_start, work, plan), sw
    final = _resume(build2, store, adapt, _left(options, t_start), sw, stop["t_checkpoint"])
    if options.out is not None:
        _mark_sinks(options.out, final)
    return final, sw


def _keep_watching(app, graph, build, store, adapt: AdaptOptions, options: RunOptions, first: Switch,
                   t_checkpoint: float, session, t_start: float, work: Path, previous) -> RunResult:
    """A live run's phases 2, 3, ...: each runs the last switch's plan instrumented from
    the newest checkpoint and switches again when a rule trips, or back to ``previous``
    (the plan of the phase before) when it measured slower (module doc). The last phase's
    result (its sinks moved to ``--out``)."""
    k, into, rules, before = 2, first, {"up": True, "down": True}, previous
    while True:
        plan = replace(build.plan, instrumented=True, checkpoints=True)
        build_k = api.generate(graph, plan, work / f"phase{k}" / "build", app[1])
        left = adapt.max_switches - len(first.every)
        up, down = rules["up"] and left > 0, rules["down"] and left > 0 and plan.cores > 1
        full = up and into.predicted.get("chosen") != "fatm"  # FATM's for the run's cores was already widened
        options.say(f"adaptive: phase {k} resumes checkpoint {into.checkpoint} under {label(plan)} "
                    f"({len(build_k.deploy.pes)} PE(s)), instrumented; watching: "
                    + (", ".join(w for w, on in (("the lag", up), ("MaxFrac", full), ("idle PEs", down)) if on)
                       or "nothing (no switch left)"))
        nxt = Switch(phase=k)
        decide, ahead = _decider(app, graph, build_k, work / f"phase{k}", work / f"switch{k}", store, adapt, options,
                                 session, first.before.get("cores") or plan.cores, into, before, nxt, True)
        result, stop = measure(build_k, store, adapt, _left(options, t_start), work / f"phase{k}",
                               work / f"phase{k}-out", _view(k, build_k, into, up, down), live=True, down=down,
                               up=up, resume=True, cores=first.before.get("cores") or plan.cores, full=full,
                               decide=ahead, review=REVIEW_S if ahead and left > 0 else None)
        _landed(into, result, build_k, t_checkpoint)
        nxt.before = phase_record(result, build_k)
        if stop is None:
            if nxt.kept:  # decisions that kept this last phase's plan: said with the others
                nxt.reason = nxt.kept[-1]["reason"]
                first.later.append(nxt)
            return _finished(result, work / f"phase{k}-out", options.out)
        nxt.checkpoint, nxt.measured_s, nxt.trigger = stop["checkpoint"], stop["measured_s"], stop.get("lag")
        first.later.append(nxt)
        build = (ahead and ahead.build) or decide(nxt, result.wall_s)
        kept = nxt.predicted.get("chosen") in ("start", "back")  # back: scale up no more until scaled down
        rules = {**rules, nxt.direction or "up": False} if kept else {"up": True, "down": True}
        k, into, t_checkpoint, before = k + 1, nxt, stop["t_checkpoint"], plan


def _decider(app, graph, build, run_dir: Path, work: Path, store, adapt: AdaptOptions, options: RunOptions, session,
             cores: int, into: Switch | None, before, sw: Switch, live: bool):
    """The decision of the phase running ``build`` (sampling into ``run_dir``; entered by
    switch ``into`` from the plan ``before``; None: phase 1), as ``decide(sw, wall_s)`` ->
    the next phase's build: back to ``before`` when the phase measured slower than it
    (``choose.measured_slower``), else ``choose.replan``; and the ``ahead.Ahead`` that makes
    it while the phase runs (None on a cluster). Each decision of the phase gets its own
    directory under ``work``."""
    from spadeopt.adaptive.ahead import Ahead
    from spadeopt.deploy.masters import is_local_mode

    def decide(s: Switch, wall_s: float, running: bool = False):
        where = work / f"decision{len(s.kept)}" if s.kept else work
        slower = into and measured_slower(into, s.trigger)
        back = slower and switch_back(app, graph, where, store, before, s, slower)
        return back or replan(app, graph, run_dir, where, store, adapt, options, build.plan, wall_s, s, session,
                              cores, running)

    ahead = Ahead(sw, partial(decide, running=True), build, run_dir, options.say, live) \
        if is_local_mode(options.master) else None
    return decide, ahead


def _view(k: int, build, into: Switch, up: bool, down: bool) -> dict[str, Any]:
    """The job page's ``adaptive`` section for phase ``k`` (entered by switch ``into``)."""
    b = into.before
    watching = [w for w, on in (("re-plans when the lag keeps growing or a PE stays above MaxFrac", up),
                                ("scales down when the PEs idle", down))
                if on]
    return {"adaptive": {
        "phase": k, "plan": f"{build.deploy.strategy}, {len(build.deploy.pes)} PE(s), widths "
                            f"{widths_of(build) or 'all 1'}",
        "switch": (f"switched at checkpoint {into.checkpoint} from {b.get('strategy')} ({b.get('pes')} PE(s), "
                   f"{rate(b.get('steady_rate'))} tuples/s measured)" + (f" when {into.grew()}" if into.trigger else "")),
        "why": into.reason + ("; " + ", ".join(watching) if watching else ""), "checkpoint": into.checkpoint,
        "predicted": into.predicted}}


def _landed(sw: Switch, result: RunResult, build, t_checkpoint: float) -> None:
    """The phase ``sw`` started has run: its record and the pause."""
    sw.switched = True
    sw.after = phase_record(result, build)
    running = (result.checkpoints or {}).get("running_at")
    sw.pause_s = round(running - t_checkpoint, 3) if running and t_checkpoint else None


def _left(options: RunOptions, t_start: float) -> RunOptions:
    """``options`` with what is left of ``--duration`` (which counts from phase 1's start)."""
    if options.duration is None:
        return options
    return options.replace(duration=max(1.0, options.duration - (time.time() - t_start)))


def _finished(result: RunResult, scratch: Path, out: Path | None) -> RunResult:
    """A phase ran to its end: its sinks (completed in ``scratch`` by the checkpointed run:
    committed lines, then its tail) are the run's."""
    if out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
        for p in sorted(scratch.glob("*.jsonl")):
            shutil.move(str(p), str(Path(out) / p.name))
        _mark_sinks(out, result)
    return result


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



def _resume(build, store, adapt: AdaptOptions, options: RunOptions, sw: Switch, t_checkpoint: float) -> RunResult:
    """Phase 2 of a bounded run: ``build`` resumed from the newest checkpoint (regrouped,
    rescaled), to the end, not instrumented."""
    from spadeopt.deploy import checkpointed_run

    ck = checkpointed_run.CheckpointOptions(adapt.interval, store.root, adapt.keep, adapt.restart_attempts,
                                            resume=True)
    options.say(f"adaptive: phase 2 resumes checkpoint {sw.checkpoint} under {build.deploy.strategy} "
                f"({len(build.deploy.pes)} PE(s))")
    view = _view(2, build, sw, False, False)
    result = checkpointed_run.run(build.directory, options.replace(live_extras=lambda: view), ck)
    _landed(sw, result, build, t_checkpoint)
    return result


def _mark_sinks(out: Path, result: RunResult) -> None:
    from spadeopt.output_paths import mark_dir

    mark_dir(out, "sinks", (f"{name}.jsonl" for name in result.sinks if (Path(out) / f"{name}.jsonl").exists()))
