"""The communication-cost mapping ``v(rate, size) -> CPU fraction`` (digest 003 §4.4).

A calibration file (``profiles/calibration/<host>.json``, written by
``spadeopt calibrate``, format in ``docs/profile-format.md``) holds a grid of ``v`` over
tuple rates (tuples/s crossing a PE boundary, in and out counted together, as
``Rate(P)`` counts them) and tuple sizes (bytes), plus the CPU score of the host that
measured it. :class:`CommCost` looks ``v`` up:

* **Inside the grid**: bilinear interpolation in linear rate and linear size (what
  ``scipy.interpolate.RegularGridInterpolator(method="linear")`` computes, in plain
  Python: GreedyFuse asks for one scalar at a time, tens of thousands of times per plan,
  and scipy's per-call overhead was 80 % of planning bargain for 16 cores). The per-tuple cost of sending and receiving is about
  ``a + b·size``, so ``v ≈ rate·(a + b·size)`` is bilinear and the interpolation is
  close to exact between grid points.
* **Outside**: rates above the grid scale ``v`` proportionally (constant per-tuple cost of
  the highest measured rate); sizes below the grid use the smallest size; sizes above it
  extend the last size segment linearly. The grid has a rate-0 row (``v = 0``).
* **Monotone**: the stored grid is non-decreasing in rate and in size (``calibrate``
  enforces it with a cumulative maximum along each axis, so measurement noise cannot make
  more traffic look cheaper); bilinear interpolation and the extensions above keep that.
  Loading refuses a grid that is not.
* **Other hardware** (paper footnote 1): ``v_new = v_old × score_old / score_new``, with
  the peak score of the same fixed Python benchmark
  (:func:`spadeopt.refine.cpuscore.peak_cpu_score`) on both hosts: a faster CPU spends a
  smaller fraction on the same traffic.

``CommCost`` satisfies :class:`spadeopt.optimize.problem.CommModel`.
"""

from __future__ import annotations

import math
import os
from bisect import bisect_right
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np

from spadeopt.errors import ProfileError, UsageError
from spadeopt.refine.profile import read_json

SCHEMA_VERSION: Final = 1
KIND: Final = "spadeopt-calibration"
_HINT = "calibrate this machine with `spadeopt calibrate -o profiles/calibration/<host>.json`"


