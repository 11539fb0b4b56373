"""What ``run --adaptive`` saw and did at each switch, as the run's output and ``--json``'s
``adaptive`` record (docs/running.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spadeopt.deploy.launcher import RunResult


@dataclass
class Switch:
    """One switch: ``to_json`` is its record. The first switch's record is the run's
    ``adaptive``; a live run's later switches are in its ``later``."""

    switched: bool = False
    reason: str = ""
    checkpoint: int | None = None
    measured_s: float = 0.0
    before: dict[str, Any] = field(default_factory=dict)  # the phase it ended: plan, rate, per-PE busy
    after: dict[str, Any] = field(default_factory=dict)  # the phase it started: plan, rate
    predicted: dict[str, Any] = field(default_factory=dict)  # FATM's model: the running plan, chosen, gain
    refused: list[str] = field(default_factory=list)  # plans the checkpoint could not resume
    pause_s: float | None = None  # stopping checkpoint completed -> every new PE running
    trigger: dict[str, Any] | None = None  # a live rule's: "lag", "max_frac" (up), "idle" (down); None: the window
    profile: str | None = None
    timings: dict[str, float] = field(default_factory=dict)  # refine_s, plan_s: parts of the pause
    phase: int = 1  # the phase this switch ended
    later: list[Switch] = field(default_factory=list)  # a live run's next switches (on the first one only)
    kept: list[dict[str, Any]] = field(default_factory=list)  # decisions while the phase ran that kept its plan
    ahead: bool = False  # decided while the phase ran (adaptive.ahead): refine and plan were not in the pause

    @property
    def direction(self) -> str:
        """"up" (the lag grew), "down" (the plan was idle) or "" (the measurement window)."""
        return (self.trigger or {}).get("direction", "up" if self.trigger else "")

    def grew(self) -> str:
        """What tripped a live run's switch: "the live sources' lag grew by N entries in S s
        (busiest PE ...)", "PE p used C cores ..." ('' for the window)."""
        t = self.trigger
        if not t:
            return ""
        if self.direction == "down":
            return (f"the busiest PE used {t['busiest_cpu']:.2f} core(s) at most for {t['over_s']:.1f} s while the "
                    f"sources read {t['rate']:,.0f} entries/s and the lag stayed at {t['lag']:,}")
        seen = _seen(t)
        if t.get("rule") == "review":
            return f"the plan's review, every {t['every_s']:g} s, on fresh costs" + (f" ({seen})" if seen else "")
        if t.get("rule") == "max_frac":
            return (f"{t['busiest_pe']} used at least {t['busiest_cpu']:.2f} core(s) (MaxFrac {t['max_frac']:g}) for "
                    f"{t['over_s']:.1f} s while the lag stayed at {t['lag']:,}" + (f" ({seen})" if seen else ""))
        return f"the live sources' lag grew by {t['grew_by']:,} entries in {t['over_s']:.1f} s" + \
            (f" ({seen})" if seen else "")

    def to_json(self) -> dict[str, Any]:
        doc = {k: getattr(self, k) for k in ("switched", "reason", "checkpoint", "measured_s", "before", "after",
                                             "predicted", "refused", "pause_s", "profile", "timings", "trigger",
                                             "phase", "direction", "kept", "ahead")}
        if self.later:
            doc["later"] = [s.to_json() for s in self.later]
        return doc

    @property
    def every(self) -> list[Switch]:
        """This switch and the later ones, in order."""
        return [self, *self.later]


def _seen(t: dict[str, Any]) -> str:
    """An up trigger's reading: the busiest PE, the idle cores, the sources' backpressure."""
    if t.get("busiest_pe") is None:
        return ""
    idle = max(0.0, t["cores"] - t["cpu_total"])
    return (f"busiest PE {t['busiest_pe']} at {t['busiest_cpu']:.2f} core(s), {idle:.1f} of {t['cores']} core(s) "
            f"idle, sources backpressured {t['backpressure']:.0%} of the time")


