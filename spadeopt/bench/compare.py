"""``spadeopt compare``: NONE, FALL, FMAN and FATM on the same workload, side by side.

Every strategy is built once, then the runs are interleaved round by round (``repeat``
rounds), so slow drifts of a shared machine hit every strategy alike. Throughput is
the steady-state aggregate source rate (after a warm-up; see ``steady_rate``). FATM
needs a profile: unless one is given, the app is profiled (under FALL by default) and
refined first. FATM chooses its parallel regions' widths; ``auto1`` (FATM-w1, added by
``--no-fission``) is the ablation that keeps every region at width 1, planned from the
same profile. Whenever there is a profile (FATM is among the strategies, or
``--profile``), every strategy's plan gets the predicted source rate of the model FATM
plans with (:func:`spadeopt.api.predict_build`; for FATM it equals explain.json's
``rate.predicted``), reported as "planned" beside the measured rate. A strategy that fails is reported with
its error; the others still run. Each strategy's plan picture (as ``spadeopt explain
--png`` draws it) is written beside its build, ``plan-<strategy>.png``.

Latency is reported beside throughput: each run's source -> sink latency markers
(``runtime.latency``: p50 / p99, the median of the runs). Under a bounded replay the
sources read as fast as they can, so it is mostly time spent in full queues: a plan's
buffering at its throughput. For an app with live, unbounded sources (a broker feed),
every run reads the feed for ``--duration`` seconds (required: such a run has no end of
its own), the feed must be running (e.g. ``python -m apps.orders feed``), throughput is
then the rate the feed gave, and latency what a user of the live app sees; the runs'
answers are not compared, since each read whatever the feed sent while it ran.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spadeopt.atomic import write_atomic
from spadeopt.deploy.options import RunOptions
from spadeopt.errors import SpadeoptError, UsageError
from spadeopt.optimize.strategies import (
    FALL,
    FATM,
    NONE,
    STRATEGY_BY_NAME,
    Strategy,
    label_of,
    selectable,
)

NO_FISSION = "auto1"
"""The ablation FATM-w1 (``--no-fission``): FATM from the same profile, every region at width 1."""


@dataclass(frozen=True)
class Entry:
    """One strategy a compare can run: a registered one (``optimize.strategies``), or
    the ablation :data:`NO_FISSION`."""

    strategy: Strategy
    label: str
    colour: str
    fission: bool = True


def entries() -> dict[str, Entry]:
    """Every strategy a compare can run, by its ``--strategies`` name, in the report's
    order: the registered ones that make plans, and the ablation just before FATM."""
    out = {}
    for name, st in STRATEGY_BY_NAME.items():
        if st is FATM:
            out[NO_FISSION] = Entry(FATM, "FATM-w1", "#9c9", fission=False)
        if st.makes_plans:
            out[name] = Entry(st, st.label, st.colour)
    return out


def _label(st: str) -> str:
    return entries()[st].label if st in entries() else label_of(st)


def _colour(st: str) -> str:
    return entries()[st].colour if st in entries() else "#888"


def _rivals() -> list[str]:
    """What FATM is measured against ("FATM / best of ..."): every entry but FATM and NONE."""
    return [k for k in entries() if k not in (FATM.name, NONE.name)]


def _plan_key(st: str) -> str:
    return "fatm_plan" if st == FATM.name else f"fatm_plan_{st}"


# The paper's results relative to FATM (digest 003 §6.4-6.5): radio astronomy FATM +70 %
# over NONE, +100 % over FMAN, +85 % over FALL; bargain 6x NONE, 2x FALL (the FMAN factor
# did not survive in the text). Drawn beside our bars for the apps that reproduce them.
PAPER = {"outlier": {"NONE": 1 / 1.70, "FMAN": 1 / 2.00, "FALL": 1 / 1.85, "FATM": 1.0},
         "bargain": {"NONE": 1 / 6.0, "FALL": 1 / 2.0, "FATM": 1.0}}


def compare(app_ref: str, out_dir: Path, strategies: Sequence[str] | None = None,
            params: Mapping[str, str] | None = None, *, nodes: int = 1, cores: int = 2, repeat: int = 3,
            profile: Path | None = None, calibration: Path | None = None, sample_rate: float = 0.01,
            profile_fusion: str | None = None, command: str | None = None, no_fission: bool = False,
            collapse: bool = True, options: RunOptions | None = None) -> dict[str, Any]:
    from spadeopt import api
    from spadeopt.deploy.preflight import preflight
    from spadeopt.kinds.source import unbounded
    from spadeopt.output_paths import claim_dir, mark_dir

    options = options or RunOptions()
    say, master = options.say, options.master
    strategies = list(strategies) if strategies is not None else [n for n, e in entries().items() if e.fission]
    profile_fusion = profile_fusion or api.PROFILE_FUSION
    if no_fission and NO_FISSION not in strategies:
        strategies.append(NO_FISSION)
    _check_args(strategies, repeat, profile_fusion, sample_rate)
    out_dir = claim_dir(out_dir, "compare", "--out", options.force)
    graph, _ = api.load_graph(app_ref, params)  # fail early on a bad app
    live = sorted(op.name for op in graph.operators if op.is_source and unbounded(op))
    if live and options.duration is None:
        raise UsageError(f"app '{graph.name}' reads live, unbounded source(s) {', '.join(live)}: give --duration S, "
                         f"so that every run reads the feed for S seconds and ends (keep a feed running meanwhile, "
                         f"e.g. python -m apps.orders feed), or bound the sources (e.g. until='end')")
    plan = api.make_plan(graph, "none", nodes, cores)
    preflight(graph, master, plan.nodes, plan.cores, say)
    out_dir.mkdir(parents=True, exist_ok=True)
    mark_dir(out_dir, "compare", ["compare.json", "compare.txt", "compare.png", "profile-run", "profile.json", "sinks",
                                  *(f"build-{st}" for st in strategies), *(f"plan-{st}.png" for st in strategies)])
    profiled_here = profile is None
    builds, errors, explains, profile = _build_all(app_ref, strategies, out_dir, params, nodes, cores, profile,
                                                   calibration, sample_rate, profile_fusion, collapse, options)
    pictures = draw_plans(builds, out_dir, say)
    runs, answers = _run_rounds(builds, errors, repeat, out_dir, options)
    doc = _summarise(graph.name, app_ref, dict(params or {}), nodes, cores, master, repeat, runs, errors)
    doc["answers"] = _answers(answers, live)
    doc["command"] = command
    doc["plan_pictures"] = pictures
    if profile is not None:  # no profile: nothing to predict from (only NONE/FALL/FMAN were asked for)
        _predict(doc, builds, profile, calibration)
    _versus_fall(doc["strategies"])
    _fatm_plans(doc, explains, profile, profile_fusion if profiled_here else None)
    write_atomic(out_dir / "compare.json", json.dumps(doc, indent=2, sort_keys=True) + "\n")
    write_atomic(out_dir / "compare.txt", table(doc) + "\n")
    plot(doc, out_dir / "compare.png")
    return doc


def _check_args(strategies: list[str], repeat: int, profile_fusion: str, sample_rate: float) -> None:
    bad = [s for s in strategies if s not in entries()]
    if bad or not strategies:
        raise UsageError(f"unknown strategy {', '.join(bad) or '(none given)'}; choose from {', '.join(entries())}")
    if repeat < 1:
        raise UsageError(f"--repeat must be >= 1, got {repeat}")
    if profile_fusion not in selectable():
        raise UsageError(f"--profile-fusion must be one of {', '.join(selectable())}, got {profile_fusion!r}")
    if not 0 < sample_rate <= 1:
        raise UsageError(f"--sample-rate must be in (0, 1], got {sample_rate}")


def _build_all(app_ref: str, strategies: list[str], out_dir: Path, params: Mapping[str, str] | None, nodes: int,
               cores: int, profile: Path | None, calibration: Path | None, sample_rate: float, profile_fusion: str,
               collapse: bool, options: RunOptions) -> tuple[dict, dict[str, str], dict, Path | None]:
    """Each strategy's build (FATM's profiled first when no profile was given): builds,
    build errors, FATM's explanations and the profile used."""
    from spadeopt import api

    say = options.say
    builds, errors, explains = {}, {}, {}
    for st in strategies:
        try:
            say(f"building {_label(st)}")
            if entries()[st].strategy.needs_profile:
                profile = profile or _profile_for_auto(app_ref, out_dir, params, nodes, cores, sample_rate,
                                                       profile_fusion, options)
                builds[st], explains[st] = api.optimize(app_ref, profile, out_dir / f"build-{st}", calibration,
                                                        params, nodes=nodes, cores=cores, fission=entries()[st].fission,
                                                        collapse=collapse)
            else:
                builds[st] = api.build(app_ref, st, params, nodes, cores, out_dir / f"build-{st}",
                                       collapse=collapse)
        except SpadeoptError as exc:
            errors[st] = str(exc)
            say(f"{_label(st)} failed to build: {str(exc).splitlines()[0]}")
    return builds, errors, explains, profile


