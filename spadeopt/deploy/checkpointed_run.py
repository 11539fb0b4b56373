"""A checkpointed run: restarts from the last complete checkpoint, resume, the report.

``run``: a run with checkpoints; when it fails (a PE died, an executor was lost, an
operator raised) it restarts from the last complete checkpoint, up to
``restart_attempts`` times with backoff, and reports each restart (cause, checkpoint,
time to recover, how). A PE that failed while its agent lives is restarted *in place*:
the agent reports it on the driver's rendezvous, and every agent stops its PEs and
starts them again (forked by its zygote) from the checkpoint, with a new coordinator,
in the same Spark stage. An executor lost (its agent gone), or an in-place restart that
fails before the PEs run again, fails the stage: then the whole barrier stage is
restarted, every agent and every PE. ``resume`` continues from a checkpoint directory.

The coordinator is ``deploy.checkpoint_coordinator``, the store
``deploy.checkpoint_store``; inside a PE: ``runtime.barrier_alignment``.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spadeopt.deploy.checkpoint_coordinator import Coordinator
from spadeopt.deploy.checkpoint_rescale import load_facts
from spadeopt.deploy.checkpoint_store import Checkpoint, CheckpointStore, finish_sinks
from spadeopt.deploy.options import SettingsChange
from spadeopt.errors import UsageError
from spadeopt.model.cycles import first_cycle
from spadeopt.plan.deployment import Deployment

IN_PLACE = "in place"  # a restart by the live agents, in the same Spark stage
NEW_STAGE = "new stage"  # a restart of the whole Spark barrier stage (an executor lost, an in-place restart failed)


def pe_cycle(deploy: Deployment) -> list[str] | None:
    """A cycle of PEs along links (``[a, b, ..., a]``), or None. Aligned barriers cannot
    cross one: a PE forwards barrier ``n`` only once it has it on every input link, and
    on a cycle each PE waits for the other (FMAN on bargain fuses the source with the
    final merges, so the source's PE feeds the group PEs that feed it back)."""
    return first_cycle(sorted({p.pe for p in deploy.pes}), deploy.pe_successors())



@dataclass
class Restart:
    attempt: int
    cause: str
    checkpoint: int | None
    failed_at: float
    recovered_s: float | None = None  # failure -> every PE restored and running
    first_output_s: float | None = None  # failure -> the first tuple at a sink after the restore
    first_checkpoint_s: float | None = None  # failure -> the first checkpoint after it completed
    how: str = NEW_STAGE  # IN_PLACE: the agents restarted every PE; NEW_STAGE: a new Spark barrier stage

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)




@dataclass(frozen=True)
class CheckpointOptions:
    """``--checkpoint-interval``, ``--checkpoint-dir``, ``--checkpoints-kept``,
    ``--restart-attempts``, ``--resume``."""

    interval: float
    directory: Path
    keep: int = 3
    restart_attempts: int = 0
    resume: bool = False
    backoff: float = 1.0  # seconds before the first restart; doubled each time, at most 30

    def __post_init__(self) -> None:
        if not (self.interval > 0):
            raise UsageError(f"--checkpoint-interval must be a positive number of seconds, got {self.interval!r}")
        if self.keep < 1:
            raise UsageError(f"--checkpoints-kept must be at least 1, got {self.keep}")
        if self.restart_attempts < 0:
            raise UsageError(f"--restart-attempts must be 0 or more, got {self.restart_attempts}")


@dataclass
class CheckpointReport:
    checkpoints: int = 0
    restarts: list[Restart] = field(default_factory=list)
    resumed_from: int | None = None
    mean_size_bytes: float = 0.0
    mean_checkpoint_s: float = 0.0
    stages: int = 0  # Spark barrier stages run (1 + the restarts that needed a new stage)
    running_at: float | None = None  # driver's clock: every PE of the first attempt restored and running

    def to_json(self) -> dict[str, Any]:
        return {"checkpoints": self.checkpoints, "stages": self.stages,
                "restarts": [r.to_json() for r in self.restarts],
                "resumed_from": self.resumed_from, "mean_size_bytes": self.mean_size_bytes,
                "mean_checkpoint_s": self.mean_checkpoint_s, "running_at": self.running_at}


