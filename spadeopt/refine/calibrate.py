"""``spadeopt calibrate``: measure ``v(rate, size)`` on this machine over the real transport.

For every grid point (tuple rate, tuple size) the calibration app (:mod:`.calib_app`: a
paced source -> ``FORWARDERS`` forwarders -> a counting sink, NONE fusion: one PE per
operator, every ZeroMQ link over ``ipc://`` at the same link rate ``L``) runs as an
instrumented build with the real node agent and PE processes
(:func:`spadeopt.orchestrate.build_local.build_and_run`; no Spark: the same processes, without a
JVM per point). Then:

* the PEs' CPU seconds come from the run report (``time.process_time`` of each PE
  process: every thread, ZeroMQ's I/O thread included);
* the operators' own CPU seconds come from refining the run's samples exactly like
  ``spadeopt refine`` does (Equation 1), times their tuples;
* the rest is what the PEs spent on sending, receiving and being a PE:
  ``comm = Σ PE CPU − Σ operator CPU``. With ``f`` forwarders there are ``f + 1``
  links and ``2 (f + 1)`` link ends (a send, ``f`` times a receive and a send, a
  receive), each carrying ``N`` tuples, so the cost per tuple per link end is
  ``k = comm / (2 (f + 1) N)``;
* the grid point is ``v(x, size) = x × k`` at ``x = 2 (f + 1) L / (f + 2)``, the mean
  ``Rate(P)`` of the run's PEs (the optimizer's ``Rate(P)`` counts in and out together:
  a forwarder has ``2L``, the source and the sink ``L``). So ``Σ_P v(Rate(P))`` over the
  calibration pipeline's PEs is what they measurably spent, however that splits between
  the sending, forwarding and receiving PEs (``v`` cannot tell them apart: it sees only
  ``Rate(P)`` and the size).

Why forwarders, and three of them. A PE that receives and sends wakes up once for both,
so it spends less per link end than a pure sender or receiver; and a PE that shares the
node's cores with other busy PEs finds several messages per wake-up. Both lower the cost
per tuple (measured here at 1M tuples/s, 96-byte tuples: 0.25 us per link end with one
forwarder, 0.20 us with three, 0.17 us when the same five PEs run flat out). A pipeline
of five PEs on the node is closer to how PEs run (profiling runs with one PE per
operator, several PEs per node) than a lone sender/receiver pair, which overstates the
cost by 20-40 %. ``v`` still ignores how busy the node is; see docs/profile-format.md.

Each sweep also times what a parallel region's split and merge cost per tuple here
(paper 000's ``c_p``; :mod:`spadeopt.refine.fission_cost`); the median of the sweeps is
the file's ``perf_model`` block (``split_*_s``, ``merge_*_s``), which the optimizer reads
over its defaults and rescales by CPU score on another host like ``v``.

The whole sweep runs ``REPEATS`` times and the grid takes the median ``k`` of a point's
runs: single runs vary by 20-40 % on this kind of machine (a VM whose speed drifts, and
other processes that come and go), and sweeping again rather than repeating a point at
once spreads a point's runs over minutes, so one disturbed stretch spoils one run only.
A link rate the PEs cannot reach (measured below 80 % of the target) ends that size's
sweep; that run measured the link at its limit and stands for its target; targets above
take its per-tuple cost (per-tuple costs fall as rates grow, so this errs high). The
stored grid has a rate-0 row (``v = 0``) and one row per target. It is then made
monotone (cumulative max along rate, then size) and stored with the raw measurements and
the host's CPU score: the highest :func:`cpu_score` of those taken before each sweep and
at the end (the VM's speed drifts; the peak compares between hosts, see
:func:`peak_cpu_score`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from spadeopt.atomic import write_atomic
from spadeopt.errors import RunError
from spadeopt.profiling import Manifest, host_info, read_run, write_manifest
from spadeopt.profiling.records import pe_file
from spadeopt.refine import fission_cost
from spadeopt.refine.comm import KIND, SCHEMA_VERSION, CommCost, monotone_grid
from spadeopt.refine.cpuscore import BENCHMARK, cpu_score, host_cpu_score, peak_cpu_score  # noqa: F401 - re-exported
from spadeopt.refine.estimate import RunData, aggregate_records, estimate

FULL_RATES = (1_000, 3_000, 10_000, 30_000, 100_000, 300_000, 1_000_000, 3_000_000)
"""Grid rates ``Rate(P)`` (tuples/s in + out); the links run at half of each."""
FULL_SIZES = (16, 64, 96, 128, 256, 1024, 4096, 16384, 65536)
QUICK_RATES = (10_000, 100_000, 1_000_000, 3_000_000)
QUICK_SIZES = (16, 96, 4096)
MAX_BYTES_PER_S = 2e9
"""Targets above this byte rate are not attempted (far beyond what one link carries here)."""
REACHED = 0.8
FORWARDERS = 3
RUNTIME_HWM = 32
"""The runtime's queue bound (messages per socket), used as long as it stays cheap."""
MAX_QUEUED_BYTES = 64 << 20
"""Bytes a socket may queue during calibration: large tuples get a smaller bound (never
below 4 messages), so a target beyond the link cannot pile up gigabytes to drain."""
SAMPLE_RATE = 0.01
REPEATS = 3
"""Runs per grid point; the grid takes the median per-tuple cost."""