def draw_plans(builds: Mapping[str, Any], out_dir: Path, say=lambda _msg: None) -> dict[str, str]:
    """Each strategy's plan picture (``plan.picture.to_png``) as ``OUT/plan-<strategy>.png``,
    next to its build: {strategy: file name}. Drawn before the runs (a second or so each);
    a picture that cannot be drawn is said and skipped, the compare goes on."""
    from spadeopt.plan.picture import load_picture, to_png

    drawn = {}
    for st, build in builds.items():
        name = f"plan-{st}.png"
        try:
            to_png(load_picture(build.directory), out_dir / name)
        except (SpadeoptError, OSError, ValueError) as exc:
            say(f"{_label(st)}: no plan picture ({str(exc).splitlines()[0]})")
            continue
        drawn[st] = name
    return drawn


def _run_rounds(builds: dict, errors: dict[str, str], repeat: int, out_dir: Path, options: RunOptions
                ) -> tuple[dict[str, list[dict[str, Any]]], dict[str, set[str]]]:
    """``repeat`` rounds of every build, interleaved (a failed strategy is dropped, its
    error recorded): each one's results and the digests of its sinks."""
    from spadeopt.deploy.launcher import run_build

    say = options.say
    runs: dict[str, list[dict[str, Any]]] = {st: [] for st in builds}
    answers: dict[str, set[str]] = {st: set() for st in builds}
    order = list(builds)
    for r in range(repeat):
        for i in range(len(order)):
            st = order[(i + r) % len(order)]
            if st in errors:
                continue
            say(f"round {r + 1}/{repeat}: {_label(st)}")
            try:
                sinks_dir = out_dir / "sinks" / st
                shutil.rmtree(sinks_dir, ignore_errors=True)
                res = run_build(builds[st].directory, options.replace(out=sinks_dir))
            except SpadeoptError as exc:
                errors[st] = str(exc)
                say(f"{_label(st)} failed: {str(exc).splitlines()[0]}")
                continue
            runs[st].append(res.to_json())
            answers[st].add(_digest(sinks_dir))
    return runs, answers


