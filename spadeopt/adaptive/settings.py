"""``run --adaptive``'s settings and the rules' constants (issue 39; records 069, 071)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from spadeopt import api
from spadeopt.errors import UsageError

DEFAULT_ADAPT_AFTER = 5.0  # s of measurement before a switch (each phase measures this long first)
DEFAULT_INTERVAL = 1.0  # s between checkpoints when --checkpoint-interval is not given
GAIN = 1.05  # FATM's predicted rate must beat the running plan's by this factor to be chosen
HEADROOM = 2.0  # scaling down: the smaller plan must be predicted at this many times the feed's rate
REVIEW_S = 30.0  # s between a live phase's reviews: FATM for its own cores on fresh costs (decided while it runs)
REVIEW_GAIN = 1.2  # a review switches only to a plan predicted this many times the running plan's rate
SLOWER = 0.95  # a plan an up switch chose, read under this x what the plan before it sustained: switch back
MAX_SWITCHES = 8  # a live run's switches, at most (a bound on flapping beside the rules' hysteresis)
SAMPLE_RATE = 0.002
"""Phase 1's sampling rate: a fifth of `spadeopt profile`'s. The refinement in the pause
reads every sample line (peer at 1 %: 36 MB after 5 s, refine 4.9 s of a 7.8 s pause);
a few seconds at full speed still give each operator thousands of samples."""


@dataclass(frozen=True)
class AdaptOptions:
    """``--adaptive``'s settings: the measurement window, the checkpoints, the sampling."""

    adapt_after: float = DEFAULT_ADAPT_AFTER
    interval: float = DEFAULT_INTERVAL
    checkpoint_dir: Path | None = None  # default: WORK/checkpoints
    keep: int = 3
    restart_attempts: int = 3
    sample_rate: float = SAMPLE_RATE
    calibration: Path | None = None
    start: str = "all"  # phase 1's plan: a strategy (all, none, manual) or a plan.json (a given build's)
    widths: Mapping[str, int] | None = None  # phase 1's region widths (--width; default: every region at 1)
    max_switches: int = MAX_SWITCHES  # a live run's; a bounded run switches once

    def __post_init__(self) -> None:
        if not (isinstance(self.adapt_after, int | float) and math.isfinite(self.adapt_after)
                and self.adapt_after >= 0):
            raise UsageError(f"--adapt-after must be a number of seconds >= 0 (how long phase 1 measures "
                             f"before the switch), got {self.adapt_after!r}")
        if not (self.interval > 0):
            raise UsageError(f"--checkpoint-interval must be a positive number of seconds, got {self.interval!r}")
        if not (isinstance(self.max_switches, int) and self.max_switches >= 1):
            raise UsageError(f"--max-switches must be a whole number >= 1, got {self.max_switches!r}")


def options_from(app_ref: str, fusion: str | None, widths, resume, adapt_after, interval, directory, keep: int,
                 attempts: int, calibration, max_switches: int | None = None) -> AdaptOptions:
    """``run --adaptive``'s flags as ``AdaptOptions``; what it cannot combine with, refused."""
    if api.is_build(app_ref):
        if fusion is not None or widths:
            raise UsageError(f"--adaptive starts from the plan of build {app_ref}: drop --fusion and --width")
        fusion = str(Path(app_ref) / "plan.json")
    from spadeopt.optimize.strategies import STRATEGY_BY_NAME

    found = STRATEGY_BY_NAME.get(fusion or "")
    if found is not None and found.needs_profile:
        raise UsageError(f"--adaptive measures the profile {found.label} plans from: start from --fusion all (the "
                         f"default), none, manual or a build's plan.json, not {fusion}")
    if widths and fusion is not None and fusion.endswith(".json"):
        raise UsageError("--width cannot change a plan.json: it records its regions' widths")
    if resume is not None:
        raise UsageError("--adaptive starts a run afresh: it cannot --resume (resume its checkpoint directory "
                         "with `spadeopt run BUILD --resume DIR`)")
    if keep < 1 or attempts < 0:
        raise UsageError(f"--checkpoints-kept must be >= 1 and --restart-attempts >= 0 (got {keep}, {attempts})")
    return AdaptOptions(DEFAULT_ADAPT_AFTER if adapt_after is None else adapt_after,
                        DEFAULT_INTERVAL if interval is None else interval, directory, keep, attempts,
                        calibration=calibration, start=fusion or "all", widths=dict(widths) if widths else None,
                        max_switches=MAX_SWITCHES if max_switches is None else max_switches)
