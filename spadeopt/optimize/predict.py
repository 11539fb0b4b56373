"""Predicted throughput of a plan: the source rate at which its busiest resource saturates.

GreedyFuse and placement decide *which* PEs to build under MaxFrac and the node
capacity (policy); this module answers a different question for any finished plan
(FATM's, FALL's, FMAN's or NONE's): at which aggregate source rate will it run when the
sources read as fast as the rest keeps up? The same function scores FATM's width
vectors and is what ``explain.json`` and ``compare`` report as the planned rate, so the
planned rate of every strategy is one model evaluated on its plan.

Model. The profile gives, at its source rate ``R0``, every operator's CPU fraction ``u``
and every link's tuple rate; everything grows linearly with the factor ``k = R / R0``.
For a PE ``P`` (a set of operators of the physical graph) at factor ``k``::

    L_P(k) = k * oper_scale * (OperLoad(P) + call_s * Internal(P)) + comm_scale * v(k * Rate(P), Size(P))

* ``OperLoad`` and ``Rate``/``Size`` are digest 003's (:mod:`spadeopt.optimize.cost`),
  ``v`` the calibrated communication cost (paper 000's δ: what crossing a PE boundary
  costs per tuple, both ends);
* ``Internal(P)``: tuple rate of the links with both ends in ``P``; ``call_s`` the CPU
  seconds the generated code spends delivering one tuple from one fused operator to the
  next (submits, calls, batching, the PE's loop) that no operator's own timer sees. When
  the profile is one run of one PE whose sources read flat out, that PE was busy one core
  (``pe_cap``), so ``call_s`` is measured from the profile itself: the core minus the
  operators' loads, per internal tuple (``spadeopt.optimize.fatm.unattributed_call_s``);
  otherwise the model's constant;
* ``oper_scale``: the profile is measured on an instrumented build (timers around every
  sampled call), which runs slower than the production build; its loads are scaled by
  this factor (measured: FALL production / FALL profiled rate);
* collapse: a production build compiles each run of static-rate functors of a PE into
  one loop (``spadeopt.codegen.collapse``), which the profiled (instrumented) build does
  not: a link inside a run costs no ``call_s``, and an operator inlined into its
  predecessor's loop keeps ``1 - inlined_frac`` of its profiled load, where
  ``inlined_frac`` is *fitted per app* from one production FALL run made with the
  profile (``spadeopt.optimize.fatm.collapse_fraction``: what that run measured against
  what the model says without collapsing, charged to the inlined operators); a
  calibration's ``collapse_saves_s`` (CPU seconds per input tuple) is subtracted on top
  (never below 0);
* ``comm_scale`` corrects ``v`` (calibrated on a lone forwarding pipeline) for the PEs of
  a real app.

Communication in a flat-out run (``batch`` > 0, the default). ``v`` is calibrated at
*paced* rates, where a receiver wakes up for every frame, so its cost per tuple falls as
the rate grows (0.9 us per link end at 30 k tuples/s, 0.35 at the flat-out end, 96-byte
tuples, this VM). The prediction asks about a run whose sources read flat out; there what
a link costs per tuple depends on how many tuples travel in one frame, not on its rate:
a source hands on ``batch`` tuples per call and every operator one batch per input batch,
so a link carries about ``batch * rate / R_src`` tuples per frame, ``R_src`` the rate of the
sources upstream of it (a hash split's channel gets its share, a selective filter's output
or a router's branch fewer). Each PE then pays, per crossing link and per tuple at its end,
``v``'s flat-out cost (``v`` per tuple above the grid's rates) plus ``frame_s / 2`` per frame
beyond a full one: ``frame_s * (1 / b - 1 / batch) / 2``. So a link of full frames costs
what the calibration's flat-out point says, whatever its rate, and a link of a few tuples
per frame pays the frame's cost (ZeroMQ + CURVE + a wake-up) over those few (issue 27
item 6, docs/decisions/019-one-prediction-model-for-every-plan.md). ``batch = 0`` keeps the
rate-indexed ``v(k Rate(P), Size(P))`` per PE.

Capacity. A PE is one Python process: it can use at most ``pe_cap`` cores. A node offers
``cores`` cores to its PEs while it runs at most ``cores`` PEs that count (``L_P >=
busy``; with ``busy = 0`` every PE counts: an idle PE still wakes for every small batch
and timer); with ``n > cores`` of them the OS time-slices and every switch costs, so the
node offers ``cores / (1 + sched * (n - cores))`` (the node capacity rule for more PEs
than cores). The predicted factor is the largest ``k`` for which every PE and every node
fits, found by bisection (``L_P`` only grows with ``k`` and so does the count of PEs that
count, so feasibility is monotone). Deterministic: a pure function of the plan, the
profile, the calibration and :class:`PerfModel`. The defaults are fitted on this
project's 2-core VM (docs/decisions/019-one-prediction-model-for-every-plan.md); a
calibration file's ``perf_model`` block
replaces them.

The split and merge of a parallel region are operators of the physical graph; their
cost per tuple (paper 000's ``c_p``) is the model's ``split_*_s``/``merge_*_s``, measured
per host by ``spadeopt calibrate`` (:func:`spadeopt.optimize.widths.physical_profile`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from spadeopt.errors import OptimizeError
from spadeopt.optimize.cost import crossing_links, evaluate_comm
from spadeopt.optimize.problem import FusionProblem, Link
from spadeopt.plan.deployment import DEFAULT_BATCH

BISECT_STEPS = 60


@dataclass(frozen=True)
class PerfModel:
    """The constants of the prediction (module docstring); explain.json records them."""

    call_s: float = 0.0
    oper_scale: float = 1.0
    collapse_saves_s: float = 0.0
    comm_scale: float = 1.0
    pe_cap: float = 1.0
    sched: float = 0.0
    busy: float = 0.1
    # paper 000's c_p: CPU seconds per tuple of a parallel region's split (per tuple
    # entering) and merge (per tuple leaving), static-rate (block dealing) or dynamic
    # (hash routing and sequence numbers); `spadeopt calibrate` measures them per host
    # (spadeopt.refine.fission_cost), these defaults are the 2-core VM's
    split_static_s: float = 0.03e-6
    split_dynamic_s: float = 0.5e-6
    merge_static_s: float = 0.04e-6
    merge_dynamic_s: float = 0.6e-6
    # communication in a flat-out run (module docstring): tuples per full frame where ``v``
    # was calibrated (the default run setting's batch size; 0: the rate-indexed v per PE),
    # the CPU seconds a frame costs both ends beyond a full frame's per-tuple share, and the
    # batch the predicted plan runs with (its plan's, optimize.batching; 0: ``batch``)
    batch: float = 0.0
    frame_s: float = 0.0
    run_batch: float = 0.0
    source: str = "defaults"

    @property
    def frame_tuples(self) -> float:
        """Tuples per full frame in the predicted run: the plan's batch, else the calibration's."""
        return self.run_batch or self.batch

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def split_s(self, ordering: str) -> float:
        """The split's CPU seconds per tuple for a region of ``ordering`` (static or dynamic)."""
        return self.split_dynamic_s if ordering == "dynamic" else self.split_static_s

    def merge_s(self, ordering: str) -> float:
        """The merge's CPU seconds per tuple for a region of ``ordering`` (static or dynamic)."""
        return self.merge_dynamic_s if ordering == "dynamic" else self.merge_static_s

    def with_fission_scaled(self, scale: float) -> PerfModel:
        """The split and merge costs times ``scale`` (measured on a host ``scale`` times
        as fast as this one); ``self`` when ``scale`` is 1."""
        if scale == 1.0:
            return self
        return replace(self, split_static_s=self.split_static_s * scale, split_dynamic_s=self.split_dynamic_s * scale,
                       merge_static_s=self.merge_static_s * scale, merge_dynamic_s=self.merge_dynamic_s * scale)

    @property
    def fission_costs(self) -> tuple[float, float, float, float]:
        """What the physical mapping of a profile depends on (cache key)."""
        return (self.split_static_s, self.split_dynamic_s, self.merge_static_s, self.merge_dynamic_s)