def _predict(doc: dict[str, Any], builds: dict, profile: Path, calibration: Path | None) -> None:
    """Each strategy's row gets the model's predicted rate for its build."""
    from spadeopt import api

    for st, row in doc["strategies"].items():
        try:
            pred = api.predict_build(builds[st].directory, profile, calibration)
        except SpadeoptError as exc:
            row["prediction_error"] = str(exc)
            continue
        row["planned_rate"] = pred.rate
        row["prediction"] = pred.to_json()  # with the model's constants, fitted ones included
        row["predicted_over_measured"] = pred.rate / row["throughput_median"]


def _fatm_plans(doc: dict[str, Any], explains: dict, profile: Path | None, profiled_under: str | None) -> None:
    """What FATM planned (rates, model, widths) for each FATM strategy, in ``doc``."""
    for st, explain in explains.items():
        key = _plan_key(st)
        doc[key] = {"planned_rate": explain["rate"].get("predicted"), "fused_at_rate": explain["rate"]["planned"],
                    "perf_model": explain["prediction"]["model"], "rate_mode": explain["rate"]["mode"],
                    "profiled_rate": explain["rate"]["profiled"], "max_frac": explain["max_frac"],
                    "min_util": explain["min_util"], "profile": str(profile),
                    "widths": explain.get("fission", {}).get("widths", {}),
                    "profiled_under": _label(profiled_under) if profiled_under else None}
        row = doc["strategies"].get(st)
        if row is not None:
            row["widths"] = doc[key]["widths"]