class CommCost:
    """``v(rate, size)`` from a calibration grid, optionally rescaled to another CPU score.

    >>> v = CommCost([0.0, 1000.0], [16.0, 1024.0], [[0.0, 0.0], [0.001, 0.003]], score=1.0)
    >>> round(v.cost(500.0, 16.0), 6), round(v.cost(2000.0, 1024.0), 6)
    (0.0005, 0.006)
    >>> round(v.scaled_to(2.0).cost(1000.0, 16.0), 6)
    0.0005
    """

    def __init__(self, rates: Sequence[float], sizes: Sequence[float], v: Sequence[Sequence[float]],
                 score: float, *, scale: float = 1.0, source: str = "<grid>") -> None:
        problems = _grid_problems(rates, sizes, v, score)
        if problems:
            raise ProfileError(f"{source}: invalid calibration grid: " + "; ".join(problems) + f"; {_HINT}")
        if not (math.isfinite(scale) and scale > 0):
            raise UsageError(f"comm-cost scale must be a finite number > 0; got {scale!r}")
        self.rates = np.asarray(rates, dtype=float)
        self.sizes = np.asarray(sizes, dtype=float)
        self.grid = np.asarray(v, dtype=float)
        self.score = float(score)
        self.scale = float(scale)
        self.source = source
        self.scaling: dict[str, Any] = {"scale": self.scale}
        self._r, self._s = [float(x) for x in rates], [float(x) for x in sizes]
        self._g = [[float(x) for x in row] for row in v]

    # ---- loading ---------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | os.PathLike[str], score: float | None = None) -> CommCost:
        """Read a calibration file; with ``score`` (the target host's CPU score), rescale.

        ``ProfileError`` names the file when it is missing, not JSON, of another schema
        version, or holds an invalid grid.
        """
        path = Path(path)
        data = read_json(path, "calibration", _HINT)
        if not isinstance(data, dict):
            raise ProfileError(f"{path}: expected a JSON object, found {type(data).__name__}; {_HINT}")
        if data.get("schema_version") != SCHEMA_VERSION:
            raise ProfileError(f"{path}: calibration schema_version {data.get('schema_version')!r} is not "
                               f"supported (this spadeopt reads {SCHEMA_VERSION}); {_HINT}")
        if data.get("kind") != KIND:
            raise ProfileError(f"{path}: not a spadeopt calibration ('kind' is {data.get('kind')!r}, "
                               f"expected {KIND!r}); {_HINT}")
        grid = data.get("grid")
        cpu = data.get("cpu_score")
        if not isinstance(grid, dict) or not isinstance(cpu, dict):
            raise ProfileError(f"{path}: 'grid' and 'cpu_score' must be JSON objects; {_HINT}")
        try:
            comm = cls(grid.get("rates"), grid.get("sizes"), grid.get("v"), cpu.get("value"),
                       source=str(path))
        except (TypeError, ValueError) as e:
            raise ProfileError(f"{path}: invalid calibration grid ({e}); {_HINT}") from e
        return comm.scaled_to(score) if score is not None else comm

    @classmethod
    def for_this_host(cls, path: str | os.PathLike[str], score: float | None = None) -> CommCost:
        """Load a calibration; rescale it by this host's CPU score if another CPU measured it.

        The host's score is ``score`` when given, else measured once per host and CPU model
        and kept (:func:`spadeopt.refine.cpuscore.host_cpu_score`), so the same profile and
        calibration give the same plan on every call. ``scaling`` records what was used.
        """
        from spadeopt.profiling import host_info

        comm = cls.load(path)
        data = read_json(Path(path), "calibration", _HINT)
        here = host_info().cpu_model
        info: dict[str, Any] = {"calibration_cpu_model": data.get("cpu_model"), "this_cpu_model": here,
                                "calibration_score": comm.score}
        if score is None and data.get("cpu_model") == here:
            comm.scaling = {**info, "host_score": None, "host_score_source": "same CPU model: not rescaled",
                            "scale": 1.0}
            return comm
        if score is not None:
            source = "given (--cpu-score)"
        else:
            from spadeopt.refine.cpuscore import host_cpu_score

            score, source = host_cpu_score()
        scaled = comm.scaled_to(score)
        scaled.scaling = {**info, "host_score": score, "host_score_source": source, "scale": scaled.scale}
        return scaled

    def scaled_to(self, score: float) -> CommCost:
        """The same mapping on a host whose CPU score is ``score`` (paper footnote 1)."""
        if isinstance(score, bool) or not isinstance(score, int | float) or not (math.isfinite(score) and score > 0):
            raise UsageError(f"CPU score must be a finite number > 0; got {score!r}")
        return CommCost(self.rates, self.sizes, self.grid, self.score,
                        scale=self.score / float(score), source=self.source)

    # ---- the CommModel protocol --------------------------------------------------------------
    def cost(self, rate: float, size: float) -> float:
        """CPU fraction spent sending and receiving ``rate`` tuples/s of ``size`` bytes."""
        rate, size = float(rate), float(size)
        if not (math.isfinite(rate) and math.isfinite(size)) or rate < 0 or size < 0:
            raise UsageError(f"comm cost needs finite rate >= 0 and size >= 0; got rate={rate!r}, size={size!r}")
        if rate == 0.0:
            return 0.0
        return self._cost(rate, size)

    def _cost(self, rate: float, size: float) -> float:
        r_max = self._r[-1]
        factor = 1.0
        if rate > r_max:
            factor, rate = rate / r_max, r_max
        s_min, s_max = self._s[0], self._s[-1]
        if size <= s_max:
            v = self._interp(rate, max(size, s_min))
        else:
            top = self._interp(rate, s_max)
            if len(self._s) > 1:
                s_prev = self._s[-2]
                prev = self._interp(rate, s_prev)
                v = top + (size - s_max) * (top - prev) / (s_max - s_prev)
            else:
                v = top
        return max(0.0, v) * factor * self.scale

    def _interp(self, rate: float, size: float) -> float:
        """Bilinear interpolation of the grid at a point inside it.

        >>> CommCost([0.0, 10.0], [1.0, 3.0], [[0.0, 0.0], [1.0, 3.0]], score=1.0)._interp(5.0, 2.0)
        1.0
        """
        rs, ss, g = self._r, self._s, self._g
        i = min(max(bisect_right(rs, rate) - 1, 0), len(rs) - 2)
        tr = (rate - rs[i]) / (rs[i + 1] - rs[i])
        if len(ss) == 1:
            return g[i][0] * (1.0 - tr) + g[i + 1][0] * tr
        j = min(max(bisect_right(ss, size) - 1, 0), len(ss) - 2)
        ts = (size - ss[j]) / (ss[j + 1] - ss[j])
        lo = g[i][j] * (1.0 - tr) + g[i + 1][j] * tr
        hi = g[i][j + 1] * (1.0 - tr) + g[i + 1][j + 1] * tr
        return lo * (1.0 - ts) + hi * ts

    def __repr__(self) -> str:
        return (f"CommCost({self.source!r}, {len(self.rates)} rates x {len(self.sizes)} sizes, "
                f"score={self.score:g}, scale={self.scale:g})")