@dataclass(frozen=True)
class Prediction:
    """What :func:`predict` found: the source ``rate`` (``factor`` x the profiled rate),
    every PE's load and every node's load and capacity there, and what binds."""

    rate: float
    factor: float
    pe_load: Mapping[str, float]
    node_load: Mapping[int, float]  # nodes that host PEs only
    node_capacity: Mapping[int, float]
    busy_pes: Mapping[int, int]
    bottleneck: str
    call_s: float
    model: PerfModel | None = None  # the constants used (fitted ones included)
    pe_comm: Mapping[str, float] = field(default_factory=dict)  # the part of pe_load its links cost
    pe_fission: Mapping[str, float] = field(default_factory=dict)  # the part its splits and merges cost

    def to_json(self) -> dict[str, Any]:
        return {"rate": self.rate, "factor": self.factor, "bottleneck": self.bottleneck, "call_s": self.call_s,
                "model": self.model.to_json() if self.model else None,
                "pe_load": dict(self.pe_load), "pe_comm": dict(self.pe_comm), "pe_fission": dict(self.pe_fission),
                "node_load": {str(n): v for n, v in self.node_load.items()},
                "node_capacity": {str(n): v for n, v in self.node_capacity.items()},
                "busy_pes": {str(n): v for n, v in self.busy_pes.items()}}