def _versus_fall(rows: Mapping[str, dict[str, Any]]) -> None:
    """Predicted / measured *speed-up over FALL* of every predicted row, both measured in
    the same compare (``predicted_over_measured`` over FALL's): what the model says about
    one plan against another, free of how fast the shared machine happened to be when
    the production probe ran (a one-PE build's speed on the development VM swung 1.5x
    between the probe and a compare minutes later;
    docs/decisions/025-measuring-on-a-shared-2-core-vm.md)."""
    fall = rows.get(FALL.name, {}).get("predicted_over_measured")
    for row in rows.values():
        if fall and row.get("predicted_over_measured"):
            row["versus_fall"] = row["predicted_over_measured"] / fall


def _digest(sinks_dir: Path) -> str:
    """sha256 over every sink file's name and bytes."""
    h = hashlib.sha256()
    for f in sorted(p for p in Path(sinks_dir).rglob("*") if p.is_file()):
        h.update(f.relative_to(sinks_dir).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def _answers(answers: Mapping[str, set[str]], live: Sequence[str] = ()) -> dict[str, Any]:
    """Did every run of every strategy write byte-identical sink files? ``identical`` is
    None when the app read live sources: each run read what the feed sent meanwhile."""
    digests = {st: sorted(d) for st, d in answers.items() if d}
    distinct = {d for ds in digests.values() for d in ds}
    if live:
        return {"identical": None, "live_sources": list(live), "sha256": digests}
    return {"identical": len(distinct) <= 1, "sha256": digests}


def _profile_for_auto(app_ref, out_dir, params, nodes, cores, sample_rate, fusion, options: RunOptions) -> Path:
    from spadeopt import api
    from spadeopt.refine.job import refine

    run_dir = out_dir / "profile-run"
    shutil.rmtree(run_dir, ignore_errors=True)
    options.say(f"profiling ({_label(fusion)}, s = {sample_rate}) for FATM")
    api.profile(app_ref, run_dir, fusion, params, sample_rate=sample_rate, nodes=nodes, cores=cores,
                options=options)
    options.say("refining the profile")
    refine([run_dir], out_dir / "profile.json", master=options.master, cores=cores, conf=options.conf)
    return out_dir / "profile.json"


def _summarise(app, app_ref, params, nodes, cores, master, repeat, runs, errors) -> dict[str, Any]:
    rows = {}
    for st, rs in runs.items():
        if not rs:
            continue
        thr = [r["steady_throughput"] for r in rs]
        med = statistics.median(thr)
        mid = min(rs, key=lambda r: abs(r["steady_throughput"] - med))
        rows[st] = {"label": _label(st), "throughput_median": med, "throughput": thr,
                    "pes": mid["pes"], "nodes_used": mid["nodes_used"], "cpu_per_node": mid["cpu_per_node"],
                    "sinks": mid["sinks"], "wall_s": [r["wall_s"] for r in rs],
                    "per_pe": _per_pe(mid), **_latency(rs)}
    base = rows.get(FATM.name, {}).get("throughput_median")
    best_other = max((r["throughput_median"] for st, r in rows.items() if st in _rivals()),
                     default=None)
    for row in rows.values():
        row["relative_to_fatm"] = row["throughput_median"] / base if base else None
    return {"schema_version": 1, "app": app, "app_ref": app_ref, "params": params, "nodes": nodes,
            "cores": cores, "master": master or f"local[{nodes * cores}]", "repeat": repeat,
            "when": time.strftime("%Y-%m-%dT%H:%M:%S"), "strategies": rows,
            "failed": {st: msg for st, msg in errors.items()},
            "fatm_over_best_other": base / best_other if base and best_other else None,
            "note": "steady-state aggregate source rate, median of the repeats; runs interleaved"}


def _latency(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Each run's latency markers (p50 / p90 / p99 / max ms) and the medians of p50 and p99."""
    lat = [r.get("latency") for r in runs]
    got = [x for x in lat if x]
    if not got:
        return {"latency": lat}
    return {"latency": lat, "latency_p50_ms": statistics.median(x["p50_ms"] for x in got),
            "latency_p99_ms": statistics.median(x["p99_ms"] for x in got)}


def _per_pe(run: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each PE of one run: node, CPU seconds, wall seconds and their ratio (cores it used)."""
    return [{"pe": p["pe"], "node": p["node"], "cpu_s": p["cpu_s"], "wall_s": p["wall_s"],
             "util": p["cpu_s"] / p["wall_s"] if p["wall_s"] > 0 else 0.0} for p in run.get("per_pe", [])]


def table(doc: dict[str, Any]) -> str:
    lines = [f"{doc['app']} on {doc['master']} ({doc['nodes']} node(s) x {doc['cores']} core(s)), "
             f"median of {doc['repeat']} run(s)", "",
             f"{'strategy':<9}{'tuples/s':>12}{'p50 ms':>9}{'p99 ms':>9}{'vs FATM':>9}{'PEs':>6}{'nodes':>7}"
             f"{'planned':>11}{'pl/meas':>8}{'/FALL':>7}  CPU s per node"]
    for st in entries():
        row = doc["strategies"].get(st)
        if row is None:
            if st in doc["failed"]:
                lines.append(f"{_label(st):<9}{'failed':>12}  {doc['failed'][st].splitlines()[0][:80]}")
            continue
        rel = f"{row['relative_to_fatm']:.2f}x" if row["relative_to_fatm"] else "-"
        cpu = ", ".join(f"{v:.1f}" for _, v in sorted(row["cpu_per_node"].items()))
        planned = f"{row['planned_rate']:,.0f}" if row.get("planned_rate") else "-"
        ratio = f"{row['predicted_over_measured']:.2f}" if row.get("predicted_over_measured") else "-"
        vs_fall = f"{row['versus_fall']:.2f}" if row.get("versus_fall") else "-"
        p50, p99 = (f"{row[k]:,.1f}" if row.get(k) is not None else "-" for k in ("latency_p50_ms", "latency_p99_ms"))
        lines.append(f"{row['label']:<9}{row['throughput_median']:>12,.0f}{p50:>9}{p99:>9}{rel:>9}{row['pes']:>6}"
                     f"{row['nodes_used']:>7}{planned:>11}{ratio:>8}{vs_fall:>7}  {cpu}")
    first = True
    for st in (k for k, e in entries().items() if e.strategy.needs_profile):
        plan = doc.get(_plan_key(st))
        if plan:
            widths = ", ".join(f"{k}={v}" for k, v in plan.get("widths", {}).items()) or "no parallel regions"
            lines.append(f"{chr(10) if first else ''}{_label(st)} fused for {plan.get('fused_at_rate', 0):,.0f} and "
                         f"predicts {plan['planned_rate'] or 0:,.0f} source tuples/s "
                         f"(--rate {plan['rate_mode']}; profiled at {plan['profiled_rate']:,.0f}/s), MaxFrac "
                         f"{plan['max_frac']}, MinUtil {plan['min_util']}; region widths: {widths}")
            first = False
    model = next((r["prediction"].get("model") for r in doc["strategies"].values() if r.get("prediction")), None)
    if model is None and doc.get("fatm_plan"):
        model = doc["fatm_plan"].get("perf_model")
    if model:
        consts = ", ".join(f"{k} {v:g}" for k, v in sorted(model.items()) if k != "source")
        lines.append(f"planned = predicted source rate of each plan (one model: {consts}; {model.get('source')})")
    if any(r.get("versus_fall") for r in doc["strategies"].values()):
        lines.append("/FALL = pl/meas over FALL's pl/meas: the predicted speed-up over FALL / the measured one, "
                     "both from this compare's runs (free of the machine's speed during the probe)")
    if doc.get("fatm_over_best_other"):
        ran = [_label(st) for st in _rivals() if st in doc["strategies"]]  # only what ran
        lines.append(f"FATM / best of {', '.join(ran)} measured: {doc['fatm_over_best_other']:.2f}x")
    if any(r.get("latency_p50_ms") is not None for r in doc["strategies"].values()):
        lines.append("p50 / p99 ms = source -> sink latency markers, median of the runs" + (
            " (live sources: what a user of the live feed sees)" if (doc.get("answers") or {}).get("live_sources")
            else " (a bounded replay reads as fast as it can: mostly time in full queues)"))
    ans = doc.get("answers")
    if ans and ans.get("live_sources"):
        lines.append(f"answers: not compared, the runs read the live source(s) {', '.join(ans['live_sources'])} "
                     f"(each what the feed sent while it ran)")
    elif ans and ans["sha256"]:
        lines.append("answers: every run of every strategy wrote byte-identical sink files" if ans["identical"]
                     else "ANSWERS DIFFER between runs or strategies: " + "; ".join(
                         f"{_label(st)} {', '.join(d[:12] for d in ds)}" for st, ds in ans["sha256"].items()))
    return "\n".join(lines)


def plot(doc: dict[str, Any], path: Path) -> None:
    """Bars of throughput relative to FATM (the paper's Figs. 10-11), PEs and nodes annotated."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [(st, doc["strategies"][st]) for st in entries() if st in doc["strategies"]]
    if not rows:
        return
    base = doc["strategies"].get(FATM.name, {}).get("throughput_median")
    lat = [(st, r) for st, r in rows if r.get("latency_p50_ms") is not None]
    fig, axes = plt.subplots(1, 2 if lat else 1, figsize=(11 if lat else 6, 4), squeeze=False)
    ax = axes[0][0]
    names = [r["label"] for _, r in rows]
    if base:
        vals = [r["throughput_median"] / base for _, r in rows]
        lo = [r["throughput_median"] / base - min(r["throughput"]) / base for _, r in rows]
        hi = [max(r["throughput"]) / base - r["throughput_median"] / base for _, r in rows]
        ax.set_ylabel("throughput relative to FATM (median; bars: min-max)")
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    else:
        vals = [r["throughput_median"] for _, r in rows]
        lo = [r["throughput_median"] - min(r["throughput"]) for _, r in rows]
        hi = [max(r["throughput"]) - r["throughput_median"] for _, r in rows]
        ax.set_ylabel("throughput (source tuples/s, median)")
    bars = ax.bar(names, vals, yerr=[lo, hi], capsize=4, color=[_colour(st) for st, _ in rows])
    for bar, (_, r), h in zip(bars, rows, hi, strict=True):
        ax.annotate(f"{r['throughput_median']:,.0f}/s\n{r['pes']} PEs, {r['nodes_used']} node(s)",
                    (bar.get_x() + bar.get_width() / 2, bar.get_height() + h), ha="center", va="bottom", fontsize=8,
                    xytext=(0, 3), textcoords="offset points")
    paper = PAPER.get(doc["app"]) if base else None
    if paper:
        xs = [i for i, (_, r) in enumerate(rows) if r["label"] in paper]
        ax.scatter(xs, [paper[rows[i][1]["label"]] for i in xs], marker="D", color="black", zorder=3,
                   label="paper (Gedik et al. 2009, 4 x 4 cores)")
        ax.legend(loc="upper left", fontsize=8)
    ax.set_title(f"{doc['app']}: fusion strategies ({doc['master']})")
    ax.set_ylim(0, max(v + h for v, h in zip(vals, hi, strict=True)) * 1.3)
    if lat:
        _plot_latency(axes[0][1], lat, bool((doc.get("answers") or {}).get("live_sources")))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _plot_latency(ax, rows: list[tuple[str, dict[str, Any]]], live: bool) -> None:
    """p50 and p99 source -> sink latency per strategy (median of the runs), log scale."""
    xs = range(len(rows))
    ax.bar([x - 0.2 for x in xs], [r["latency_p50_ms"] for _, r in rows], 0.4, label="p50",
           color=[_colour(st) for st, _ in rows])
    ax.bar([x + 0.2 for x in xs], [r["latency_p99_ms"] for _, r in rows], 0.4, label="p99",
           color=[_colour(st) for st, _ in rows], alpha=0.5, hatch="//")
    ax.set_xticks(list(xs), [r["label"] for _, r in rows])
    ax.set_yscale("log")
    ax.set_ylabel("source -> sink latency, ms (median of the runs)")
    ax.set_title("latency (live feed)" if live else "latency (bounded replay: queues full)")
    ax.legend(fontsize=8)
