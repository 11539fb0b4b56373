"""From per-point sample summaries to rates, CPU fractions and links (digest 003 §4.2-4.3).

This is the arithmetic half of ``spadeopt refine``; the Spark job (:mod:`.job`) reads the
raw samples and hands over one :class:`Agg` per (run, point, subscriber, metric). Nothing
here touches Spark, so it is tested with literal inputs.

Where each logical quantity comes from (the same set under any fusion):

* **Output port** ``op.port``: its ``out`` point (count, size, submit CPU ``t̂``, total).
* **Input port** ``op.port``: one *feed* per way tuples reach it. An ``in`` point (the
  port is exposed: tuples arrive over ZeroMQ) gives the count, size and process CPU of
  what arrives from other PEs; every in-PE publisher ``p`` records, on its ``out`` point,
  the process CPU of the direct call into ``op.port`` (``sub == "op.port"``), and the
  feed's tuples are ``p``'s tuples. An input port fed from both sides has several feeds.
* **Thread** of an operator (a source's driver thread): cumulative CPU, first and last.

**Rates on a common time base.** Equation 1 subtracts rates times CPU times of different
ports of one operator; if the ports' rates came from slightly different windows (each
port's first and last count sample), the difference of two large terms (under fusion,
process and submit times both hold all downstream work) would carry the window mismatch.
So every operator gets one active window ``W``: its *reference* port is the port (feed or
output) whose count samples span the most tuples, with rate ``c = Δcount/Δts`` between its
first and last count sample, and ``W = tuples / c``. Every port of that operator then has
rate ``tuples / W``: the reference keeps its measured rate, and the other rates keep the
exact tuple ratios (selectivities) from the end-of-stream totals. Without two count
samples anywhere, ``W`` is the operator's thread window, else the run's active window
(first to last sample of the run), never the manifest's ``duration``, which includes the
Spark start-up.

**Equation 1** in per-tuple form. With ``N`` tuples per port, ``t`` the reservoir mean
CPU per tuple, for an operator with input feeds ``f`` and output ports ``j``::

    κ = Σ_f (N_f / N_in) t_f − Σ_j (N_j / N_in) t̂_j        (CPU s per input tuple)
    u = (N_in / W) κ + Σ b = Σ_f c_f t_f − Σ_j ĉ_j t̂_j + Σ b

which is Equation 1 with the rates above. A source has no input: its thread's CPU over the
thread's life (first to last ``thread_cpu`` sample, which bracket every tuple it emitted)
is divided by the tuples it emitted, so ``κ = ΔCPU / N_out − Σ_j (N_j / N_out) t̂_j``
and ``u = (N_out / W) κ``: the thread fraction ``b`` minus the submit fraction, on the
same time base as its output rate. ``u`` is clamped to ``[0, cores]``; ``u_raw`` keeps
the unclamped value.

**Several runs** of the same graph merge like this: tuple counts add up; per-tuple
quantities (CPU per tuple ``t``, ``t̂``, ``κ``, tuple size) are tuple-weighted means over
the runs (as if the runs' samples were pooled with equal weight per tuple); rates are the
arithmetic mean of the runs' rates; ``u = mean rate × pooled κ (+ mean b)``, so ``u`` stays
consistent with the reported rates.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from spadeopt.refine.profile import (
    KeyCounts,
    LinkStats,
    OperatorStats,
    PortStats,
    Profile,
    ProfileRun,
)

STEADY_FRACTION = 0.8
"""Warn when an operator was active for less than this share of its run."""
NEGATIVE_NOISE = 0.001
"""Warn when Equation 1 gives ``u`` below minus this many cores (clamped to 0 either way)."""


@dataclass(frozen=True)
class Agg:
    """Summary of one metric of one point in one run (what the Spark job returns)."""

    n: int
    mean: float
    first_ts: float
    first_v: float
    last_ts: float
    last_v: float


Key = tuple[str, str, str, str | None, str]
"""``(op, port, dir, sub, metric)``."""


@dataclass(frozen=True)
class RunData:
    """One profiling run as refinement sees it."""

    name: str  # the run directory, for messages
    pes: Mapping[str, tuple[str, ...]]  # PE id -> its operators
    links: frozenset[tuple[str, str]]  # cross-PE links ("op.port", "op.port")
    aggs: Mapping[Key, Agg]
    window: tuple[float, float]  # first and last sample timestamp of the run
    info: ProfileRun | None = None  # goes to the profile's runs[] (None: a calibration run, not listed)


def source_thread_busy(aggs: Mapping[Key, Agg]) -> float | None:
    """The cores a run's busiest sources thread used over its life (first to last
    ``thread_cpu`` sample): for a run of one PE, whose sources thread drives every
    operator by direct calls, how busy that PE was. On a machine shared with other work
    it is below one core although the sources read flat out; the optimizer's fit needs
    it (``spadeopt.optimize.fatm_fit.unattributed_call_s``). ``None`` without two samples."""
    busy = [(a.last_v - a.first_v) / (a.last_ts - a.first_ts) for (_, _, d, _, m), a in aggs.items()
            if d == "thread" and m == "thread_cpu" and a.last_ts > a.first_ts]
    return max(busy) if busy else None


@dataclass
class _Series:
    """Tuples of one port or feed in one run, with what is known about them."""

    tuples: int
    count: Agg | None
    size: Agg | None
    cpu: Agg | None

    def counted(self) -> tuple[float, float] | None:
        """``(tuples spanned, seconds)`` between the first and last count sample, if usable."""
        c = self.count
        if c is None or c.n < 2 or not c.last_ts > c.first_ts or not c.last_v > c.first_v:
            return None
        return c.last_v - c.first_v, c.last_ts - c.first_ts


@dataclass
class _OpRun:
    """One operator in one run."""

    window: float
    active: float  # seconds between its reference port's first and last count sample
    n_in: int
    n_norm: int
    kappa: float
    b: float
    feeds: dict[str, list[_Series]]
    outs: dict[str, _Series]


@dataclass
class _Acc:
    """Merges one quantity over runs."""

    rates: list[float] = field(default_factory=list)
    tuples: int = 0
    size_w: float = 0.0
    size_n: int = 0
    cpu_w: float = 0.0
    cpu_tuples: int = 0
    cpu_samples: int = 0

    def add(self, rate: float, s: _Series | list[_Series]) -> None:
        self.rates.append(rate)
        for x in s if isinstance(s, list) else [s]:
            self.tuples += x.tuples
            if x.size is not None and x.tuples > 0:
                self.size_w += x.size.mean * x.tuples
                self.size_n += x.tuples
            if x.cpu is not None and x.tuples > 0:
                self.cpu_w += x.cpu.mean * x.tuples
                self.cpu_tuples += x.tuples
                self.cpu_samples += x.cpu.n

    def stats(self) -> PortStats:
        rate = sum(self.rates) / len(self.rates) if self.rates else 0.0
        size = self.size_w / self.size_n if self.size_n else 0.0
        cpu = self.cpu_w / self.cpu_tuples if self.cpu_tuples else None
        return PortStats(rate=rate, byte_rate=rate * size, size=size, tuples=self.tuples,
                         cpu_per_tuple_s=cpu, samples=self.cpu_samples)


def estimate(runs: list[RunData], *, app: str, fingerprint: str, params: Mapping[str, Any],
             host: str, cpu_model: str, cores: int, created: float = 0.0) -> Profile:
    """Refine the runs' summaries into a :class:`Profile` (see the module docstring)."""
    warnings: list[str] = []
    per_run = [_refine_run(r, warnings) for r in runs]
    op_names = sorted({op for r in runs for ops in r.pes.values() for op in ops})
    pes_of = {op: tuple(sorted({pe for r in runs for pe, ops in r.pes.items() if op in ops}))
              for op in op_names}

    in_acc: dict[str, _Acc] = {}
    out_acc: dict[str, _Acc] = {}
    operators: dict[str, OperatorStats] = {}
    for op in op_names:
        rates, kappa_w, n_norm, bs, n_in = [], 0.0, 0, [], 0
        n_out: dict[str, int] = {}
        inputs: set[str] = set()
        outputs: set[str] = set()
        for ops in per_run:
            o = ops.get(op)
            if o is None:
                continue
            rates.append(o.n_norm / o.window if o.window > 0 else 0.0)
            kappa_w += o.kappa * o.n_norm
            n_norm += o.n_norm
            bs.append(o.b)
            n_in += o.n_in
            for port, feeds in o.feeds.items():
                inputs.add(port)
                n = sum(f.tuples for f in feeds)
                in_acc.setdefault(port, _Acc()).add(n / o.window if o.window > 0 else 0.0, feeds)
            for port, s in o.outs.items():
                outputs.add(port)
                n_out[port] = n_out.get(port, 0) + s.tuples
                out_acc.setdefault(port, _Acc()).add(s.tuples / o.window if o.window > 0 else 0.0, s)
        ref_rate = sum(rates) / len(rates) if rates else 0.0
        kappa = kappa_w / n_norm if n_norm else 0.0
        b = sum(bs) / len(bs) if bs else 0.0
        u_raw = ref_rate * kappa + b
        u = min(max(u_raw, 0.0), float(cores))
        if u_raw < -NEGATIVE_NOISE:
            warnings.append(f"operator '{op}': Equation 1 gave u = {u_raw:.4f} < 0, clamped to 0 "
                            f"(sampling noise, or submit times larger than process times)")
        if u_raw > cores:
            warnings.append(f"operator '{op}': u = {u_raw:.3f} exceeds the {cores} core(s), clamped")
        sel = {port.split(".", 1)[1]: (n / n_in if n_in else None) for port, n in sorted(n_out.items())}
        operators[op] = OperatorStats(u=u, u_raw=u_raw, cpu_per_tuple_s=kappa, ref_rate=ref_rate,
                                      threads=b, pes=pes_of[op], inputs=tuple(sorted(inputs)),
                                      outputs=tuple(sorted(outputs)), selectivity=sel)
    outputs_stats = {p: a.stats() for p, a in sorted(out_acc.items())}
    inputs_stats = {p: a.stats() for p, a in sorted(in_acc.items())}

    link_set = sorted({lk for r in runs for lk in r.links}
                      | {(f"{k[0]}.{k[1]}", k[3]) for r in runs for k in r.aggs
                         if k[2] == "out" and k[4] == "process_cpu" and k[3]})
    links = []
    for src, dst in link_set:
        s = outputs_stats.get(src)
        if s is None:
            warnings.append(f"link {src} -> {dst}: no samples of output port {src}; rate 0")
            links.append(LinkStats(src, dst, 0.0, 0.0))
        else:
            links.append(LinkStats(src, dst, s.rate, s.size))
    return Profile(app=app, graph_fingerprint=fingerprint, params=dict(params), host=host,
                   cpu_model=cpu_model, cores=cores, runs=tuple(r.info for r in runs if r.info is not None),
                   operators=operators, inputs=inputs_stats, outputs=outputs_stats,
                   links=tuple(links), warnings=tuple(dict.fromkeys(warnings)), created=created,
                   keys=key_counts(runs))