@dataclass(frozen=True)
class _PE:
    name: str
    node: int
    linear: float  # load per unit factor, without communication
    rate: float  # Rate(P) at factor 1
    size: float
    comm: float | None = None  # flat-out comm load per unit factor (model.batch > 0), else v(k Rate, Size)


SATURATED_RATE = 1e9
"""A rate above every calibration grid: ``v(SATURATED_RATE, size) / SATURATED_RATE`` is the
cost per tuple per link end of the grid's flat-out point (``CommCost`` keeps the highest
rate's per-tuple cost above its grid; a linear model is the same at every rate)."""


def link_batches(problem: FusionProblem, batch: float) -> dict[tuple[str | None, str | None], float]:
    """Tuples per frame on each link of ``problem`` in a flat-out run (module docstring):
    ``batch * rate / R_src``, ``R_src`` the summed rate of the sources upstream of the link
    (operators with no input link; their rate the largest of their output links), within
    [1, ``batch``]. Links from outside the app, and links no source reaches, get ``batch``.
    Sources are propagated along the links (a worklist, so feedback loops end):
    O(L * sources)."""
    has_input: set[str] = set()
    succs: dict[str, list[str]] = {op: [] for op in problem.operators}
    src_rate: dict[str, float] = {}
    for lk in problem.links:
        if lk.src is not None and lk.dst is not None:
            has_input.add(lk.dst)
            succs[lk.src].append(lk.dst)
    for lk in problem.links:
        if lk.src is not None and lk.src not in has_input:
            src_rate[lk.src] = max(src_rate.get(lk.src, 0.0), lk.rate)
    upstream: dict[str, frozenset[str]] = {op: frozenset() for op in problem.operators}
    work = sorted(src_rate)
    for op in work:
        upstream[op] = frozenset([op])
    while work:
        op = work.pop()
        for nxt in succs[op]:
            if not upstream[op] <= upstream[nxt]:
                upstream[nxt] = upstream[nxt] | upstream[op]
                work.append(nxt)
    out: dict[tuple[str | None, str | None], float] = {}
    for lk in problem.links:
        total = math.fsum(src_rate[s] for s in sorted(upstream[lk.src])) if lk.src is not None else 0.0
        b = batch * lk.rate / total if total > 0 else batch
        out[(lk.src, lk.dst)] = min(batch, max(1.0, b))
    return out


def _flat_comm(problem: FusionProblem, crossing: Sequence[Link], model: PerfModel,
               batches: Mapping[tuple[str | None, str | None], float]) -> float:
    """The comm load per unit factor of a PE whose crossing links are ``crossing``, in a
    flat-out run (module docstring): per tuple at its end of each link, ``v``'s flat-out
    cost plus the frame's share beyond a full frame."""
    total = 0.0
    for lk in crossing:
        if lk.rate <= 0:
            continue
        per_tuple = evaluate_comm(problem, SATURATED_RATE, lk.size) / SATURATED_RATE
        b = batches.get((lk.src, lk.dst), model.frame_tuples)
        # frames fuller than the calibration's save their share too (a plan's bigger batch)
        total += lk.rate * max(0.0, per_tuple + model.frame_s * (1.0 / b - 1.0 / model.batch) / 2)
    return total


