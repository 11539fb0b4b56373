"""The profiler of one PE: its registry of instrumentation points and its sample file.

``Profiler.point`` validates a point's key and subscribers and returns its recorder,
creating it on first use; asking again returns the same recorder. ``Profiler.write``
dumps every kept sample, sorted by point, metric and time, to the PE's raw sample file
(``spadeopt.profiling.records``, written atomically) when the PE exits.

Cost: nothing on the hot path; ``point`` runs once per point at PE start, ``write``
once at exit.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from spadeopt.errors import UsageError
from spadeopt.profiling.keys import KeySampler
from spadeopt.profiling.recorder import DIRECTIONS, MetricRecorder, PointKey, point_rng
from spadeopt.profiling.records import SampleRecord, pe_file, write_pe_samples
from spadeopt.profiling.reservoir import check_reservoir_size
from spadeopt.profiling.sizing import msgpack_size, new_size_memo
from spadeopt.profiling.stride import sampling_fraction

DEFAULT_SAMPLE_RATE: Final = 0.001
DEFAULT_RESERVOIR_SIZE: Final = 5000


def _check_name(what: str, value: object) -> None:
    if not isinstance(value, str) or not value:
        msg = f"{what} must be a non-empty string; got {value!r}"
        raise UsageError(msg)


class Profiler:
    """The registry of one PE's instrumentation points.

    ``seed`` is the run's recorded seed; each reservoir gets its own ``random.Random``
    derived from ``(seed, point key, subscriber, metric)``, so a run is reproducible and
    an operator's reservoirs make the same choices whichever PE it is fused into.
    """

    def __init__(
        self,
        pe: str,
        *,
        sample_rate: float = DEFAULT_SAMPLE_RATE,
        reservoir_size: int = DEFAULT_RESERVOIR_SIZE,
        seed: int = 0,
        sizeof: Callable[[object], int] = msgpack_size,
    ) -> None:
        pe_file(pe)  # validates the id: it names the PE's sample file
        sampling_fraction(sample_rate)
        check_reservoir_size(reservoir_size)
        if isinstance(seed, bool) or not isinstance(seed, int):
            msg = f"profiling seed must be an integer; got {seed!r}"
            raise UsageError(msg)
        self.pe = pe
        self.sample_rate = sample_rate
        self.reservoir_size = reservoir_size
        self.seed = seed
        self._sizeof = sizeof
        self._memo = new_size_memo()  # shared by the points' recorders
        self._points: dict[PointKey, MetricRecorder] = {}
        self._keys: dict[tuple[str, str], KeySampler] = {}  # (op, port) -> its sampled key hashes

    def point(self, key: PointKey, subscribers: Sequence[str] = ()) -> MetricRecorder:
        """Return the recorder of ``key``, creating it on first use.

        ``subscribers`` (``out`` points only) are the ``"op.port"`` names of the in-PE
        input ports whose process calls the submit times, in the order in which
        ``sample_submit`` receives their timings. Asking again for the same key with
        other subscribers is a ``UsageError``.
        """
        key = PointKey(*key)
        _check_name("operator id", key.op)
        _check_name("port name", key.port)
        if key.dir not in DIRECTIONS:
            msg = f"point {key.op}.{key.port}: dir must be one of {DIRECTIONS}; got {key.dir!r}"
            raise UsageError(msg)
        subs = tuple(subscribers)
        if subs and key.dir != "out":
            msg = f"point {key.op}.{key.port}: only 'out' points have subscribers; got {subs}"
            raise UsageError(msg)
        for sub in subs:
            if not isinstance(sub, str) or sub.count(".") < 1 or sub.startswith("."):
                msg = f"point {key.op}.{key.port}: subscriber must be 'op.port'; got {sub!r}"
                raise UsageError(msg)
        if len(set(subs)) != len(subs):
            msg = f"point {key.op}.{key.port}: duplicate subscribers in {subs}"
            raise UsageError(msg)
        rec = self._points.get(key)
        if rec is None:
            rec = MetricRecorder(
                key, subs, self.sample_rate, self.reservoir_size, self.seed, self._sizeof,
                self._memo,
            )
            self._points[key] = rec
        elif rec.subscribers != subs:
            msg = (
                f"point {key.op}.{key.port} ({key.dir}) already exists with subscribers "
                f"{rec.subscribers}; got {subs}"
            )
            raise UsageError(msg)
        return rec

    def key_sampler(self, op: str, port: str, idx: Sequence[int], types: Sequence[str],
                    arity: int = 0) -> KeySampler:
        """The key sampler of keyed operator ``op``'s input ``port`` (``profiling.keys``):
        the key attributes at positions ``idx`` of its tuples (``arity`` long), of schema
        ``types``."""
        _check_name("operator id", op)
        _check_name("port name", port)
        found = self._keys.get((op, port))
        if found is None:
            rng = point_rng(self.seed, PointKey(op, port, "in"), None, "key")
            found = self._keys[(op, port)] = KeySampler(self.sample_rate, idx, types, rng, arity)
        return found

    def dump(self, live: bool = False) -> list[SampleRecord]:
        """All kept samples of this PE, one record each, sorted by point, metric and time;
        then the key samplers' counts (``dir`` "in", metric ``key``). ``live``: the samples
        so far, taken from another thread while the PE runs (``MetricRecorder.samples``)."""
        out: list[SampleRecord] = []
        for key in sorted(self._points):
            rec = self._points[key]
            for sub, metric, (ts, value) in rec.samples(live):
                out.append(SampleRecord(self.pe, key.op, key.port, key.dir, sub, metric, ts, value))
        for (op, port), keys in sorted(self._keys.items()):
            out += [SampleRecord(self.pe, op, port, "in", sub, "key", ts, n) for sub, ts, n in keys.records()]
        return out

    def write(self, run_dir: str | os.PathLike[str], live: bool = False) -> Path:
        """Write ``dump(live)`` to ``RUN_DIR/raw/<pe>.jsonl`` (atomically); return the path."""
        return write_pe_samples(run_dir, self.pe, self.dump(live))
