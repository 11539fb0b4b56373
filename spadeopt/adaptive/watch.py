"""One phase of an adaptive run: a checkpointed, instrumented run of one plan, stopped at
the first checkpoint after its measurement window (bounded sources) or after a live
feed's rule trips (``Triggers``: the lag keeps growing, a PE stays above MaxFrac with a
core to spare; the plan idles)."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from spadeopt.adaptive.lag import WINDOW_S
from spadeopt.adaptive.settings import AdaptOptions
from spadeopt.deploy.launcher import RunResult
from spadeopt.deploy.options import RunOptions


def measure(build, store, adapt: AdaptOptions, options: RunOptions, run_dir: Path, scratch: Path,
            view: dict[str, Any], *, live: bool = False, up: bool = True, down: bool = False,
            resume: bool = False, cores: int | None = None, full: bool | None = None,
            decide: Callable[[dict[str, Any] | None, float], bool] | None = None,
            review: float | None = None) -> tuple[RunResult, dict[str, Any] | None]:
    """Run a phase as a checkpointed run (a failed PE restarts from the last checkpoint,
    ``--restart-attempts``; ``resume``: from the store's newest checkpoint); stop its sources
    at the first checkpoint completed after the window (with a live source: after the
    window, once ``Triggers`` fires: ``up`` its lag rule, ``full`` its MaxFrac rule (default:
    as ``up``), ``down`` its idle rule; none: the phase runs to its end; ``cores``: the
    run's, default the plan's; ``decide(trigger, seconds run)``: called once the window is
    over (and a rule fired) while the phase runs, True to stop at the next checkpoint after
    it, False to go on watching with the rule that fired quiet: ``adaptive.ahead``;
    ``review``: seconds between ``Triggers``' reviews, None: none). The run's result, and the
    stop (checkpoint id, times, the trigger) or None when the run ended first (its sinks
    then complete in ``scratch``). ``view`` is the job page's ``adaptive`` section."""
    from spadeopt.deploy import checkpointed_run
    from spadeopt.deploy.launcher import request_stop
    from spadeopt.plan.deployment import Sampling

    t0 = time.time()
    stop: dict[str, Any] = {}
    done = threading.Event()
    attempts: list = []  # the run's Recovery (its coord: the current attempt's coordinator)
    trigger = Triggers(options, up, down, cores or build.plan.cores, up if full is None else full,
                       review) if live else None
    run_options = options.replace(out=scratch, live_extras=lambda: view)
    if trigger:
        run_options = run_options.replace(on_live=trigger.on_live)

    def watch(rec) -> None:
        seen, coord, decided = 0, None, decide is None
        while not done.wait(0.02):
            if rec.coord is not coord:  # a restart: the new attempt's coordinator
                seen, coord = 0, rec.coord
            running = rec.first.t_running  # the window starts when every PE runs (not at Spark's start)
            if not running or time.time() - running < adapt.adapt_after or (trigger and not trigger.fired()):
                seen = len(coord.completed)
                continue
            if not decided:
                decided = decide(trigger.said if trigger else None, time.time() - t0)
                if not decided:
                    if trigger is None:
                        return  # a bounded phase kept: it runs to its end
                    trigger.quiet()
                    seen = len(rec.coord.completed)
                continue  # switching: stop at a checkpoint completed since the decision began (at once, if one did)
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

    ck = checkpointed_run.CheckpointOptions(adapt.interval, store.root, adapt.keep, adapt.restart_attempts,
                                            resume=resume)
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


class Triggers:
    """A phase's live sources' lag and its PEs' CPU, from the run's live metrics (their
    server is handed to ``on_live``), sampled at most twice a second by the watch thread.
    ``fired()`` once a rule trips, then stays fired, ``said`` telling how: with ``up``,
    ``LagWatch`` (the lag keeps growing); with ``full``, ``SaturatedWatch`` (a PE above
    MaxFrac while ``cores``, the run's, leave room); every ``review`` seconds, a review
    (FATM for the running plan's cores, on fresh costs); with ``down``, ``IdleWatch`` (the plan idles). An up
    trigger also records the reading it tripped on: the busiest PE, the PEs' CPU against
    ``cores``, and how much of the time the sources' PEs were backpressured."""

    def __init__(self, options: RunOptions, up: bool = True, down: bool = False, cores: int = 1,
                 full: bool = True, review: float | None = None) -> None:
        from spadeopt.adaptive.lag import IdleWatch, LagWatch, SaturatedWatch

        self._user = options.on_live
        self._server: Any = None
        self._lag = LagWatch() if up else None
        self._full = SaturatedWatch(cores) if full else None
        self._idle = IdleWatch() if down else None
        self._cores = cores
        self._review, self._since = review, None  # the review's period and its last (or the first reading)
        self._rates: deque[tuple[float, float]] = deque()  # (time, the live sources' rate), the last window's
        self._last = 0.0
        self.said: dict[str, Any] | None = None

    def quiet(self) -> None:
        """The rule(s) that fired go quiet (a decision kept the plan); the others go on. A
        review is made again a period later."""
        if self.said is not None:
            if self.said["rule"] == "review":
                self._since = time.time()
            elif self.said["direction"] == "down":
                self._idle = None
            else:
                self._lag = self._full = None
            self.said = None

    def on_live(self, server: Any) -> None:
        self._server = server
        if self._user is not None:
            self._user(server)

    def fired(self) -> bool:
        now = time.time()
        if self.said is not None or self._server is None or now - self._last < 0.5:
            return self.said is not None
        self._last = now
        got = reading(self._server.state(), self._cores)
        if got is not None:
            self.said = self._rules(now, got)
        return self.said is not None

    def _rules(self, now: float, r: dict[str, Any]) -> dict[str, Any] | None:
        """The first rule the reading ``r`` trips (each rule is fed every reading), or None."""
        grew = self._lag is not None and self._lag.add(now, r["lag"])
        full = self._full is not None and r["busiest_cpu"] is not None \
            and self._full.add(now, r["lag"], r["busiest_cpu"], r["cpu_total"])
        idle = self._idle is not None and r["busiest_cpu"] is not None \
            and self._idle.add(now, r["lag"], r["busiest_cpu"], r["rate"])
        self._rates.append((now, r["rate"]))
        while self._rates[0][0] < now - WINDOW_S:
            self._rates.popleft()
        seen = {k: r[k] for k in ("busiest_pe", "busiest_cpu", "cpu_total", "cores", "backpressure")}
        seen["rate"] = round(sum(v for _, v in self._rates) / len(self._rates), 1)  # read while the rule held
        if grew:
            by, newest, over = self._lag.growth()
            return {"direction": "up", "rule": "lag", "grew_by": int(by), "lag": newest, "over_s": round(over, 3),
                    **seen, "at": now}
        if full:
            return {"direction": "up", "rule": "max_frac", **seen, **self._full.said(), "at": now}
        if idle:
            return {"direction": "down", "rule": "idle", **self._idle.said(), "at": now}
        if self._review is not None:
            self._since = now if self._since is None else self._since
            if now - self._since >= self._review:
                return {"direction": "up", "rule": "review", "every_s": self._review, **seen, "at": now}
        return None


def reading(state: dict[str, Any], cores: int) -> dict[str, Any] | None:
    """What the rules read off a live state (``spadeopt.live``'s dict): the live sources'
    lag and rate, the busiest PE and its CPU, the PEs' CPU, and the largest share of the
    last interval a live source's PE spent blocked on a full link; None before a live
    source reports its lag."""
    rows = [r for r in state["sources"] if r.get("live") and isinstance(r.get("lag"), int)]
    if not rows:
        return None
    cpu = {p["pe"]: p["cpu"] for p in state["pes"] if isinstance(p.get("cpu"), int | float)}
    blocked = {p["pe"]: p.get("backpressure") or 0.0 for p in state["pes"]}
    busiest = max(cpu, key=cpu.get, default=None)
    return {"lag": sum(r["lag"] for r in rows), "rate": sum(r.get("rate") or 0.0 for r in rows),
            "busiest_pe": busiest, "busiest_cpu": None if busiest is None else round(cpu[busiest], 3),
            "cpu_total": round(sum(cpu.values()), 3), "cores": cores,
            "backpressure": round(max((blocked.get(r.get("pe"), 0.0) for r in rows), default=0.0), 3)}
