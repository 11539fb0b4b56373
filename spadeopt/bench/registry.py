"""``spadeopt bench NAME``: each benchmark writes its figures to files under --out."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from spadeopt.errors import UsageError


def _fused(out: Path, args: argparse.Namespace) -> dict:
    from spadeopt.bench import fused_overhead

    return fused_overhead.run(out, quick=args.quick, log=lambda m: print(m, file=sys.stderr, flush=True))


def _collapse(out: Path, args: argparse.Namespace) -> dict:
    from spadeopt.bench import collapse_bench

    return collapse_bench.run(out, quick=args.quick, log=lambda m: print(m, file=sys.stderr, flush=True))


def _optimizer(out: Path, args: argparse.Namespace) -> dict:
    from spadeopt.bench import optimizer_bench

    return optimizer_bench.run(out)


def _profiling(out: Path, args: argparse.Namespace) -> dict:
    from spadeopt.bench import profiling_overhead

    return profiling_overhead.run(out, quick=args.quick, log=lambda m: print(m, file=sys.stderr, flush=True))


def _tradeoff(out: Path, args: argparse.Namespace) -> dict:
    from spadeopt.bench import tradeoff

    return tradeoff.run(out, quick=args.quick, log=lambda m: print(m, file=sys.stderr, flush=True))


def _fission(out: Path, args: argparse.Namespace) -> dict:
    from spadeopt.bench import fission_bench as fission

    return fission.run(out, quick=args.quick, log=lambda m: print(m, file=sys.stderr, flush=True))


def _logical_vs_hand(out: Path, args: argparse.Namespace) -> dict:
    from spadeopt.bench import logical_vs_hand

    kw = {"tuples": 20_000, "repeat": 2} if args.quick else {}
    return logical_vs_hand.run(out, log=lambda m: print(m, file=sys.stderr, flush=True), **kw)


def _live_overhead(out: Path, args: argparse.Namespace) -> dict:
    from spadeopt.bench import live_overhead

    kw = {"tuples": 60_000, "repeat": 2} if args.quick else {}
    return live_overhead.run(out, log=lambda m: print(m, file=sys.stderr, flush=True), **kw)


def _spark_auth(out: Path, args: argparse.Namespace) -> dict:
    from spadeopt.bench import spark_auth

    kw = {"tuples": 30_000, "repeat": 2} if args.quick else {}
    return spark_auth.run(out, log=lambda m: print(m, file=sys.stderr, flush=True), **kw)


def _latency(out: Path, args: argparse.Namespace) -> dict:
    from spadeopt.bench import latency_bench as latency

    return latency.run(out, quick=args.quick, log=lambda m: print(m, file=sys.stderr, flush=True))


def _checkpoint(out: Path, args: argparse.Namespace) -> dict:
    from spadeopt.bench import checkpoint

    return checkpoint.run(out, quick=args.quick, log=lambda m: print(m, file=sys.stderr, flush=True))


def _broker_throughput(out: Path, args: argparse.Namespace) -> dict:
    from spadeopt.bench import broker_throughput

    return broker_throughput.run(out, quick=args.quick, log=lambda m: print(m, file=sys.stderr, flush=True))


def _scale(out: Path, args: argparse.Namespace) -> dict:
    from spadeopt.bench import scale

    return scale.from_args(args, log=lambda m: print(m, file=sys.stderr, flush=True))


def _adaptive(out: Path, args: argparse.Namespace) -> dict:
    from spadeopt.bench import adaptive_bench

    return adaptive_bench.from_args(args, log=lambda m: print(m, file=sys.stderr, flush=True))


def _adaptive_live(out: Path, args: argparse.Namespace) -> dict:
    from spadeopt.bench import adaptive_live

    return adaptive_live.from_args(args, log=lambda m: print(m, file=sys.stderr, flush=True))


BENCHMARKS = {"scale": _scale, "adaptive": _adaptive, "adaptive-live": _adaptive_live, "broker-throughput": _broker_throughput, "checkpoint": _checkpoint, "latency": _latency, "spark-auth": _spark_auth, "live-overhead": _live_overhead, "fission": _fission, "logical-vs-hand": _logical_vs_hand, "fusion-tradeoff": _tradeoff, "fused-overhead": _fused,
              "profiling-overhead": _profiling, "optimizer": _optimizer, "collapse": _collapse}


def run(name: str, out: Path, args: argparse.Namespace) -> int:
    if name not in BENCHMARKS:
        raise UsageError(f"unknown benchmark '{name}'; choose one of: {', '.join(BENCHMARKS)}")
    doc = BENCHMARKS[name](Path(out), args)
    print(json.dumps(doc, indent=2)[:4000])
    print(f"figures written under {out}", file=sys.stderr)
    return 0
