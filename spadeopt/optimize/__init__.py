"""Stage 2: fusion (GreedyFuse, an exact optimizer for small graphs) and placement.

Pure algorithms over a :class:`FusionProblem`; no I/O. See digest 003 §5.
"""

from spadeopt.optimize.cost import PartitionMetrics, metrics, objective
from spadeopt.optimize.exact import exact_fuse, gap
from spadeopt.optimize.greedy_fuse import greedy_fuse, why_not_merged
from spadeopt.optimize.legality import Verdict, fusion_legal, initial_partitions
from spadeopt.optimize.placement import Placement, pe_graph, place
from spadeopt.optimize.problem import CommModel, FusionProblem, LinearCommModel, Link
from spadeopt.optimize.result import FusionResult, MergeStep

__all__ = [
    "CommModel",
    "FusionProblem",
    "FusionResult",
    "LinearCommModel",
    "Link",
    "MergeStep",
    "PartitionMetrics",
    "Placement",
    "Verdict",
    "exact_fuse",
    "fusion_legal",
    "gap",
    "greedy_fuse",
    "initial_partitions",
    "metrics",
    "objective",
    "pe_graph",
    "place",
    "why_not_merged",
]