def run(build_dir: Path, options: Any, ck: CheckpointOptions, *, sampling: Any = None,
        on_start: Any = None) -> Any:
    """Run a checkpointing build (``deploy.launcher.run_build``) with recovery; returns
    its ``RunResult`` with ``checkpoints`` (a ``CheckpointReport``) set. ``sampling``: an
    instrumented build's (``run_build``'s); ``on_start(recovery)`` is called before the
    first attempt (``run --adaptive`` watches ``recovery.coord``, the current attempt's
    coordinator, to stop at a checkpoint)."""
    from spadeopt.deploy.launcher import run_build
    from spadeopt.deploy.masters import is_local
    from spadeopt.errors import RunError
    from spadeopt.plan.artefacts import load_deploy

    build_dir = Path(build_dir)
    deploy = load_deploy(build_dir)
    if not deploy.checkpoints:
        raise UsageError(f"build {build_dir} was generated without checkpoints: its operators do not register "
                         f"their state; rebuild it with `spadeopt build --checkpoints` or `spadeopt optimize "
                         f"--checkpoints`, or give `spadeopt run` the app with --checkpoint-interval")
    cycle = pe_cycle(deploy)
    if cycle:
        raise UsageError(f"checkpoints cannot be taken on this plan: its PEs form a cycle ({' -> '.join(cycle)}), and "
                         f"an aligned barrier cannot cross a cycle of PEs (each would wait for the other's). Use a "
                         f"plan whose PE graph is acyclic (--fusion all or none, or fuse() annotations that do not put "
                         f"a source and the operators after its downstream PEs in one PE)")
    if options.insecure_links or deploy.settings.insecure_links:
        raise UsageError("checkpoints need authenticated links (a barrier is told from a tuple by the link it "
                         "came on): drop --insecure-links")
    store = CheckpointStore(ck.directory, ck.keep, options.say)
    facts = load_facts(build_dir)  # how a checkpoint of other region widths moves (rescale.json)
    restore = None
    if ck.resume:
        if not store.ids():
            raise UsageError(f"--resume {ck.directory}: no checkpoint there")
        restore = store.latest(deploy, facts)  # other region widths: rescaled
        if restore is None:
            raise UsageError(f"--resume {ck.directory}: no complete checkpoint there (every one was skipped)")
        options.say(f"resuming '{deploy.app}' from checkpoint {restore.id} ({ck.directory})")
    elif store.ids() or (store.sinks.is_dir() and any(store.sinks.iterdir())):
        raise UsageError(f"--checkpoint-dir {ck.directory} holds checkpoints of an earlier run: resume it with "
                         f"--resume {ck.directory}, or choose an empty directory")
    store.root.mkdir(parents=True, exist_ok=True)
    store.rewind_sinks(restore)
    report = CheckpointReport(resumed_from=restore.id if restore else None)
    master = options.master or deploy.spark.master
    rec = Recovery(store, deploy, ck, report, options.say, restore, local=is_local(master), facts=facts)
    given = options.live_extras  # a caller's own (run --adaptive: the switch), then the checkpoint panel
    options = options.replace(live_extras=rec.live if given is None else lambda: {**given(), **rec.live()})
    if on_start is not None:
        on_start(rec)
    while True:
        try:
            report.stages += 1
            result = run_build(build_dir, options, sampling=sampling,
                               settings=SettingsChange(checkpoint=rec.coord.channel()),
                               restart_in_place=rec.in_place if ck.restart_attempts else None)
        except RunError as exc:
            if rec.restart(exc, time.time(), NEW_STAGE) is None:
                raise
            time.sleep(_backoff(ck, rec.attempt))
            continue
        tails = rec.finish()
        if options.out is not None:
            finish_sinks(store, Path(options.out), tails)
        result.checkpoints = report.to_json()
        for r in report.restarts:
            options.say(f"restart {r.attempt} ({r.how}): {r.cause} -> checkpoint {r.checkpoint}, running again "
                        f"{r.recovered_s:.1f} s after the failure"
                        + (f", first new output after {r.first_output_s:.1f} s" if r.first_output_s is not None
                           else "") if r.recovered_s is not None else
                        f"restart {r.attempt} ({r.how}): {r.cause} -> checkpoint {r.checkpoint}")
        return result