def _grid_problems(rates: Any, sizes: Any, v: Any, score: Any) -> list[str]:
    problems = []

    def axis(name: str, xs: Any) -> bool:
        if not isinstance(xs, Sequence | np.ndarray) or len(xs) < 1 or not all(_num(x) and x >= 0 for x in xs):
            problems.append(f"'{name}' must be a non-empty list of numbers >= 0")
            return False
        if any(b <= a for a, b in zip(xs, xs[1:], strict=False)):
            problems.append(f"'{name}' must be strictly increasing")
            return False
        return True

    ok = axis("rates", rates) & axis("sizes", sizes)
    if not _num(score) or score <= 0:
        problems.append(f"the CPU score must be a number > 0, found {score!r}")
    if not ok:
        return problems
    if len(rates) < 2 or rates[0] != 0:
        problems.append("'rates' must start at 0 and have at least one more rate")
        return problems
    if (not isinstance(v, Sequence | np.ndarray) or len(v) != len(rates)
            or any(not isinstance(row, Sequence | np.ndarray) or len(row) != len(sizes) for row in v)):
        problems.append(f"'v' must be {len(rates)} rows (one per rate) of {len(sizes)} values (one per size)")
        return problems
    if not all(_num(x) and x >= 0 for row in v for x in row):
        problems.append("'v' values must be numbers >= 0")
        return problems
    g = np.asarray(v, dtype=float)
    if np.any(g[0] != 0):
        problems.append("'v' must be 0 at rate 0")
    if np.any(np.diff(g, axis=0) < 0) or np.any(np.diff(g, axis=1) < 0):
        problems.append("'v' must be non-decreasing in rate and in size")
    return problems


def _num(x: Any) -> bool:
    return isinstance(x, int | float | np.floating | np.integer) and not isinstance(x, bool) and math.isfinite(x)


def monotone_grid(v: Sequence[Sequence[float]]) -> list[list[float]]:
    """Cumulative maximum along the rate axis, then along the size axis.

    The result is non-decreasing in both (the second pass keeps the first pass's order:
    row-wise prefix maxima of column-wise non-decreasing rows are column-wise
    non-decreasing).

    >>> monotone_grid([[0, 0], [2, 1], [1, 3]])
    [[0.0, 0.0], [2.0, 2.0], [2.0, 3.0]]
    """
    g = np.maximum.accumulate(np.asarray(v, dtype=float), axis=0)
    g = np.maximum.accumulate(g, axis=1)
    return g.tolist()