def predict(problem: FusionProblem, pes: Sequence[tuple[str, Sequence[str], int]], nodes: int, cores: int,
            profiled_rate: float, model: PerfModel, call_s: float | None = None,
            collapsed: frozenset[tuple[str, str]] = frozenset(), inlined_frac: float = 0.0,
            batches: Mapping[tuple[str | None, str | None], float] | None = None,
            primitives: frozenset[str] = frozenset()) -> Prediction:
    """The predicted source rate of the PEs ``pes`` (``(name, operators, node)``) of
    ``problem`` (a problem at the profiled rate, factor 1) on ``nodes`` x ``cores``;
    ``call_s`` replaces ``model.call_s`` (e.g. measured from the profile); ``collapsed``
    are the internal links codegen compiles into one loop; an operator inlined there
    keeps ``1 - inlined_frac`` of its load (``fatm.collapse_fraction``, fitted on the
    app's production FALL run) less ``model.collapse_saves_s`` per input tuple;
    ``batches`` are :func:`link_batches` of ``problem`` (computed when ``None`` and
    ``model.batch`` > 0); ``primitives`` are the operators fission made (splits, merges,
    exchanges), whose share of each PE's load the prediction reports (``pe_fission``)."""
    call_s = model.call_s if call_s is None else call_s
    if model.batch > 0 and batches is None:
        batches = link_batches(problem, model.frame_tuples)
    if not (profiled_rate > 0 and math.isfinite(profiled_rate)):
        raise OptimizeError("the profile's sources sent no tuples, so there is no rate to predict; "
                            "profile a run whose sources emit tuples")
    parts, fission = _pe_parts(problem, pes, nodes, model, call_s, collapsed, inlined_frac, batches, primitives)

    def loads(k: float) -> list[float]:
        return [k * p.linear + model.comm_scale * (k * p.comm if p.comm is not None
                                                   else evaluate_comm(problem, k * p.rate, p.size)) for p in parts]

    used = sorted({p.node for p in parts})  # only nodes that host PEs (a cluster may have 100,000)

    def check(k: float) -> tuple[bool, list[float], dict[int, float], dict[int, float], dict[int, int], str]:
        ls = loads(k)
        node_load = dict.fromkeys(used, 0.0)
        busy = dict.fromkeys(used, 0)
        why = ""
        for p, load in zip(parts, ls, strict=True):
            node_load[p.node] += load
            busy[p.node] += load >= model.busy
            if load > model.pe_cap and not why:
                why = f"PE {p.name} needs more than {model.pe_cap:g} core"
        cap = {n: cores / (1.0 + model.sched * max(0, b - cores)) for n, b in busy.items()}
        for n in used:
            if node_load[n] > cap[n] and not why:
                why = f"node {n}: {busy[n]} busy PE(s) need more than its {cap[n]:.2f} cores"
        return not why, ls, node_load, cap, busy, why

    total = math.fsum(p.linear for p in parts)
    if total <= 0:
        raise OptimizeError("the profile measured no CPU load at all; profile a longer run (-p / --duration)")
    hi = len(used) * cores / total  # above this, the linear part alone overfills every used core
    lo = 0.0
    ok, *_ = check(hi)
    if not ok:
        for _ in range(BISECT_STEPS):
            mid = (lo + hi) / 2
            if check(mid)[0]:
                lo = mid
            else:
                hi = mid
        k = lo
    else:
        k = hi
    _, ls, node_load, cap, busy, _ = check(k)
    _, *_, why = check(k * (1 + 1e-6) if k > 0 else 1e-9)
    return Prediction(rate=k * profiled_rate, factor=k, pe_load={p.name: x for p, x in zip(parts, ls, strict=True)},
                      node_load=node_load, node_capacity=cap, busy_pes=busy,
                      bottleneck=why or "every core busy with operator work", call_s=call_s, model=model,
                      pe_comm={p.name: max(0.0, x - k * p.linear) for p, x in zip(parts, ls, strict=True)},
                      pe_fission={name: k * u for name, u in fission.items()})


