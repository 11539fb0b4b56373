"""The batch a plan runs with: tuples a source hands on per call, chosen from the profile.

A message between PEs is one submitted batch (docs/decisions/001), and a frame costs
about ``predict.FRAME_S`` (~60 us over both ends, CURVE on) beyond its tuples' share. A
key exchange of fan-out k thins every batch k-fold and a selective filter thins it
further, so a wide plan of a cheap pipeline sends many small frames: the YSB-style app's
16-core plan spent 5.0 s of CPU at 512-tuple batches and 3.9 s at 2,048 for the same
2 M events, while FALL's one PE did not change (1.56 s). A big batch is not free either:
an aligned checkpoint's barrier waits for the batch in hand, and a batch of slow tuples
holds it for seconds (1.5 ms tuples x 2,048 = 3 s, which starved the kill tests of
checkpoints). So the batch is a per-plan choice from what the tuples cost.

Rule (:func:`plan_batch`): the largest power of two from :data:`DEFAULT_BATCH` up to
:data:`MAX_PLAN_BATCH` (2,048) such that

* one batch costs at most :data:`BATCH_BUDGET_S` of CPU through the *whole* graph
  (the profile's summed operator loads per source tuple: what FALL's one PE spends on
  it; any PE of any plan spends less), so a barrier or a live tuple waits at most that
  long per batch wherever the batch is;
* one batch of the widest stream's tuples encodes to at most ``wire.FRAME_BYTES``
  (a bigger batch would only be cut into frames again, and queues hold ``hwm`` of them).

Never below :data:`DEFAULT_BATCH`: an app of slow tuples keeps the default every build
without a profile runs with. A live source still passes a partial batch on after
``--max-batch-delay`` (decision 043), so live latency does not grow with the batch, and
``spadeopt run --batch-size`` overrides the plan's choice for one run.

Invariants: a pure function of the profile (deterministic plans, decision 015); the
result is a power of two in [``DEFAULT_BATCH``, ``MAX_PLAN_BATCH``]. Cost: O(operators + links).

>>> from spadeopt.optimize.fatm_problem import OperatorProfile
>>> cheap = OperatorProfile("a", "f", {"src": 0.2, "f": 0.3}, (("src", "f", 500_000.0, 40.0),), 500_000.0)
>>> plan_batch(cheap)  # 1 us a source tuple: 2,048 tuples cost 2 ms (4,096 would fit too: the cap)
2048
>>> slow = OperatorProfile("a", "f", {"src": 0.01, "f": 0.99}, (("src", "f", 1_000.0, 40.0),), 1_000.0)
>>> plan_batch(slow)  # 1 ms a tuple: the default
512
>>> wide = OperatorProfile("a", "f", {"src": 0.2, "f": 0.3}, (("src", "f", 500_000.0, 600.0),), 500_000.0)
>>> plan_batch(wide)  # 600-byte tuples: 1,024 of them fit in a 1 MiB frame, 2,048 do not
1024
"""

from __future__ import annotations

import math

from spadeopt.optimize.fatm_problem import OperatorProfile
from spadeopt.wire import DEFAULT_BATCH, FRAME_BYTES

BATCH_BUDGET_S = 0.005
"""CPU seconds one batch may cost through the whole graph (a barrier's or a live tuple's
wait per batch, at most)."""

MAX_PLAN_BATCH = 2048
"""The largest batch a plan chooses. Measured on the YSB-style app (docs/decisions/001):
2,048 cut its 2-core plan's CPU by a sixth and, in an earlier run, its 16-core plan's by a
fifth; 4,096 made the 16-core plan's PEs dearer (6.5 s against 5.2-5.6 s for 2 M events,
one interleaved run of three rounds: big lists under time-slicing), and the frame share
it would still save is ~15 ns a tuple (``predict.FRAME_S`` / 4,096)."""


def plan_batch(prof: OperatorProfile) -> int:
    """The batch a plan of ``prof``'s app runs with (module docstring)."""
    return int(batch_doc(prof)["tuples"])


def batch_doc(prof: OperatorProfile) -> dict[str, float]:
    """:func:`plan_batch` and what it was chosen from, for ``explain.json``."""
    per_tuple_s = math.fsum(prof.load.values()) / prof.source_rate if prof.source_rate > 0 else 0.0
    widest = max((size for _, _, _, size in prof.links), default=0.0)
    doc = {"tuples": _largest(per_tuple_s, widest) if prof.source_rate > 0 else DEFAULT_BATCH,
           "cpu_s_per_source_tuple": per_tuple_s, "widest_tuple_bytes": widest,
           "budget_s": BATCH_BUDGET_S, "frame_bytes": FRAME_BYTES}
    return doc


def _largest(per_tuple_s: float, widest: float) -> int:
    batch = DEFAULT_BATCH
    while (batch * 2 <= MAX_PLAN_BATCH and batch * 2 * per_tuple_s <= BATCH_BUDGET_S
           and batch * 2 * widest <= FRAME_BYTES):
        batch *= 2
    return batch
