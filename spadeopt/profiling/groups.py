"""Sample groups: ports whose stride countdown would always equal another port's.

A functor without a filter emits exactly one tuple per input tuple, in the same call, so
its output port counts exactly what the port feeding it counts. Codegen
(``codegen.pe_spec.assign_followers``) gives such a *follower* no countdown at all; the
group's *leader* (the first port up the chain that is not one) counts for the whole
group. When the leader samples a batch it calls the followers' sampled variants, which
time their submit by wall clock into fixed slots of the leader's times list and, if
they make new tuples, leave their output batch in a slot of its outputs list: a
``Group``. Each of the leader's records carries, after its own fields, the timing
window's ``r``, the end of its call, the group's times and the sizes of the new tuples
at its sampled offset (``group_part``, ``MetricRecorder.lead``). A follower's samples
are rebuilt from its leader's records when the profile is written
(``MetricRecorder.follow``).

Invariant: a follower's samples are those a countdown of its own would have taken (the
same tuples, with the follower's own sizes and times), with one reservoir decision for
the whole group.

Cost on the hot path, per follower and sampled batch: one or two clock reads and a
store. A follower whose one call is a tail call of the leader's reads the clock once,
where its submit starts: its submit ends where the leader's call does. Records are
numbers in the leader's flat list, so the cyclic garbage collector never sees a group.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Group = tuple[Sequence[float], Sequence[Sequence[Any]], float]
"""What a leader's followers left in one sampled submit: their wall ns by slot (each
follower's submit, then each call's if it has several; a tail call's start time), the
output batches of those that make new tuples, and the ``perf_counter_ns`` at which the
leader's call ended (``MetricRecorder.follow``)."""


def group_part(group: Group, i: int, r: float, sizeof: Callable[[object], int]) -> tuple[float, ...]:
    """The group's part of a leader's record of the tuple at offset ``i`` (``MetricRecorder.lead``):
    ``r``, the end of the call, the followers' times, the sizes of their new tuples at ``i``."""
    times, outs, end = group
    return (r, end, *times, *[sizeof(out[i]) for out in outs]) if outs else (r, end, *times)
