"""Profiling runtime: stride sampler, reservoirs, per-point recorders, raw sample files.

``sampling`` is what an instrumented PE calls when a sample is due; ``records`` is the
on-disk raw profile (``RUN_DIR/manifest.json`` + ``RUN_DIR/raw/<pe>.jsonl``) and its
validating reader.
"""

from __future__ import annotations

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
from spadeopt.profiling.sampling import (
    DEFAULT_RESERVOIR_SIZE,
    DEFAULT_SAMPLE_RATE,
    CpuWindow,
    MetricRecorder,
    PointKey,
    Profiler,
    Reservoir,
    StrideSampler,
    msgpack_size,
    stride_of,
)

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
