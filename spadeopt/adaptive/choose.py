"""A switch's decision: the stopped phase's samples -> a profile -> the plan the next phase
runs (records 069, 071; scaling down: docs/decisions/073-adaptive-runs-keep-watching.md).

Up (the measurement window, or a live feed's lag kept growing): FATM for the run's cores,
taken when predicted ``GAIN`` x the running plan and the checkpoint resumes under it;
else FATM at the running plan's widths; else the running plan. Down (a live run's plan
idled): the plan of FATM for the fewest cores, 1, 2, ..., below the running plan's, that
is predicted at ``HEADROOM`` x the feed's rate and resumable; else the running plan.
Back (``measured_slower``): a plan an up switch chose whose lag grows while its sources
read under ``SLOWER`` x what the plan before it sustained is measured slower than the
model said; the run switches back to the plan before (no refinement: its build is made
again), and scales up no more until it has scaled down."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from spadeopt import api
from spadeopt.adaptive.settings import GAIN, HEADROOM, REVIEW_GAIN, SLOWER, AdaptOptions
from spadeopt.adaptive.switch import Switch, rate
from spadeopt.errors import SpadeoptError


def label(plan) -> str:
    """A plan as the messages name it: FALL, NONE, FMAN, FATM (``optimize.strategies``)."""
    from spadeopt.optimize.strategies import label_of

    return label_of(plan.strategy)


def write_manifest(graph, plan, run_dir: Path, wall_s: float, adapt: AdaptOptions) -> None:
    """A phase's run directory as ``spadeopt profile`` writes it, so ``refine`` reads it
    (``wall_s``: how long the phase has run)."""
    import platform

    from spadeopt.profiling import Manifest, host_info
    from spadeopt.profiling import write_manifest as write
    from spadeopt.profiling.records import pe_file

    host = host_info()
    t_end = time.time()
    write(run_dir, Manifest(
        app=graph.name, graph_fingerprint=graph.fingerprint, plan=plan.to_json(), params=dict(graph.params),
        host=host.host or platform.node(), cores=host.cores, cpu_model=host.cpu_model, duration=wall_s,
        seed=0, sample_rate=adapt.sample_rate, reservoir_size=5000, started=t_end - wall_s,
        finished=t_end, pe_files=tuple(pe_file(pe.pe_id) for pe in plan.pes)))


def profile_of(graph, plan, run_dir: Path, out: Path, options, session: tuple[str | None, int],
               running: bool = False) -> None:
    """Refine a phase's samples (Spark, as ``spadeopt refine``; ``running``: in the driver,
    the phase holding Spark's slots) into the profile ``out``; a plan with regions wider
    than 1 has its channel copies folded onto the logical operators (``refine.fold``),
    which FATM plans from."""
    from spadeopt.refine.fold import fold_copies
    from spadeopt.refine.job import refine

    prof = refine([run_dir], None, session[0], session[1], progress=options.say, conf=options.conf,
                  in_driver=running)
    fold_copies(prof, graph, plan.regions).save(out)


def replan(app: tuple[str, str, object], graph, run_dir: Path, work: Path, store, adapt: AdaptOptions,
           options, running, wall_s: float, sw: Switch, session: tuple[str | None, int], cores: int,
           ahead: bool = False):
    """A phase's samples -> a profile -> the build the next phase runs (the module doc;
    every step said in ``sw``). ``app``: its reference, ``ref`` and params; ``running``:
    the phase's plan, ``wall_s`` how long it ran (``ahead``: it runs still, ``adaptive.ahead``);
    ``cores``: the run's."""
    write_manifest(graph, running, run_dir, wall_s, adapt)
    profile_path = work / "profile.json"
    options.say(f"adaptive: refining phase {sw.phase}'s samples into a profile (as `spadeopt refine`)")
    t0 = time.time()
    profile_of(graph, running, run_dir, profile_path, options, session, ahead)
    sw.profile, sw.timings["refine_s"], t0 = str(profile_path), round(time.time() - t0, 3), time.time()
    if sw.direction == "down":
        build = choose_smaller(app, graph, profile_path, work, store, adapt, running, sw)
    elif (sw.trigger or {}).get("rule") == "review":  # the same cores, a plan clearly better
        build = choose(app, graph, profile_path, work, store, adapt, running, sw, running.cores, REVIEW_GAIN)
    else:
        build = choose(app, graph, profile_path, work, store, adapt, running, sw, cores)
    sw.timings["plan_s"] = round(time.time() - t0, 3)
    return build


