"""``spadeopt bench adaptive-live``: how a live ``run --adaptive`` follows a feed that
steps up and back down (issue 39: "keep up within 30 s of the step"; scaling down).

The app is :mod:`spadeopt.bench.stepfeed` (a partitioned Redis source, ``spin_us`` of
opaque CPU per record: one PE handles under ``1e6 / spin_us`` records/s) on the
project's broker (``make broker``). A feeder writes ``low``/s until phase 1 runs and
``low_s`` seconds more, then ``high``/s for ``high_s`` seconds, then ``low``/s for
``tail_s`` seconds, and stops. The adaptive run (1 x ``cores``, ``--duration``) is
sampled every ``SAMPLE_S`` from its live metrics: the sources' lag and rate, the
busiest PE's CPU, the phase. Afterwards a static ``--fusion all`` run over the same
entries (``bounded=1``) gives the reference answer.

Reported (``adaptive_live.json``, ``.txt``, ``.png``):
- each switch: direction, when its trigger fired after the step up, the pause, the plan;
- from the step up: when the lag peaked (stopped growing) and when it was caught up
  (back under ``CAUGHT_UP`` entries), in seconds;
- each phase's sink latency p50 / p99 (the live metrics' markers, per phase);
- whether every entry was read, and per key equal to the static run's rows.
The plot shows the lag and the sources' rate against time, the feed's rate, and each
switch. One run: the 2-core VM is noisy, and the times depend on what else runs.

    spadeopt bench adaptive-live --out OUT_DIR [--cores 2]
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from spadeopt.atomic import write_atomic

APP = "spadeopt.bench.stepfeed:stepfeed"
KEYS = 4  # the step feed's stream keys (its ``keys`` parameter)
SAMPLE_S = 0.25
CAUGHT_UP = 500  # entries: a lag under this is "caught up" (a few batches)
STEPS = {"low": 150, "low_s": 10.0, "high": 1500, "high_s": 15.0, "tail_s": 35.0, "spin_us": 1000}
QUICK = {"high_s": 8.0, "tail_s": 25.0}


def after_step(samples: Sequence[dict[str, Any]], t_step: float, caught_up: int = CAUGHT_UP) -> dict[str, Any]:
    """From timeline ``samples`` (``t``, ``lag``) and the step's time: the lag's peak after
    the step and when it came (s after the step), and the first time after the peak that
    the lag was under ``caught_up`` (None if never).

    >>> s = [{"t": t, "lag": lag} for t, lag in [(0, 5), (1, 300), (2, 900), (3, 1200), (4, 700), (5, 100)]]
    >>> after_step(s, 0.5)
    {'peak_lag': 1200, 'peak_s': 2.5, 'caught_up_s': 4.5}
    """
    later = [s for s in samples if s["t"] >= t_step and isinstance(s.get("lag"), int)]
    if not later:
        return {"peak_lag": None, "peak_s": None, "caught_up_s": None}
    peak = max(later, key=lambda s: (s["lag"], -s["t"]))
    back = next((s for s in later if s["t"] > peak["t"] and s["lag"] < caught_up), None)
    return {"peak_lag": peak["lag"], "peak_s": round(peak["t"] - t_step, 3),
            "caught_up_s": round(back["t"] - t_step, 3) if back else None}


class _Sampler:
    """The run's live metrics every ``SAMPLE_S``: each phase's server is handed to ``on_live``."""

    def __init__(self) -> None:
        self.server: Any = None
        self.samples: list[dict[str, Any]] = []
        self.latency: dict[int, dict[str, Any]] = {}  # phase -> its last p50 / p99
        self.done = threading.Event()

    def on_live(self, server: Any) -> None:
        self.server = server

    def loop(self) -> None:
        while not self.done.wait(SAMPLE_S):
            if self.server is None:
                continue
            try:
                st = self.server.state()
            except Exception:  # noqa: BLE001 - a server between phases: skip the sample
                continue
            rows = [r for r in st.get("sources", []) if r.get("live")]
            phase = (st.get("adaptive") or {}).get("phase")
            lat = st.get("latency") or {}
            if lat.get("count"):
                self.latency[phase] = {"p50_ms": _ms(lat.get("p50_ms")), "p99_ms": _ms(lat.get("p99_ms")),
                                       "count": lat["count"]}
            self.samples.append({
                "t": time.time(), "phase": phase,
                "lag": sum(r["lag"] for r in rows if isinstance(r.get("lag"), int)) if rows else None,
                "rate": round(sum(r.get("rate") or 0.0 for r in rows), 1),
                "busiest_cpu": round(max((p.get("cpu") or 0.0 for p in st.get("pes", [])), default=0.0), 3),
                "pes": len(st.get("pes", []))})


def _ms(x: Any) -> float | None:
    return round(x, 1) if isinstance(x, int | float) else None


def run(out_dir: Path, cores: int = 2, quick: bool = False, force: bool = False,
        log: Callable[[str], None] = print) -> dict[str, Any]:
    from spadeopt import adaptive
    from spadeopt.bench.stepfeed import feed
    from spadeopt.connectors.redis_conn import connect, project_broker
    from spadeopt.deploy.options import RunOptions
    from spadeopt.output_paths import claim_dir, mark_dir

    out_dir = claim_dir(Path(out_dir), "bench-adaptive-live", "--out", force)
    out_dir.mkdir(parents=True, exist_ok=True)
    mark_dir(out_dir, "bench-adaptive-live", ["adaptive_live.json", "adaptive_live.txt", "adaptive_live.png",
                                              "work", "out", "ref", "ref-build"])
    steps = {**STEPS, **(QUICK if quick else {})}
    client = connect(project_broker(), "spadeopt bench adaptive-live")
    prefix = f"bench-adaptive-live:{int(time.time())}"
    params = {"prefix": prefix, "spin_us": str(steps["spin_us"]), "keys": str(KEYS)}
    streams = [f"{prefix}:{k}" for k in range(KEYS)]  # the step feed's stream keys
    sampler, marks = _Sampler(), {}
    work = out_dir / "work"
    progress = work / "phase1" / "build" / "progress"

    def feeder() -> None:  # ends early when the run failed (marks["stop"])
        n, give_up = 0, time.time() + 180
        while not any(progress.glob("pe*.json")) and time.time() < give_up and "stop" not in marks:
            n = feed(client, prefix, n, steps["low"] // 5, steps["low"])
        n = feed(client, prefix, n, int(steps["low"] * steps["low_s"]), steps["low"])
        marks["t_step_up"] = time.time()
        n = feed(client, prefix, n, int(steps["high"] * steps["high_s"]), steps["high"])
        marks["t_step_down"] = time.time()
        marks["total"] = feed(client, prefix, n, int(steps["low"] * steps["tail_s"]), steps["low"])
        marks["t_end"] = time.time()

    duration = steps["low_s"] + steps["high_s"] + steps["tail_s"] + 40.0
    threads = [threading.Thread(target=feeder, daemon=True), threading.Thread(target=sampler.loop, daemon=True)]
    for t in threads:
        t.start()
    log(f"bench adaptive-live: feed {steps['low']}/s, {steps['high']}/s for {steps['high_s']:g} s, {steps['low']}/s "
        f"for {steps['tail_s']:g} s; the run lasts {duration:g} s")
    try:
        _, sw = adaptive.run_adaptive(
            APP, params, nodes=1, cores=cores, work=work,
            options=RunOptions(progress=log, out=out_dir / "out", duration=duration, on_live=sampler.on_live,
                               metrics_port=0, force=True),
            adapt=adaptive.AdaptOptions(adapt_after=2.0, interval=0.5))
    except BaseException:
        marks["stop"] = True
        client.delete(*streams)
        raise
    finally:
        sampler.done.set()
        threads[0].join(timeout=120)
    from spadeopt import api

    api.run(APP, "all", {**params, "bounded": "1"}, build_dir=out_dir / "ref-build",
            options=RunOptions(progress=log, out=out_dir / "ref", force=True))  # the static run's answer
    client.delete(*streams)
    doc = _figures(sw, sampler, marks, steps, cores, out_dir)
    write_atomic(out_dir / "adaptive_live.json", json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n")
    write_atomic(out_dir / "adaptive_live.txt", table(doc) + "\n")
    plot(doc, out_dir / "adaptive_live.png")
    return doc


def _figures(sw, sampler: _Sampler, marks: dict[str, Any], steps: dict[str, Any], cores: int,
             out_dir: Path) -> dict[str, Any]:
    """The run's switches, the timeline (seconds since its first sample) and the answers."""
    t_up = marks.get("t_step_up")
    t0 = sampler.samples[0]["t"] if sampler.samples else time.time()
    switches, kept = [], []
    for s in sw.every:
        kept += [{"phase": s.phase, "rule": (k["trigger"] or {}).get("rule"), "reason": k["reason"],
                  "at_s": round(k["at"] - t0, 3) if k.get("at") else None} for k in s.kept]
        if not s.checkpoint:
            continue
        at = (s.trigger or {}).get("at")
        switches.append({"phase": s.phase, "direction": s.direction or "window", "switched": s.switched,
                         "rule": (s.trigger or {}).get("rule"), "ahead": s.ahead,
                         "kept": s.predicted.get("chosen") == "start", "reason": s.reason,
                         "trigger_after_step_up_s": round(at - t_up, 3) if at and t_up else None,
                         "at_s": round(at - t0, 3) if at else None, "pause_s": s.pause_s, "widths": (s.after or {}).get("widths"),
                         "pes": (s.after or {}).get("pes"), "cores": (s.after or {}).get("cores"),
                         "timings": s.timings})
    rows = _rows(out_dir / "out" / "out.jsonl")
    want = _rows(out_dir / "ref" / "out.jsonl")
    return {"app": APP, "cores": cores, "steps": steps, "marks": {k: (round(v - t0, 3) if k.startswith("t_") else v)
                                                                   for k, v in marks.items()},
            "switches": switches, "kept_without_a_stop": kept, "after_step_up": after_step(sampler.samples, t_up) if t_up else None,
            "latency_by_phase": {str(k): v for k, v in sorted(sampler.latency.items(), key=lambda kv: kv[0] or 0)},
            "entries_written": marks.get("total"), "entries_read": len(rows),
            "answers_identical_per_key": _by_key(rows) == _by_key(want) and len(want) == marks.get("total"),
            "timeline": [{**s, "t": round(s["t"] - t0, 3)} for s in sampler.samples],
            "command": "spadeopt bench adaptive-live --out OUT_DIR"}


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _by_key(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(r["k"], []).append(r)
    return out


def table(doc: dict[str, Any]) -> str:
    st, a = doc["steps"], doc["after_step_up"] or {}

    def s(x: Any) -> str:
        return f"{x:.1f} s" if isinstance(x, int | float) else "-"

    lines = [f"bench adaptive-live: {doc['app']}, 1 x {doc['cores']} cores; feed {st['low']}/s -> {st['high']}/s "
             f"for {st['high_s']:g} s -> {st['low']}/s for {st['tail_s']:g} s ({st['spin_us']} us of CPU a record)",
             f"after the step up: lag peaked at {a.get('peak_lag')} entries {s(a.get('peak_s'))} after it, caught up "
             f"(lag < {CAUGHT_UP}) {s(a.get('caught_up_s'))} after it"]
    for w in doc["switches"]:
        lines.append(f"switch {w['direction']:<6} after phase {w['phase']}: trigger ({w['rule']}) "
                     f"{s(w['trigger_after_step_up_s'])} after the step up, pause {s(w['pause_s'])}"
                     f"{' (decided before the stop)' if w['ahead'] else ''}, then {w['pes']} PE(s) on {w['cores']} "
                     f"core(s), widths {w['widths'] or 'all 1'}{' (kept the plan)' if w['kept'] else ''}")
    for k in doc.get("kept_without_a_stop", []):
        lines.append(f"kept without a stop in phase {k['phase']} at {s(k['at_s'])} ({k['rule']}): {k['reason']}")
    for phase, lat in doc["latency_by_phase"].items():
        lines.append(f"phase {phase}: sink latency p50 {lat['p50_ms']} ms, p99 {lat['p99_ms']} ms ({lat['count']} markers)")
    lines.append(f"entries: {doc['entries_written']} written, {doc['entries_read']} read; answers "
                 f"{'identical per key to a static run' if doc['answers_identical_per_key'] else 'DIFFER'}")
    return "\n".join(lines)


def plot(doc: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tl = [s for s in doc["timeline"] if s.get("lag") is not None]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    ax1.plot([s["t"] for s in tl], [s["lag"] for s in tl], color="tab:red", label="lag (entries)")
    ax1.set_ylabel("lag (entries)")
    ax2.plot([s["t"] for s in tl], [s["rate"] for s in tl], color="tab:blue", label="sources' rate")
    m, st = doc["marks"], doc["steps"]
    if "t_step_up" in m and "t_step_down" in m:
        ax2.step([0, m["t_step_up"], m["t_step_down"], m.get("t_end", m["t_step_down"])],
                 [st["low"], st["high"], st["low"], 0], where="post", color="grey", ls="--", label="feed")
    ax2.set_ylabel("records / s")
    ax2.set_xlabel("s since the first sample")
    for w in doc["switches"]:
        if w["at_s"] is not None:
            for ax in (ax1, ax2):
                ax.axvline(w["at_s"], color="green" if w["direction"] == "up" else "purple", alpha=0.6)
            ax1.annotate(w["direction"], (w["at_s"], ax1.get_ylim()[1] * 0.9), fontsize=8)
    ax1.legend(loc="upper right")
    ax2.legend(loc="upper right")
    fig.suptitle("run --adaptive on a stepping feed: lag, rate and switches")
    fig.tight_layout()
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(path)


def from_args(args, log: Callable[[str], None]) -> dict[str, Any]:
    """The registry's entry: ``spadeopt bench adaptive-live [--cores N] [--quick]``."""
    return run(Path(args.out), cores=int(args.cores or 2), quick=bool(args.quick),
               force=getattr(args, "force", False), log=log)
