"""One width vector's physical graph, its profile and the prediction of a plan of it.

:class:`PhysicalCache` keeps, per width vector of one ``fuse_auto`` call, the physical
graph (``plan.fission.physical_graph``), its profile (``optimize.widths.physical_profile``)
and what predictions of its plans share (:class:`PhysicalEntry`); :func:`predict_physical`
predicts a plan's source rate on it. FATM's search (``optimize.fatm_search``) scores width
vectors with these, as does every strategy's prediction in ``explain`` and ``compare``.
Pure functions of the logical graph, profile, ``comm`` and model: the cache changes no
bit of a prediction (``tests/optimize/test_fatm_caches.py``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from spadeopt.kinds import kind_of
from spadeopt.model.graph import AppGraph
from spadeopt.optimize.fatm_fit import unattributed_call_s
from spadeopt.optimize.fatm_problem import OperatorProfile, problem_for
from spadeopt.optimize.predict import DEFAULT_MODEL, PerfModel, Prediction, link_batches, predict
from spadeopt.optimize.problem import CommModel, FusionProblem
from spadeopt.optimize.quotient import Quotient
from spadeopt.optimize.widths import physical_profile
from spadeopt.plan.fission import physical_graph
from spadeopt.plan.plan import Plan
from spadeopt.plan.regions import Region
from spadeopt.plan.static_runs import collapsible_links

Regions = tuple[Region, ...]  # a width vector: every declared region with its width


class PhysicalEntry:
    """One width vector's physical graph and profile, the memo of :func:`problem_for`
    for them, their collapsible links (computed when first asked) and the problem
    predictions are made on (set by :func:`predict_physical`)."""

    __slots__ = ("graph", "prof", "memo", "_collapsible", "predict_problem", "batches", "quotient")

    def __init__(self, graph: AppGraph, prof: OperatorProfile) -> None:
        self.graph, self.prof = graph, prof
        self.memo: dict[str, Any] = {}
        self._collapsible: frozenset[tuple[str, str]] | None = None
        self.predict_problem: FusionProblem | None = None
        self.batches: dict[float, dict[tuple[str | None, str | None], float]] = {}  # link_batches per batch size
        self.quotient: Quotient | None | bool = False  # False: not built yet (quotient_of)

    def quotient_of(self, problem: FusionProblem) -> Quotient | None:
        """The :class:`~spadeopt.optimize.quotient.Quotient` of this vector's problems
        (``problem`` is one of them: they share operators, link ends and annotations)."""
        if self.quotient is False:
            self.quotient = Quotient.of(problem)
        return self.quotient  # type: ignore[return-value]

    @property
    def collapsible(self) -> frozenset[tuple[str, str]]:
        if self._collapsible is None:
            self._collapsible = collapsible_links(self.graph)
        return self._collapsible


class PhysicalCache:
    """One ``fuse_auto`` call's physical graphs: a :class:`PhysicalEntry` per width vector.
    The search visits a vector to score it, again in the MaxFrac ladder and for the final
    prediction; all are pure functions of the logical graph, profile and ``comm``, so
    each is built once."""

    def __init__(self, graph: AppGraph, prof: OperatorProfile, comm: CommModel,
                 model: PerfModel = DEFAULT_MODEL, acyclic: bool = False) -> None:
        self.graph, self.prof, self.comm, self.model = graph, prof, comm, model
        self.acyclic = acyclic  # every problem of its vectors has no cycle of PEs (a build with checkpoints)
        self._entries: dict[Regions, PhysicalEntry] = {}

    def serves(self, comm: CommModel, model: PerfModel) -> bool:
        """Whether this cache's physical profiles are the ones ``comm`` and ``model`` give."""
        return self.comm is comm and self.model.fission_costs == model.fission_costs

    def get(self, regions: Regions) -> PhysicalEntry:
        entry = self._entries.get(regions)
        if entry is None:
            physical = physical_graph(self.graph, regions)
            entry = PhysicalEntry(physical, physical_profile(self.graph, self.prof, regions, physical, self.model))
            if self.acyclic:
                entry.memo["acyclic"] = True  # problem_for's setting for the vector's problems
            self._entries[regions] = entry
        return entry


def predict_physical(graph: AppGraph, prof: OperatorProfile, plan: Plan, comm: CommModel, model: PerfModel,
                     frac: float, cache: PhysicalCache | None = None) -> Prediction:
    """The predicted source rate of ``plan`` once ``model`` is fitted and the collapse
    fraction ``frac`` known: its regions mapped onto their physical graph (from ``cache``
    when it serves ``comm`` and ``model``), its PEs and nodes evaluated, its links' frames
    as full as its batch makes them (``Plan.batch``; the model's ``run_batch`` without one)."""
    entry = (cache if cache is not None and cache.serves(comm, model)
             else PhysicalCache(graph, prof, comm, model)).get(plan.regions)
    if plan.batch is not None and plan.batch != model.run_batch:
        model = replace(model, run_batch=float(plan.batch))  # the batch the plan runs with
    batches = prediction_inputs(entry, comm, model)
    collapsing = plan.collapse and (model.collapse_saves_s > 0 or frac > 0)
    if collapsing:
        pe_of = plan.pe_of
        collapsed = frozenset((a, b) for a, b in entry.collapsible if pe_of.get(a) == pe_of.get(b))
    else:
        collapsed = frozenset()
    primitives = frozenset(op.name for op in entry.graph.operators if kind_of(op).fission_made)
    return predict(entry.predict_problem, [(pe.pe_id, pe.operators, pe.node) for pe in plan.pes], plan.nodes,
                   plan.cores, prof.source_rate, model, unattributed_call_s(prof, model), collapsed, frac, batches,
                   primitives)


def prediction_inputs(entry: PhysicalEntry, comm: CommModel, model: PerfModel
                      ) -> dict[tuple[str | None, str | None], float] | None:
    """Sets ``entry.predict_problem`` (the physical problem at the profiled rate, MaxFrac
    and MinUtil 1) if unset; returns its :func:`link_batches` under ``model`` (``None``
    when ``model.batch`` is 0), kept in ``entry``."""
    if entry.predict_problem is None:
        entry.predict_problem = problem_for(entry.graph, entry.prof, comm, 1.0, 1.0, entry.memo)
    if model.batch <= 0:
        return None
    frame = model.frame_tuples  # the plan's batch (PerfModel.run_batch), else the calibration's
    batches = entry.batches.get(frame)
    if batches is None:
        batches = entry.batches[frame] = link_batches(entry.predict_problem, frame)
    return batches