def choose(app, graph, profile_path: Path, work: Path, store, adapt: AdaptOptions, start, sw: Switch, cores: int,
           gain: float = GAIN):
    """FATM's build for ``cores`` if predicted ``gain`` x the running plan ``start`` and
    resumable; else FATM at the running plan's widths; else ``start``'s production build."""
    base = replace(start, instrumented=False, checkpoints=False)
    label0, base_rate = label(base), predict(graph, profile_path, base, adapt)
    sw.predicted = {"start": base_rate, "start_plan": label0}
    widths = {r.name: r.width for r in base.regions}
    kept = {"fission": False} if all(w == 1 for w in widths.values()) else {"widths": widths}
    tries = (("FATM", "fatm", {}), (f"FATM at phase {sw.phase}'s widths", "fatm-kept", kept))
    for what, name, kw in tries:
        got = _fatm(app, profile_path, work / name, adapt, base.nodes, cores, sw, what, name, **kw)
        if got is None:
            continue
        build, predicted = got
        if not predicted or not base_rate or predicted < base_rate * gain:
            sw.reason = (f"{what} is predicted at {rate(predicted)}/s, {label0} at {rate(base_rate)}/s: no gain of "
                         f"{gain:g}x; phase {sw.phase + 1} runs {label0}'s plan")
            break
        if not _resumable(build, store, sw, what):
            continue
        sw.reason = (f"{what} is predicted at {rate(predicted)}/s, {label0} at {rate(base_rate)}/s "
                     f"({predicted / base_rate:.2f}x): the plan no longer fits; switching to it")
        sw.predicted.update(chosen=name, gain=predicted / base_rate)
        return build
    else:
        sw.reason = f"no FATM plan could resume the checkpoint: phase {sw.phase + 1} runs {label0}'s plan"
    return _keep(graph, base, work, app, sw)


def choose_smaller(app, graph, profile_path: Path, work: Path, store, adapt: AdaptOptions, start, sw: Switch):
    """Scaling down: FATM's build for the fewest cores below the running plan's that is
    predicted at ``HEADROOM`` x the feed's rate (the trigger's) and resumable; else
    ``start``'s (``sw.predicted["chosen"] == "start"``)."""
    base = replace(start, instrumented=False, checkpoints=False)
    feed = float((sw.trigger or {}).get("rate") or 0.0)
    need = HEADROOM * feed
    sw.predicted = {"start": predict(graph, profile_path, base, adapt), "start_plan": label(base),
                    "feed": feed, "need": need}
    for c in range(1, base.cores):
        what = f"FATM for {c} core(s)"
        got = _fatm(app, profile_path, work / f"fatm-{c}-cores", adapt, base.nodes, c, sw, what, f"cores_{c}")
        if got is None or not got[1] or got[1] < need or not _resumable(got[0], store, sw, what):
            continue
        build, predicted = got
        sw.reason = (f"{what} ({len(build.deploy.pes)} PE(s)) is predicted at {rate(predicted)}/s, "
                     f"{predicted / feed if feed else float('inf'):.1f}x the feed's {rate(feed)}/s (at least "
                     f"{HEADROOM:g}x): scaling down to it from {base.cores} core(s)")
        sw.predicted.update(chosen=f"cores_{c}", gain=None)
        return build
    sw.reason = (f"no plan for fewer than {base.cores} core(s) is predicted at {HEADROOM:g}x the feed's "
                 f"{rate(feed)}/s: phase {sw.phase + 1} keeps the plan")
    return _keep(graph, base, work, app, sw)