def key_counts(runs: list[RunData]) -> dict[str, KeyCounts]:
    """Each keyed input port's sampled key hashes over every run and PE (``profiling.keys``'s
    lines: one per hash and PE, its count the value), the ``TOP`` hottest kept and the rest
    folded into ``other``."""
    from spadeopt.profiling.keys import OTHER, TOP

    found: dict[str, tuple[dict[int, int], list[int]]] = {}
    for r in runs:
        for (op, port, direction, sub, metric), agg in r.aggs.items():
            if direction != "in" or metric != "key" or sub is None:
                continue
            top, other = found.setdefault(f"{op}.{port}", ({}, [0]))
            n = int(round(agg.mean * agg.n))
            if sub == OTHER:
                other[0] += n
            else:
                top[int(sub)] = top.get(int(sub), 0) + n
    out = {}
    for port, (top, other) in sorted(found.items()):
        keep = dict(sorted(top.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP])
        out[port] = KeyCounts(keep, other[0] + sum(top.values()) - sum(keep.values()))
    return out


def _refine_run(run: RunData, warnings: list[str]) -> dict[str, _OpRun]:
    """Per-operator windows, κ and b of one run."""
    aggs = run.aggs

    def series(op: str, port: str, direction: str, cpu: Agg | None) -> _Series:
        total = aggs.get((op, port, direction, None, "total"))
        count = aggs.get((op, port, direction, None, "count"))
        if total is not None:
            n = int(round(total.last_v))
        elif count is not None:
            n = int(round(count.last_v))
            warnings.append(f"{run.name}: {op}.{port} ({direction}) has no end-of-stream total "
                            f"(was the run cut short?); using its last count sample ({n} tuples)")
        else:
            n = 0
        return _Series(n, count, aggs.get((op, port, direction, None, "size")), cpu)

    outs: dict[str, dict[str, _Series]] = {}
    feeds: dict[str, dict[str, list[_Series]]] = {}
    threads: dict[str, list[Agg]] = {}
    points = sorted({(k[0], k[1], k[2]) for k in aggs if k[2] != "thread" and k[4] != "key"})
    for op, port, direction in points:
        if direction == "out":
            submit = aggs.get((op, port, "out", None, "submit_cpu"))
            outs.setdefault(op, {})[f"{op}.{port}"] = series(op, port, "out", submit)
        else:
            cpu = aggs.get((op, port, "in", None, "process_cpu"))
            feeds.setdefault(op, {}).setdefault(f"{op}.{port}", []).append(series(op, port, "in", cpu))
    for (op, port, direction, sub, metric), agg in sorted(aggs.items(), key=_key_order):
        if direction == "out" and metric == "process_cpu" and sub:
            sop = sub.split(".", 1)[0]
            feeds.setdefault(sop, {}).setdefault(sub, []).append(series(op, port, "out", agg))
        elif direction == "thread" and metric == "thread_cpu":
            threads.setdefault(op, []).append(agg)

    active_run = run.window[1] - run.window[0]
    result: dict[str, _OpRun] = {}
    for op in sorted({o for ops in run.pes.values() for o in ops}):
        f = feeds.get(op, {})
        o = outs.get(op, {})
        th = threads.get(op, [])
        window, active = _window(op, f, o, th, run, warnings)
        n_in = sum(s.tuples for ss in f.values() for s in ss)
        for port, ss in sorted(f.items()):
            for s in ss:
                if s.tuples > 0 and s.cpu is None:
                    warnings.append(f"{run.name}: input port {port} took {s.tuples} tuples but no CPU "
                                    f"sample (raise --sample-rate); its process time counts as 0")
        for port, s in sorted(o.items()):
            if s.tuples > 0 and s.cpu is None:
                warnings.append(f"{run.name}: output port {port} sent {s.tuples} tuples but no CPU "
                                f"sample (raise --sample-rate); its submit time counts as 0")
        submit = sum(s.tuples * _cpu(s) for s in o.values())
        cpu_threads = sum(t.last_v - t.first_v for t in th)
        if n_in > 0:
            process = sum(s.tuples * _cpu(s) for ss in f.values() for s in ss)
            b = sum((t.last_v - t.first_v) / (t.last_ts - t.first_ts) for t in th
                    if t.last_ts > t.first_ts)
            kappa = (process - submit) / n_in
            n_norm = n_in
        else:
            n_norm = sum(s.tuples for s in o.values())
            kappa = (cpu_threads - submit) / n_norm if n_norm else 0.0
            b = 0.0 if n_norm else sum((t.last_v - t.first_v) / (t.last_ts - t.first_ts)
                                       for t in th if t.last_ts > t.first_ts)
        if active_run > 0 and active < STEADY_FRACTION * active_run and n_norm > 0:
            warnings.append(
                f"{run.name}: operator '{op}' was active {active:.2f} s of the run's {active_run:.2f} s: "
                f"rates differ between the start and the end of the run (the queues between PEs "
                f"fill at the start and drain at the end); profile a longer run (more tuples or "
                f"--duration) for steady-state rates")
        result[op] = _OpRun(window, active, n_in, n_norm, kappa, b, f, o)
    return result


