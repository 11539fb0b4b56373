"""Decide a switch while the phase still runs, and stop only to switch (record 076).

A switch used to stop the phase at a checkpoint first, then refine its samples (Spark) and
plan (FATM) while every PE was down: the pause held both. In a local run the driver now
asks the running PEs for their samples so far (``runtime.pe_samples``: each instrumented
PE writes its sample file and answers with the request's number), refines and plans while
the phase goes on, and stops only when the decision changes the plan: at a checkpoint that
completed since the decision began (at once, if one did), else at the next. The pause is then the stop, the drain and the restore. A decision that keeps a live
run's plan costs no stop at all: it is recorded in the phase's ``Switch.kept`` and the
rule that asked goes quiet for the rest of the phase (the hysteresis record 073 gave
kept switches). A bounded run's kept decision still switches to the plan's production
build, as before: the rest of the run goes faster uninstrumented.

Where the driver cannot see the PEs' files (a cluster: the samples come back when a PE
ends), or when a PE does not answer within ``SNAPSHOT_TIMEOUT``, the phase stops first
and the decision is made in the pause, as before (``Ahead.build`` stays None).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from spadeopt.adaptive.switch import Switch
from spadeopt.atomic import write_atomic
from spadeopt.runtime.pe_samples import SAMPLES_FILE, answer_path

SNAPSHOT_TIMEOUT = 15.0  # s for every PE to write its samples so far (notional's 42 MB at 0.2 %: several s)


def snapshot(build, run_dir: Path, timeout: float = SNAPSHOT_TIMEOUT) -> bool:
    """Ask the running phase's PEs (of ``build``, sampling into ``run_dir``) for their
    samples so far; True once every one has answered."""
    number = str(time.time_ns())
    progress = Path(build.directory) / "progress"
    progress.mkdir(parents=True, exist_ok=True)
    write_atomic(progress / SAMPLES_FILE, number)
    pes = [pe.pe_id for pe in build.plan.pes]
    deadline = time.time() + timeout
    while time.time() < deadline:
        if all(_answered(run_dir, pe, number) for pe in pes):
            return True
        time.sleep(0.05)
    return False


def _answered(run_dir: Path, pe: str, number: str) -> bool:
    try:
        return answer_path(run_dir, pe).read_text().strip() == number
    except OSError:
        return False


class Ahead:
    """``watch.measure``'s ``decide`` for one phase: its samples so far -> ``plan_it(sw,
    wall_s)`` (the decision, said in ``sw``, the phase's ``Switch``) -> True to stop and
    switch to ``self.build``, or False (a live run's kept plan: no stop). ``build`` and
    ``run_dir``: the running phase's build and sample directory."""

    def __init__(self, sw: Switch, plan_it: Callable[[Switch, float], Any], build, run_dir: Path,
                 say: Callable[[str], None], live: bool) -> None:
        self.sw, self.plan_it, self.phase_build, self.run_dir = sw, plan_it, build, run_dir
        self.say, self.live = say, live
        self.build: Any = None
        self.asked = False  # a decision was begun (a run that ends meanwhile ends unswitched)

    def __call__(self, said: dict[str, Any] | None, wall_s: float) -> bool:
        sw = self.sw
        t0 = time.time()
        self.asked = True
        if not snapshot(self.phase_build, self.run_dir):
            self.say(f"adaptive: phase {sw.phase}'s PEs did not write their samples within {SNAPSHOT_TIMEOUT:g} s: "
                     f"it stops first and the switch is decided in the pause")
            return True
        sw.trigger = said
        self.say(f"adaptive: deciding while phase {sw.phase} runs (its samples so far, "
                 f"{time.time() - t0:.2f} s to write)")
        try:
            build = self.plan_it(sw, wall_s)
        except Exception as exc:  # noqa: BLE001 - e.g. the phase ended meanwhile and took Spark with it
            self.say(f"adaptive: phase {sw.phase}'s switch could not be decided while it ran "
                     f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}): it stops first")
            return True
        if self.live and sw.predicted.get("chosen") == "start":
            sw.kept.append({"at": said and said.get("at"), "trigger": said, "reason": sw.reason,
                            "predicted": sw.predicted, "refused": sw.refused, "timings": sw.timings})
            self.say(f"adaptive: phase {sw.phase} keeps its plan, without a stop: {sw.reason}")
            sw.predicted, sw.refused, sw.trigger = {}, [], None
            sw.timings = {k: v for k, v in sw.timings.items() if k == "warm_up_s"}  # the run's, not the decision's
            return False
        self.build, sw.ahead = build, True
        return True