def _pe_parts(problem: FusionProblem, pes: Sequence[tuple[str, Sequence[str], int]], nodes: int, model: PerfModel,
              call_s: float, collapsed: frozenset[tuple[str, str]], inlined_frac: float,
              batches: Mapping[tuple[str | None, str | None], float] | None,
              primitives: frozenset[str]) -> tuple[list[_PE], dict[str, float]]:
    """Each PE's load per unit factor (:class:`_PE`) and its splits' and merges' share;
    ``OptimizeError`` unless the PEs partition the problem's operators on ``nodes`` nodes."""
    seen: set[str] = set()
    parts = []
    fission: dict[str, float] = {}
    for name, ops, node in pes:
        members = frozenset(ops)
        if members & seen or not members <= problem.operator_set or not 0 <= node < nodes:
            raise OptimizeError(f"PE '{name}' does not belong to a partition of this app's operators "
                                f"on {nodes} node(s); rebuild the plan from this profile")
        seen |= members
        crossing = list(crossing_links(members, problem))
        tuples = math.fsum(lk.rate for lk in crossing)
        size = math.fsum(lk.byte_rate for lk in crossing) / tuples if tuples > 0 else 0.0
        internal = math.fsum(lk.rate for op in members for lk in problem.incident[op]
                             if lk.src == op and lk.dst in members and (lk.src, lk.dst) not in collapsed)
        inlined = {b for a, b in collapsed if a in members and b in members}
        oper = math.fsum(_inlined_load(problem, op, model.collapse_saves_s, inlined_frac) if op in inlined
                         else problem.load[op] for op in members)
        flat = _flat_comm(problem, crossing, model, batches) if batches is not None else None
        parts.append(_PE(name, node, model.oper_scale * (oper + call_s * internal), tuples, size, flat))
        fission[name] = model.oper_scale * math.fsum(problem.load[op] for op in members & primitives)
    if seen != problem.operator_set:
        raise OptimizeError("the plan's PEs do not cover every operator of the app; rebuild the plan")
    return parts, fission


def _inlined_load(problem: FusionProblem, op: str, saves_s: float, frac: float) -> float:
    rate_in = math.fsum(lk.rate for lk in problem.incident[op] if lk.dst == op)
    return max(0.0, problem.load[op] * (1.0 - frac) - saves_s * rate_in)


FRAME_S = 60e-6
"""CPU seconds a frame costs both ends of a link beyond its tuples' share, CURVE on: this
VM's figure from issue 27 item 5 (frames of 2,048 tuples instead of 512 saved 0.03 us per
tuple at the sender and 0.06 at the receiver, i.e. ~20 + ~40 us a frame;
docs/decisions/007-inter-pe-link-cost.md)."""

DEFAULT_MODEL = PerfModel(oper_scale=0.7, sched=0.03, busy=0.0, collapse_saves_s=0.0,
                          batch=float(DEFAULT_BATCH), frame_s=FRAME_S,
                          source="spadeopt defaults (fitted on bargain and chain compare runs, 2-core VM; "
                                 "docs/decisions.md)")
"""Used when the calibration file holds no ``perf_model`` (constants:
docs/decisions/019-one-prediction-model-for-every-plan.md).
``batch`` is the run setting's default frame (``wire.DEFAULT_BATCH``), where ``v`` was
calibrated; a plan with its own batch (``Plan.batch``, :mod:`spadeopt.optimize.batching`) is
predicted with ``run_batch`` set to it (``fatm_physical.predict_physical``)."""


def model_from_calibration(doc: Mapping[str, Any], source: str) -> PerfModel:
    """:data:`DEFAULT_MODEL` with the calibration's ``perf_model`` block over it
    (``OptimizeError`` if malformed); the defaults when it has none."""
    block = doc.get("perf_model")
    if block is None:
        return DEFAULT_MODEL
    fields = {f for f in PerfModel.__dataclass_fields__ if f not in ("source", "run_batch")}  # run_batch: a plan's
    if not isinstance(block, Mapping) or set(block) - fields - {"source", "fitted"}:
        raise OptimizeError(f"{source}: 'perf_model' must be an object with keys among {sorted(fields)}; "
                            f"recalibrate or remove it")
    values = {k: block[k] for k in fields if k in block}
    bad = [k for k, v in values.items()
           if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0]
    if bad or min(values.get(k, 1.0) for k in ("pe_cap", "comm_scale", "oper_scale")) <= 0:
        raise OptimizeError(f"{source}: 'perf_model' values must be finite numbers >= 0 (pe_cap, comm_scale, "
                            f"oper_scale > 0); got {dict(values)}")
    return replace(DEFAULT_MODEL, **{k: float(v) for k, v in values.items()},
                   source=f"{DEFAULT_MODEL.source} + {source} perf_model ({', '.join(sorted(values))})")
