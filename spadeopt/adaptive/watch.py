"""One phase of an adaptive run: a checkpointed, instrumented run of one plan, stopped at
the first checkpoint after its measurement window (bounded sources) or after a live
feed's rule trips (``Triggers``: the lag keeps growing; the plan idles)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from spadeopt.adaptive.settings import AdaptOptions
from spadeopt.deploy.launcher import RunResult
from spadeopt.deploy.options import RunOptions


def measure(build, store, adapt: AdaptOptions, options: RunOptions, run_dir: Path, scratch: Path,
            view: dict[str, Any], *, live: bool = False, up: bool = True, down: bool = False,
            resume: bool = False) -> tuple[RunResult, dict[str, Any] | None]:
    """Run a phase as a checkpointed run (a failed PE restarts from the last checkpoint,
    ``--restart-attempts``; ``resume``: from the store's newest checkpoint); stop its sources
    at the first checkpoint completed after the window (with a live source: after the
    window, once ``Triggers`` fires: ``up`` its lag rule, ``down`` its idle rule; neither: the
    phase runs to its end). The run's result, and the
    stop (checkpoint id, times, the trigger) or None when the run ended first (its sinks
    then complete in ``scratch``). ``view`` is the job page's ``adaptive`` section."""
    from spadeopt.deploy import checkpointed_run
    from spadeopt.deploy.launcher import request_stop
    from spadeopt.plan.deployment import Sampling

    t0 = time.time()
    stop: dict[str, Any] = {}
    done = threading.Event()
    attempts: list = []  # the run's Recovery (its coord: the current attempt's coordinator)
    trigger = Triggers(options, up, down) if live else None
    run_options = options.replace(out=scratch, live_extras=lambda: view)
    if trigger:
        run_options = run_options.replace(on_live=trigger.on_live)

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
    server is handed to ``on_live``), sampled at most twice a second by the watch thread;
    ``fired()`` once, with ``up``, ``LagWatch`` says the lag keeps growing ("up") or, with
    ``down``, ``IdleWatch`` says the plan idles ("down"); then it stays fired, ``said``
    telling how."""

    def __init__(self, options: RunOptions, up: bool = True, down: bool = False) -> None:
        from spadeopt.adaptive.lag import IdleWatch, LagWatch

        self._user = options.on_live
        self._server: Any = None
        self._lag = LagWatch() if up else None
        self._idle = IdleWatch() if down else None
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
        state = self._server.state()
        rows = [r for r in state["sources"] if r.get("live") and isinstance(r.get("lag"), int)]
        if not rows:
            return False
        lag = sum(r["lag"] for r in rows)
        if self._lag is not None and self._lag.add(now, lag):
            grew, newest, over = self._lag.growth()
            self.said = {"direction": "up", "grew_by": int(grew), "lag": newest, "over_s": round(over, 3), "at": now}
        elif self._idle is not None:
            busiest = max((p["cpu"] for p in state["pes"] if isinstance(p.get("cpu"), int | float)), default=None)
            rate = sum(r.get("rate") or 0.0 for r in rows)
            if busiest is not None and self._idle.add(now, lag, busiest, rate):
                self.said = {"direction": "down", **self._idle.said(), "at": now}
        return self.said is not None
