"""FATM's fitted constants: what the profile and the production probe say about this app.

The prediction model (:mod:`spadeopt.optimize.predict`) has host-wide constants from the
calibration. Three of its inputs are fitted per app, from the refined profile alone:

* :func:`unattributed_call_s`: CPU seconds per fused tuple delivery that no operator's
  timer saw, when the profile was one run of one PE that ran flat out (``one_pe_run``);
  otherwise the calibration's ``call_s``.
* :func:`collapse_fraction`: the share of an inlined operator's load that collapsing a
  functor run into one loop saves, fitted on the production FALL probe
  (``production_fall_rate``; 0 without one). ``A + (1 - f) B`` equals what the probe
  measured, where ``B`` is the profiled load of the operators collapsing inlines and
  ``A`` everything else (:func:`collapse_loads`).
* :func:`fit_production`: the model's ``oper_scale`` fitted on the same probe, only when
  the collapse share falls outside [0, 1] (or nothing is inlined) and so cannot use
  that one measurement.

Invariants: every function is pure and deterministic; without a probe (or a source
rate) the model and ``call_s`` come back unchanged and the fraction is 0;
:func:`fit_production` is idempotent and clamps ``oper_scale`` to
:data:`OPER_SCALE_FIT`. Which links collapse is read off the logical graph
(codegen's one rule, :func:`spadeopt.plan.static_runs.collapsible_links`).

Cost: O(n + L) sums over the profile's loads and links, plus one pass over the graph
for its collapsible links.

>>> from spadeopt.optimize.fatm_problem import OperatorProfile
>>> from spadeopt.optimize.predict import PerfModel
>>> prof = OperatorProfile("doc", "fp", {"a": 0.3, "b": 0.2}, (("a", "b", 1000.0, 50.0),), 1000.0,
...                        one_pe_run=True)
>>> round(unattributed_call_s(prof, PerfModel(pe_cap=1.0)), 9)  # (1.0 - 0.5) cores / 1000 tuples/s
0.0005
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import NamedTuple

from spadeopt.model.graph import AppGraph
from spadeopt.optimize.fatm_problem import OperatorProfile
from spadeopt.optimize.predict import PerfModel
from spadeopt.plan.static_runs import collapsible_links

OPER_SCALE_FIT = (0.2, 2.0)  # a fitted oper_scale outside this is a broken run, not a fit: clamped


class CollapseLoads(NamedTuple):
    """FALL's profiled cores at the profiled rate, split for collapsing."""

    kept: float  # the operators not inlined, plus ``call_s`` on the links collapsing keeps
    inlined: float  # the operators collapsing inlines into their predecessor's loop


def fit_production(graph: AppGraph, prof: OperatorProfile, model: PerfModel) -> PerfModel:
    """``model`` with ``oper_scale`` fitted on the app's production FALL run, unless
    :func:`collapse_fraction` spends that one measurement.

    FALL is one PE whose sources read flat out: :func:`production_cores` at the profiled
    rate ``R0`` (``pe_cap * R0 / R`` on an idle machine), against the model's
    ``oper_scale * (Σu + call_s * internal)``; the
    ``oper_scale`` that makes them equal replaces the constant (it is what instrumentation
    costs *this* app). An app with collapsible functors spends the measurement on the
    share collapsing saves instead, as long as that share comes out in [0, 1]. Outside,
    the share is clamped and ``oper_scale`` fitted with it: production FALL ran slower
    than the model says it would with nothing saved (share 0; the constant is too low
    for this app, as on the chain of busy functors), or faster than with the inlined
    operators free (share 1; the constant is too high for what is left, the sources and
    sinks, as on peer: predictions were 0.6 of measured for every strategy, round 6).
    Idempotent; unchanged without a probe.
    """
    if not (prof.production_fall_rate > 0 and prof.source_rate > 0):
        return model
    raw = _raw_collapse_fraction(graph, prof, model)
    if raw is not None and 0 <= raw <= 1 + 1e-9:
        return model
    call_s = unattributed_call_s(prof, model)
    if raw is None or raw < 0:  # nothing inlined, or slower than with nothing saved: share 0
        internal = math.fsum(r for a, b, r, _ in prof.links if a is not None and b is not None)
        base = math.fsum(prof.load.values()) + call_s * internal
    else:  # faster than with the inlined operators free: share 1, the rest is oper_scale's
        base = collapse_loads(graph, prof, call_s).kept
    if base <= 0:
        return model
    measured = production_cores(prof, model)
    lo, hi = OPER_SCALE_FIT
    scale_ = min(hi, max(lo, measured / base))
    src = model.source.split(" + oper_scale fitted")[0]
    return replace(model, oper_scale=scale_, source=f"{src} + oper_scale fitted on the production FALL run")


