"""How one run goes: the options of ``spadeopt run`` / ``profile`` / ``compare``, as one record.

The command line builds a ``RunOptions`` once (``cli``), the library passes it on
unchanged (``api.run``, ``api.profile``, ``bench.compare``) and the launcher applies it
(``deploy.launcher.run_build``): where Spark runs (``master``, ``conf``), where sinks
go (``out``, ``force``), who hears progress, and the run settings that override the
build's ``deploy.json`` for this run only (``plan.deployment.RunSettings``). Values are
checked here, once, when the record is made.

>>> RunOptions(stall_timeout=30).apply(RunSettings()).stall_timeout
30.0
>>> RunOptions(duration=0)
Traceback (most recent call last):
...
spadeopt.errors.UsageError: --duration must be a positive number of seconds, got 0
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from spadeopt.errors import UsageError
from spadeopt.plan.artefacts import MAX_BATCH
from spadeopt.plan.deployment import RunSettings


def _positive(flag: str, value: float | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
        raise UsageError(f"{flag} must be a positive number of seconds, got {value!r}")
    return float(value)


def _delay(value: float | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and 0 <= value <= 60):
        raise UsageError(f"--max-batch-delay must be 0 to 60000 ms, got {value * 1000 if isinstance(value, (int, float)) else value!r} ms")
    return float(value)


@dataclass(frozen=True)
class RunOptions:
    """Where and how to run a build; nothing here changes what the build computes."""

    master: str | None = None  # a Spark master URL; None: the build's (local mode)
    conf: Mapping[str, str] = field(default_factory=dict)  # --conf KEY=VALUE, over spadeopt's
    out: Path | None = None  # where sinks are written; None: nowhere (counted only)
    force: bool = False  # replace an --out / --build-dir that holds something else spadeopt made
    progress: Callable[[str], None] | None = field(default=None, compare=False)  # status lines
    insecure_links: bool = False  # plain links (measurements only)
    stall_timeout: float | None = None  # seconds without progress before a node fails
    duration: float | None = None  # seconds until the sources stop
    checkpoints: object = None  # a deploy.checkpointed_run.CheckpointOptions: checkpoints, restarts, resume
    max_batch_delay: float | None = None  # seconds a live source's partial batch may wait; None: the build's
    batch_size: int | None = None  # tuples per source batch; None: the build's (its plan's, optimize.batching)
    verify_fission: int | None = None  # first N records: the plan's regions against width 1 (orchestrate.verify_fission)
    metrics_port: int | None = None  # live metrics (deploy.live_metrics) served on this port (0: a free one); None: off
    metrics_host: str = "127.0.0.1"  # where they are served; any other than loopback needs the printed token
    on_live: Callable[[Any], None] | None = field(default=None, compare=False)  # given the live server (--live)
    live_extras: Callable[[], dict] | None = field(default=None, compare=False)  # checkpoints, restarts (live)

    def __post_init__(self) -> None:
        object.__setattr__(self, "stall_timeout", _positive("--stall-timeout", self.stall_timeout))
        object.__setattr__(self, "duration", _positive("--duration", self.duration))
        object.__setattr__(self, "max_batch_delay", _delay(self.max_batch_delay))
        b = self.batch_size
        if b is not None and (isinstance(b, bool) or not isinstance(b, int) or not 1 <= b <= MAX_BATCH):
            raise UsageError(f"--batch-size must be a whole number of tuples from 1 to {MAX_BATCH}, got {b!r}")
        n = self.verify_fission
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise UsageError(f"--verify-fission needs a positive number of records, got {n!r}")
        port = self.metrics_port
        if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535):
            raise UsageError(f"--metrics-port must be a TCP port, 0 to 65535 (0: a free one), got {port!r}")
        object.__setattr__(self, "conf", dict(self.conf))
        if self.out is not None:
            object.__setattr__(self, "out", Path(self.out))

    def say(self, line: str) -> None:
        if self.progress is not None:
            self.progress(line)

    def replace(self, **changes) -> RunOptions:
        return dataclasses.replace(self, **changes)

    def apply(self, settings: RunSettings) -> RunSettings:
        """The build's run settings with this run's options over them."""
        return settings.changed(insecure_links=True if self.insecure_links else None,
                                stall_timeout=self.stall_timeout, duration=self.duration,
                                max_batch_delay=self.max_batch_delay, batch_size=self.batch_size)


@dataclass(frozen=True)
class SettingsChange:
    """What a caller of ``deploy.launcher.run_build`` changes of the build's run settings
    for one run (``plan.deployment.RunSettings`` fields; None: unchanged). Not a message:
    it never leaves the driver."""

    batch_size: int | None = None
    hwm: int | None = None
    max_frame: int | None = None
    max_batch_delay: float | None = None
    stall_timeout: float | None = None
    profile: Any = None  # a plan.deployment.Sampling
    checkpoint: Any = None  # a plan.deployment.CheckpointChannel
    source_limit: int | None = None

    def changes(self) -> dict[str, Any]:
        """The fields set, for ``RunSettings.changed``."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}