def measured_slower(into: Switch, said: dict | None) -> str | None:
    """Why the plan switch ``into`` chose (an up switch to another plan) measured slower
    than the plan it replaced, or None. ``said``: the trigger that stopped its phase. It
    counts only when that trigger is a growing lag (the sources then read as fast as the
    plan goes) and ``into``'s records the rate the plan before read while its own rule held
    (at least what that plan sustains). It assumes each tuple costs alike in both phases.

    >>> up = Switch(phase=1, trigger={"direction": "up", "rule": "lag", "rate": 900.0},
    ...             predicted={"chosen": "fatm", "gain": 1.8})
    >>> measured_slower(up, {"direction": "up", "rule": "lag", "rate": 700.0})
    "phase 2's plan read 700 entries/s while its lag grew, under 0.95x the 900/s phase 1's plan read (predicted 1.80x)"
    >>> measured_slower(up, {"direction": "up", "rule": "lag", "rate": 1500.0}) is None
    True
    """
    if not said or said.get("rule") != "lag" or into.direction != "up" or into.predicted.get("chosen") in (
            None, "start", "back"):
        return None
    old, new = (into.trigger or {}).get("rate"), said.get("rate")
    if not old or new is None or new >= SLOWER * old:
        return None
    gain = into.predicted.get("gain")
    return (f"phase {into.phase + 1}'s plan read {rate(new)} entries/s while its lag grew, under {SLOWER:g}x the "
            f"{rate(old)}/s phase {into.phase}'s plan read" + (f" (predicted {gain:.2f}x)" if gain else ""))


def switch_back(app, graph, work: Path, store, previous, sw: Switch, why: str):
    """The build of the plan ``previous`` (the phase before the one ``sw`` ends), if the
    checkpoint resumes under it (``sw.predicted["chosen"] == "back"``), else None."""
    build = _production(graph, previous, work / "back", app)
    if not _resumable(build, store, sw, f"phase {sw.phase - 1}'s plan"):
        return None
    sw.reason = f"{why}: switching back to phase {sw.phase - 1}'s plan ({label(previous)})"
    sw.predicted = {"chosen": "back", "gain": None}
    return build


def _fatm(app, profile_path: Path, out: Path, adapt: AdaptOptions, nodes: int, cores: int, sw: Switch, what: str,
          name: str, **kw):
    """FATM's build in ``out`` and its predicted rate (recorded as ``sw.predicted[name]``), or
    None when it cannot plan (the refusal recorded). Planned with checkpoints, as every
    phase runs: no cycle of PEs (the ``acyclic`` legality rule, record 074)."""
    app_ref, _, params = app
    try:
        build, explain = api.optimize(app_ref, profile_path, out, adapt.calibration, params, nodes=nodes,
                                      cores=cores, checkpoints=True, **kw)
    except SpadeoptError as exc:
        sw.refused.append(f"{what}: {str(exc).splitlines()[0]}")
        return None
    predicted = (explain.get("rate") or {}).get("predicted")
    sw.predicted[name] = predicted
    return build, predicted


def _resumable(build, store, sw: Switch, what: str) -> bool:
    problem = cannot_resume(build, store)
    if problem:
        sw.refused.append(f"{what}: {problem}")
    return problem is None


def _keep(graph, base, work: Path, app, sw: Switch):
    """The running plan's build (production, checkpoints on): the decision keeps the plan."""
    sw.predicted.update(chosen="start", gain=1.0)
    return _production(graph, base, work / "start", app)


def _production(graph, plan, out: Path, app):
    """``plan``'s production build (not instrumented, checkpoints on: every phase takes them)."""
    return api.generate(graph, replace(plan, instrumented=False, checkpoints=True), out, app[1])


def cannot_resume(build, store) -> str | None:
    """Why the checkpoint cannot resume under ``build`` exactly once (a width 068 does not
    move, a PE cycle no barrier crosses: a guard, FATM plans none for checkpoints), or None.
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


def predict(graph, profile_path: Path, plan, adapt: AdaptOptions) -> float | None:
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