@dataclasses.dataclass(frozen=True)
class Point:
    """One calibration run: source -> forwarders -> sink, every link at the same rate.

    ``target_rate`` and ``rate`` are on the grid's axis, the PEs' mean ``Rate(P)``
    (:func:`link_rate` converts), ``tuples`` the tuples through each link, ``pe_comm_s`` the CPU seconds
    the PEs spent outside operator logic (``send``: the source's PE, ``forward``: the
    forwarders' together, ``receive``: the sink's).
    """

    target_rate: float
    size: int
    rate: float
    tuples: int
    seconds: float  # the run's window: tuples / link rate
    pe_cpu_s: float
    operator_cpu_s: float
    measured_size: float
    pe_comm_s: dict[str, float] = dataclasses.field(default_factory=dict)
    forwarders: int = 1

    @property
    def comm_cpu_s(self) -> float:
        return max(0.0, self.pe_cpu_s - self.operator_cpu_s)

    @property
    def per_tuple_s(self) -> float:
        """CPU seconds per tuple per link end (``forwarders + 1`` links, two ends each)."""
        ends = 2 * (self.forwarders + 1)
        return self.comm_cpu_s / (ends * self.tuples) if self.tuples else 0.0

    @property
    def reached(self) -> bool:
        return self.rate >= REACHED * self.target_rate

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "comm_cpu_s": self.comm_cpu_s, "per_tuple_s": self.per_tuple_s,
                "v": self.rate * self.per_tuple_s, "reached": self.reached}