def phase_record(result: RunResult, build) -> dict[str, Any]:
    """A phase's plan and what was measured of it: source rate, each PE's busy (CPU / wall).
    ``widths``: the plan's regions wider than 1 (its ``plan.json``)."""
    deploy = build.deploy
    busy = {p["pe"]: round(p["cpu_s"] / p["wall_s"], 3) for p in result.per_pe
            if p.get("wall_s") and "cpu_s" in p and "pe" in p}
    return {"strategy": deploy.strategy, "pes": len(deploy.pes),
            "plan": {p.pe: list(p.operators) for p in deploy.pes},
            "widths": widths_of(build), "cores": build.plan.cores,
            "instrumented": bool(getattr(deploy, "instrumented", False)),
            "rate": result.throughput, "steady_rate": result.steady_throughput, "tuples": result.tuples,
            "wall_s": result.wall_s, "busy": busy,
            "restarts": [r["cause"] for r in (result.checkpoints or {}).get("restarts", [])]}


def widths_of(build) -> dict[str, int]:
    """A build's regions wider than 1 and their widths (its ``plan.json``)."""
    return {r.name: r.width for r in build.plan.regions if r.width > 1}


def switch_lines(first: Switch) -> list[str]:
    """Every switch explained, for the run's output; decisions that kept a plan first."""
    lines = []
    for sw in first.every:
        lines += [f"adaptive: phase {sw.phase} kept its plan without a stop: {k['reason']}" for k in sw.kept]
        if not sw.switched:
            lines.append(f"adaptive: {sw.reason}" if sw is first else f"adaptive: phase {sw.phase}: {sw.reason}")
        else:
            lines += _one(sw)
    return lines


def _one(sw: Switch) -> list[str]:
    b, a = sw.before, sw.after
    busy = ", ".join(f"{pe} {v:.0%}" for pe, v in sorted(b.get("busy", {}).items()))
    pause = f"{sw.pause_s:.2f} s" if sw.pause_s is not None else "not measured"
    back = sw.predicted.get("chosen") == "back"
    why = {"down": "the feed no longer needs the plan", "max_frac": "the plan has no headroom left",
           "review": "a plan for the same cores is predicted faster"}.get(
        sw.direction if sw.direction == "down" else (sw.trigger or {}).get("rule", ""), "the feed outgrew the plan")
    how = "(scaling down) " if sw.direction == "down" else "(back) " if back else ""
    return [
        f"adaptive switch {how}at checkpoint {sw.checkpoint} after "
        f"{sw.measured_s:.1f} s of phase {sw.phase} ({b['strategy']}, {b['pes']} PE(s), instrumented) measured "
        f"{rate(b['steady_rate'])} tuples/s, busy {busy}",
        *([f"  trigger: {sw.grew()}: {why}"] if sw.trigger else []),
        f"  decision: {sw.reason}",
        *(f"  refused: {r}" for r in sw.refused),
        f"  phase {sw.phase + 1} ({a['strategy']}, {a['pes']} PE(s) {_pes(a['plan'])}, widths "
        f"{a['widths'] or 'all 1'}) measured {rate(a['steady_rate'])} tuples/s",
        f"  pause {pause}: checkpoint {sw.checkpoint} completed -> every new PE running " + (
            f"(stop, drain, restore; refined {sw.timings.get('refine_s', 0):.1f} s and planned "
            f"{sw.timings.get('plan_s', 0):.1f} s while phase {sw.phase} ran)" if sw.ahead else
            f"(stop, drain, refine {sw.timings.get('refine_s', 0):.1f} s, plan {sw.timings.get('plan_s', 0):.1f} s, "
            f"restore)")]


def _pes(plan: dict[str, list[str]]) -> str:
    return "[" + "; ".join(f"{pe}: {' '.join(ops)}" for pe, ops in sorted(plan.items())) + "]"


def rate(value: float | None) -> str:
    return "?" if value is None else f"{value:,.0f}"
