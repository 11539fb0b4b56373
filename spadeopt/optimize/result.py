"""What a fusion optimizer returns: the partitioning, how it got there, and its warnings."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from spadeopt.optimize.cost import exceeds_max_frac, metrics
from spadeopt.optimize.problem import FusionProblem, fmt_names, fmt_vs


@dataclass(frozen=True)
class MergeStep:
    """One greedy merge: ``left`` (the side with the smaller first member) and ``right``.

    ``benefit`` is ``MergeBenefit`` (= 2 x the tuple rate between the two); ``objective``
    is ``Σ Rate`` after the merge, as a running value (initial objective minus the
    benefits so far).
    """

    left: frozenset[str]
    right: frozenset[str]
    benefit: float
    objective: float


@dataclass(frozen=True)
class FusionResult:
    """A partitioning of the operators into PEs.

    ``partitions`` are sorted tuples of operator names, ordered by their first member, so
    equal partitionings compare equal. ``objective`` is ``Σ Rate`` of the result and
    ``objective_initial`` that of the starting partitioning (one PE per operator, with
    colocation groups pre-merged), both from the reference functions of
    :mod:`spadeopt.optimize.cost`. ``method`` is ``"greedy"`` or ``"exact"``;
    ``mergable_rule`` is the rule GreedyFuse ran with (``"both"``, ``"either"`` or ``"absorb"``).
    """

    partitions: tuple[tuple[str, ...], ...]
    objective: float
    objective_initial: float
    steps: tuple[MergeStep, ...] = ()
    warnings: tuple[str, ...] = ()
    method: str = "greedy"
    mergable_rule: str = "both"
    comp_loads: tuple[float, ...] = field(default=(), compare=False, repr=False)
    """Each partition's CompLoad as :func:`~spadeopt.optimize.cost.metrics` computes it,
    when the optimizer has them (GreedyFuse does); empty otherwise. Not part of equality."""

    @cached_property
    def pe_of(self) -> Mapping[str, int]:
        """Operator name -> index of its partition in ``partitions``."""
        return {op: i for i, part in enumerate(self.partitions) for op in part}


def canonical(partitions: Iterable[Iterable[str]]) -> tuple[tuple[str, ...], ...]:
    """Sorted member tuples, ordered by first member."""
    return tuple(sorted((tuple(sorted(p)) for p in partitions), key=lambda t: t[0]))


def saturation_warnings(
    partitions: Iterable[tuple[str, ...]], problem: FusionProblem,
    comp_loads: Sequence[float] | None = None,
) -> tuple[str, ...]:
    """One warning per saturated partition (which only forced partitions can be).

    A partition is forced when it is a single operator, or a colocation group; fusion
    cannot split it, and this optimizer does no fission. ``comp_loads`` are the
    partitions' CompLoads when the caller has them (``cost.partition_loads``).
    """
    warnings = []
    parts = list(partitions)
    loads = [metrics(frozenset(p), problem).comp_load for p in parts] if comp_loads is None else comp_loads
    for part, load in zip(parts, loads, strict=True):
        if not exceeds_max_frac(load, problem.max_frac):
            continue
        comp, cap = fmt_vs(load, problem.max_frac)
        need = f"CompLoad {comp} > MaxFrac {cap}"
        if len(part) == 1:
            warnings.append(f"operator {part[0]} alone needs {need}; it stays a singleton PE")
        else:
            warnings.append(
                f"colocated operators {fmt_names(part)} together need {need}; "
                "they stay one PE as annotated"
            )
    return tuple(warnings)