class Recovery:
    """The restarts of one checkpointed run (``run``): the current attempt's
    coordinator, the attempts used, the report's restarts and figures.

    ``restart`` ends the current attempt (its coordinator closed, so no checkpoint
    completes after it) and, while attempts are left, records a restart from the newest
    complete checkpoint, rewinds the committed sinks to it and makes the next attempt's
    coordinator. ``in_place`` is ``run_build``'s ``restart_in_place``: called on the
    rendezvous's thread when an agent reports a failed PE."""

    def __init__(self, store: CheckpointStore, deploy: Deployment, ck: CheckpointOptions,
                 report: CheckpointReport, say, restore: Checkpoint | None, local: bool = True,
                 facts: dict | None = None) -> None:
        self.store, self.deploy, self.ck, self.report, self.say, self.local = store, deploy, ck, report, say, local
        self.facts = facts  # a restart before the first checkpoint of a rescaled run rescales again
        self.attempt = 0
        self.sizes: list[int] = []
        self.times: list[float] = []
        self._lock = threading.Lock()
        self.coord = Coordinator(store, deploy, ck.interval, restore, local=local)
        self.first = self.coord  # its t_running: when the run (a resumed one: from its checkpoint) ran

    def restart(self, exc: BaseException, failed_at: float, how: str) -> Coordinator | None:
        with self._lock:
            coord = self.coord
            coord.close()  # nothing completes after this: the rewind below is final
            _account(coord, self.report, self.sizes, self.times)
            last = self.report.restarts[-1] if self.report.restarts else None
            if last is not None and last.recovered_s is None and coord.t_running:
                _recovered(last, coord)
            if self.attempt >= self.ck.restart_attempts:
                return None
            self.attempt += 1
            chk = self.store.latest(self.deploy, self.facts)
            self.store.rewind_sinks(chk)
            cause = str(exc).splitlines()[0]
            self.report.restarts.append(Restart(self.attempt, cause, chk.id if chk else None, failed_at, how=how))
            self.say(f"RESTART {self.attempt}/{self.ck.restart_attempts} ({how}): {cause}; restarting from "
                     + (f"checkpoint {chk.id}" if chk else "the beginning (no complete checkpoint yet)"))
            self.coord = Coordinator(self.store, self.deploy, self.ck.interval, chk, local=self.local)
            return self.coord

    def in_place(self, exc: BaseException) -> dict[str, Any] | None:
        """A PE failed while its agent lives: the new coordinator's channel and the
        backoff for every agent, or None (no attempt left: the stage fails with ``exc``)."""
        failed_at = time.time()
        if self.attempt >= self.ck.restart_attempts:
            return None
        coord = self.restart(exc, failed_at, IN_PLACE)
        if coord is None:
            return None
        return {"checkpoint": coord.channel().to_json(), "delay": _backoff(self.ck, self.attempt)}

    def live(self) -> dict[str, Any]:
        """The checkpoints and restarts so far, for the live metrics (``deploy.live_state``)."""
        with self._lock:
            coord = self.coord
            sizes, times = self.sizes + coord.sizes, self.times + coord.align_s
            done = coord.completed
            return {"restarts": len(self.report.restarts), "checkpoints": {
                "taken": self.report.checkpoints + len(done), "last_id": done[-1] if done else None,
                "last_duration_s": times[-1] if times else None, "last_bytes": sizes[-1] if sizes else None,
                "age_s": time.time() - coord.t_last if coord.t_last else None,
                "duration_seconds_total": sum(times), "bytes_total": sum(sizes)}}

    def finish(self) -> dict[str, bytes]:
        """The run succeeded: the last coordinator's lines of checkpoints that never
        completed (``Coordinator.finish``); the report's figures filled in."""
        coord = self.coord
        last = self.report.restarts[-1] if self.report.restarts else None
        if last is not None and last.recovered_s is None:
            _recovered(last, coord)
        tails = coord.finish()
        self.report.running_at = self.first.t_running
        _account(coord, self.report, self.sizes, self.times)
        self.report.mean_size_bytes = sum(self.sizes) / len(self.sizes) if self.sizes else 0.0
        self.report.mean_checkpoint_s = sum(self.times) / len(self.times) if self.times else 0.0
        return tails


def _backoff(ck: CheckpointOptions, attempt: int) -> float:
    return min(ck.backoff * 2 ** (attempt - 1), 30.0)


def _recovered(r: Restart, coord: Coordinator) -> None:
    if coord.t_running:
        r.recovered_s = coord.t_running - r.failed_at
    if coord.t_first:
        r.first_checkpoint_s = coord.t_first - r.failed_at
    if coord.t_output:
        r.first_output_s = coord.t_output - r.failed_at


def _account(coord: Coordinator, report: CheckpointReport, sizes: list[int], times: list[float]) -> None:
    report.checkpoints += len(coord.completed)
    sizes.extend(coord.sizes)
    times.extend(coord.align_s)