def calibrate(out: str | os.PathLike[str], quick: bool = False,
              progress: Callable[[str], None] | None = None, force: bool = False) -> dict[str, Any]:
    """Measure the grid and write the calibration file; returns its content."""
    from spadeopt.output_paths import claim_file

    say = progress or (lambda msg: None)
    claim_file(out, "calibration", "-o", force, say)
    rates = QUICK_RATES if quick else FULL_RATES
    sizes = QUICK_SIZES if quick else FULL_SIZES
    seconds = 0.4 if quick else 0.8
    repeats = REPEATS
    t_start = time.time()
    points: list[Point] = []
    scores = []
    fission: list[dict[str, float]] = []
    work = Path(tempfile.mkdtemp(prefix="spadeopt-calibrate-"))
    try:
        for rep in range(repeats):  # whole sweeps, so a disturbance hits one run of a point
            say(f"\r{time.time() - t_start:6.1f} s  CPU score (fixed Python benchmark)")
            scores.append(cpu_score())
            say(f"\r{time.time() - t_start:6.1f} s  split and merge CPU per tuple (fission)")
            fission.append(fission_cost.measure())
            for size in sizes:
                for rate in rates:
                    if rate * size > MAX_BYTES_PER_S:
                        break
                    secs = min(3.0, max(seconds, 3 * 512 / link_rate(rate)))  # 3 batches at least
                    say(f"\r{time.time() - t_start:6.1f} s  sweep {rep + 1} of {repeats}: size {size} B, "
                        f"Rate {rate:,} tuples/s")
                    p = measure(rate, size, secs, work / f"p{rep}-s{size}-r{rate}")
                    points.append(p)
                    if not p.reached:
                        break
    finally:
        shutil.rmtree(work, ignore_errors=True)
    scores.append(cpu_score())
    score = max(scores)
    grid = grid_from(points, rates, sizes)
    host = host_info()
    doc = {
        "schema_version": SCHEMA_VERSION,
        "kind": KIND,
        "host": host.host,
        "cpu_model": host.cpu_model,
        "cores": host.cores,
        "created": time.time(),
        "quick": quick,
        "cpu_score": {"benchmark": BENCHMARK, "value": score, "samples": scores,
                      "unit": "benchmark units per CPU second (higher is faster); the highest of "
                              "the samples taken before each sweep and at the end"},
        "setup": {"transport": "ipc", "fusion": "none", "app": "spadeopt.refine.calib_app",
                  "forwarders": FORWARDERS,
                  "sample_rate": SAMPLE_RATE, "seconds_per_point": seconds, "repeats": repeats,
                  "hwm": {str(size): hwm_for(size) for size in sizes},
                  "calibration_s": time.time() - t_start},
        "grid": {"rates": [0.0, *map(float, rates)], "sizes": [float(s) for s in sizes], "v": grid,
                 "rate_unit": "tuples/s crossing the PE boundary (in + out)",
                 "size_unit": "bytes/tuple (msgpack)", "v_unit": "CPU fraction (cores)"},
        "measured": [p.to_json() for p in points],
        # paper 000's c_p: what a parallel region's split and merge cost per tuple here
        "perf_model": {**fission_cost.perf_model_block(fission),
                       "source": "spadeopt calibrate: spadeopt.refine.fission_cost, median of the sweeps"},
        "fission_cost_runs": fission,
    }
    CommCost(doc["grid"]["rates"], doc["grid"]["sizes"], grid, score, source=str(out))  # validates
    write_atomic(Path(out), json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return doc


def grid_from(points: list[Point], rates: tuple[int, ...], sizes: tuple[int, ...]) -> list[list[float]]:
    """The monotone ``v`` grid (rows: 0 then ``rates``; columns: ``sizes``) from the points.

    Per grid point the median per-tuple cost of its runs, reached or not (a run that
    fell short measured the link at its limit: the best estimate at that target); a
    target no sweep tried takes the runs of the highest target tried at that size.
    """
    rows: list[list[float]] = [[0.0] * len(sizes)]
    for rate in rates:
        row = []
        for size in sizes:
            mine = [p for p in points if p.size == size]
            if not mine:
                raise RunError(f"calibration measured nothing for tuple size {size}")
            at = [p for p in mine if p.target_rate == rate]
            if not at:
                top = max(p.target_rate for p in mine)
                at = [p for p in mine if p.target_rate == top]
            row.append(rate * statistics.median(p.per_tuple_s for p in at))
        rows.append(row)
    return monotone_grid(rows)


def link_rate(rate: float, forwarders: int = FORWARDERS) -> float:
    """The link rate of a calibration run whose PEs' mean ``Rate(P)`` is ``rate``.

    >>> link_rate(1.6e6, 3)
    1000000.0
    """
    return rate * (forwarders + 2) / (2 * (forwarders + 1))


def hwm_for(size: int, batch: int = 512) -> int:
    """The queue bound for a calibration run with tuples of ``size`` bytes.

    The runtime's 32 messages up to 4 KiB tuples (2 MiB messages); less above. A small
    bound costs CPU where PEs share cores (the sender blocks after a few messages and
    every PE wakes up more often: 20-30 % more per tuple with 4 instead of 32 in a
    5-PE pipeline on 2 cores), so it is used only where memory requires it.
    """
    return max(4, min(RUNTIME_HWM, MAX_QUEUED_BYTES // (batch * max(size, 1))))


def measure(rate: float, size: int, seconds: float, work: Path) -> Point:
    """Run the calibration app once at (``rate``, ``size``) and measure it."""
    from spadeopt.orchestrate.build_local import build_and_run
    from spadeopt.plan.deployment import Sampling
    from spadeopt.refine import calib_app

    graph = calib_app.calibration.build({"rate": link_rate(rate), "size": int(size), "seconds": float(seconds),
                                         "forwarders": FORWARDERS})
    run_dir = work / "run"
    run_dir.mkdir(parents=True)
    profile_cfg = Sampling(SAMPLE_RATE, 5000, 0, str(run_dir))
    started = time.time()
    res = build_and_run(graph, "none", instrumented=True, app_ref=calib_app.__file__, workdir=work,
                        settings={"profile": profile_cfg, "hwm": hwm_for(size)})
    finished = time.time()
    plan = res.plan
    host = host_info()
    manifest = Manifest(app=graph.name, graph_fingerprint=graph.fingerprint, plan=plan.to_json(),
                        params=dict(graph.params), host=host.host, cores=host.cores, cpu_model=host.cpu_model,
                        duration=finished - started, seed=0, sample_rate=SAMPLE_RATE, reservoir_size=5000,
                        started=started, finished=finished, pe_files=tuple(pe_file(p.pe_id) for p in plan.pes))
    write_manifest(run_dir, manifest)
    aggs = aggregate_records(read_run(run_dir).records)
    ts = [a.first_ts for a in aggs.values()] + [a.last_ts for a in aggs.values()]
    links = frozenset((f"{st.src.op}.{st.src.port}", f"{st.dst.op}.{st.dst.port}") for st in graph.streams)
    data = RunData(name=str(run_dir), pes={p.pe_id: tuple(p.operators) for p in plan.pes}, links=links,
                   aggs=aggs, window=(min(ts), max(ts)))
    prof = estimate([data], app=graph.name, fingerprint=graph.fingerprint, params=graph.params,
                    host=host.host, cpu_model=host.cpu_model, cores=host.cores)
    cpu = {pe["pe"]: pe["cpu_s"] for pe in res.report["pes"]}
    pe_comm, op_cpu = {}, 0.0
    for pe in plan.pes:
        (name,) = pe.operators
        o = prof.operators[name]
        tuples = sum(prof.inputs[i].tuples for i in o.inputs) or sum(prof.outputs[x].tuples for x in o.outputs)
        own = o.cpu_per_tuple_s * tuples  # u x its duration
        op_cpu += own
        role = calib_app.role(name)
        pe_comm[role] = pe_comm.get(role, 0.0) + cpu[pe.pe_id] - own
    link = prof.outputs["src.out"]
    return Point(target_rate=float(rate), size=int(size), rate=link.rate / link_rate(1.0), tuples=link.tuples,
                 seconds=link.tuples / link.rate if link.rate > 0 else seconds, pe_cpu_s=sum(cpu.values()),
                 operator_cpu_s=op_cpu, measured_size=link.size, pe_comm_s=pe_comm, forwarders=FORWARDERS)


# ---- the CPU score (the paper's MIPS) ------------------------------------------------------
def summary(doc: dict[str, Any]) -> str:
    """A few lines on a calibration: score, extent, per-tuple costs."""
    pts = doc["measured"]
    lines = [f"host {doc['host']} ({doc['cpu_model']}, {doc['cores']} cores), CPU score "
             f"{doc['cpu_score']['value']:.1f}",
             f"{len(pts)} runs in {doc['setup']['calibration_s']:.0f} s; fastest link per size: "
             + ", ".join(f"{s:g} B {max((p['rate'] / 2 for p in pts if p['size'] == s), default=0):,.0f}/s"
                         for s in doc["grid"]["sizes"])]
    k = [p["per_tuple_s"] for p in pts if p["reached"] and p["rate"] >= 100_000 and p["size"] <= 256]
    if k:
        lines.append(f"median CPU per tuple per link end (>= 100k tuples/s, <= 256 B): "
                     f"{statistics.median(k) * 1e6:.2f} us")
    return "\n".join(lines)