def collapse_fraction(graph: AppGraph, prof: OperatorProfile, model: PerfModel) -> float:
    """The share of an inlined operator's profiled load that collapsing saves, fitted on
    the app's production FALL run (``prof.production_fall_rate``; 0 when none was made).

    FALL is one PE whose sources read flat out, so its production run costs ``pe_cap / R``
    CPU seconds per source tuple at its steady rate ``R``. The model without collapsing
    says ``A + B`` per source tuple: ``A`` for every operator not inlined plus ``call_s``
    on the links collapsing keeps, ``B`` for the inlined ones (both ``oper_scale``
    times the profiled loads, over the profiled rate). The fraction ``f`` with
    ``A + (1 - f) B`` equal to the measurement, clamped to [0, 1], is charged to the
    inlined operators alone: the code collapsing removes (a call, a tuple and a list per
    operator and batch, overwritten expressions) is theirs.
    """
    raw = _raw_collapse_fraction(graph, prof, model)
    return 0.0 if raw is None else min(1.0, max(0.0, raw))


def _raw_collapse_fraction(graph: AppGraph, prof: OperatorProfile, model: PerfModel) -> float | None:
    """:func:`collapse_fraction` before clamping; ``None`` without a probe or inlined operators."""
    if not (prof.production_fall_rate > 0 and prof.source_rate > 0):
        return None
    if not collapsible_links(graph):
        return None
    a_load, b_load = collapse_loads(graph, prof, unattributed_call_s(prof, model))
    a_part, b_part = model.oper_scale * a_load, model.oper_scale * b_load
    if b_part <= 0:
        return None
    return 1.0 - (production_cores(prof, model) - a_part) / b_part


def collapse_loads(graph: AppGraph, prof: OperatorProfile, call_s: float) -> CollapseLoads:
    """Profiled cores of FALL at the profiled rate, split for collapsing (:class:`CollapseLoads`)."""
    links = collapsible_links(graph)
    inlined = {b for _, b in links}
    kept = math.fsum(r for a, b, r, _ in prof.links if a is not None and b is not None and (a, b) not in links)
    return CollapseLoads(math.fsum(u for op, u in prof.load.items() if op not in inlined) + call_s * kept,
                         math.fsum(prof.load.get(op, 0.0) for op in inlined))


def production_cores(prof: OperatorProfile, model: PerfModel) -> float:
    """The cores the production FALL build needs at the profiled source rate: its probe's
    CPU seconds per source tuple times that rate (``prof.production_fall_cpu_s``), or,
    when the probe's CPU is not known, ``pe_cap`` times the profiled over the probe's rate
    (one PE whose sources read flat out is busy ``pe_cap``). The CPU, not the rate: a
    probe that shared its core with other work (a loaded machine) ran slower per second
    but not per CPU second, and the model predicts a plan whose PEs have their cores."""
    if prof.production_fall_cpu_s > 0:
        return prof.source_rate * prof.production_fall_cpu_s
    return model.pe_cap * prof.source_rate / prof.production_fall_rate


def profiled_cores(prof: OperatorProfile, model: PerfModel) -> float:
    """The cores the one profiled PE used: its sources thread's measured CPU over its life
    (``prof.profiled_busy``, at most ``pe_cap``), or ``pe_cap`` (flat out) when not measured."""
    return min(model.pe_cap, prof.profiled_busy) if prof.profiled_busy > 0 else model.pe_cap


def unattributed_call_s(prof: OperatorProfile, model: PerfModel) -> float:
    """CPU seconds per fused tuple delivery that no operator's timer saw.

    A profile of one PE whose sources read flat out (``one_pe_run``) measured a process
    that was busy :func:`profiled_cores` at the profiled rate (``pe_cap`` on an idle
    machine; less when other work took part of its core, and then the rest is waiting,
    not code); what the operators' own loads do not account for is the generated code
    between them (submits, calls, batching, the PE's loop), spread over every tuple
    delivered inside that PE. Otherwise (or when the operators account for it all)
    ``model.call_s``.
    """
    if not prof.one_pe_run:
        return model.call_s
    spare = profiled_cores(prof, model) - math.fsum(prof.load.values())
    internal = math.fsum(r for a, b, r, _ in prof.links if a is not None and b is not None)
    return spare / internal if spare > 0 and internal > 0 else model.call_s
