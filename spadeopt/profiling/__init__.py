"""Profiling runtime: what an instrumented PE calls when a sample is due, and the raw profile.

One module per concern, each importing only those above it in this list:

- ``stride``: which tuples are sampled (``StrideSampler``, ``stride_of``).
- ``reservoir``: uniform samples of bounded size (``Reservoir``, Algorithm R).
- ``sizing``: tuple sizes, the bytes of the wire encoding (``msgpack_size``).
- ``groups``: sample groups, ports that count what their leader counts.
- ``recorder``: one point's samples (``MetricRecorder``, ``PointKey``); the hot-path
  protocol the generated code follows is in its docstring.
- ``window``: timing windows, one thread CPU clock read pair per chain (``CpuWindow``).
- ``records``: the on-disk raw profile (``RUN_DIR/manifest.json`` +
  ``RUN_DIR/raw/<pe>.jsonl``) and its validating reader.
- ``profiler``: one PE's registry of points, written to its raw sample file (``Profiler``).

The package imports ``spadeopt.wire`` (to size tuples as the wire encodes them), never
``spadeopt.runtime``: the runtime imports profiling, not the other way round.
"""

from __future__ import annotations

from spadeopt.profiling.profiler import DEFAULT_RESERVOIR_SIZE, DEFAULT_SAMPLE_RATE, Profiler
from spadeopt.profiling.recorder import MetricRecorder, PointKey
from spadeopt.profiling.records import (
    METRICS,
    SCHEMA_VERSION,
    HostInfo,
    Manifest,
    RawRun,
    SampleRecord,
    check_run_dir,
    host_info,
    read_run,
    write_manifest,
    write_pe_samples,
)
from spadeopt.profiling.reservoir import Reservoir
from spadeopt.profiling.sizing import msgpack_size
from spadeopt.profiling.stride import StrideSampler, stride_of
from spadeopt.profiling.window import CpuWindow

__all__ = [
    "DEFAULT_RESERVOIR_SIZE",
    "DEFAULT_SAMPLE_RATE",
    "CpuWindow",
    "METRICS",
    "SCHEMA_VERSION",
    "HostInfo",
    "Manifest",
    "MetricRecorder",
    "PointKey",
    "Profiler",
    "RawRun",
    "Reservoir",
    "SampleRecord",
    "StrideSampler",
    "check_run_dir",
    "host_info",
    "msgpack_size",
    "read_run",
    "stride_of",
    "write_manifest",
    "write_pe_samples",
]