def _window(op: str, feeds: Mapping[str, list[_Series]], outs: Mapping[str, _Series],
            threads: list[Agg], run: RunData, warnings: list[str]) -> tuple[float, float]:
    """The operator's window ``W`` (seconds) and its reference port's counted span."""
    best: tuple[float, str, _Series, float] | None = None
    candidates = [(p, s) for p, ss in feeds.items() for s in ss] + list(outs.items())
    for name, s in sorted(candidates, key=lambda x: x[0]):
        c = s.counted()
        if c is not None and s.tuples > 0 and (best is None or c[0] > best[0]):
            best = (c[0], name, s, c[1])
    if best is not None:
        spanned, _, s, secs = best
        return s.tuples / (spanned / secs), secs
    walls = [t.last_ts - t.first_ts for t in threads if t.last_ts > t.first_ts]
    if walls:
        return max(walls), max(walls)
    n = sum(s.tuples for _, s in candidates)
    if n > 0:
        warnings.append(f"{run.name}: operator '{op}' has fewer than two count samples on every port; "
                        f"its rates use the run's active window (raise --sample-rate)")
    w = run.window[1] - run.window[0]
    return (w if w > 0 else 1.0), w


def _cpu(s: _Series) -> float:
    return s.cpu.mean if s.cpu is not None else 0.0


def _key_order(item: tuple[Key, Agg]) -> tuple:
    op, port, direction, sub, metric = item[0]
    return (op, port, direction, sub or "", metric)


def aggregate_records(records: Iterable[Any]) -> dict[Key, Agg]:
    """The Spark job's per-point summary, computed in Python from ``SampleRecord``s.

    For small runs (calibration) and as the reference the Spark aggregation is tested
    against. Ties in ``ts`` keep the first/last record in input order.
    """
    acc: dict[Key, list[float]] = {}
    for r in records:
        key = (r.op, r.port, r.dir, r.sub, r.metric)
        a = acc.get(key)
        if a is None:
            acc[key] = [1, r.value, r.ts, r.value, r.ts, r.value]
            continue
        a[0] += 1
        a[1] += r.value
        if r.ts < a[2]:
            a[2], a[3] = r.ts, r.value
        if r.ts >= a[4]:
            a[4], a[5] = r.ts, r.value
    return {k: Agg(int(a[0]), a[1] / a[0], a[2], a[3], a[4], a[5]) for k, a in acc.items()}
