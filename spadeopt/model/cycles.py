"""The first cycle of a directed graph given as successor sets, by depth-first search:
one function for every layer that must refuse a cycle (a build's PEs, ``deploy``; a
partitioning's PEs, ``optimize.legality``). Pure Python: the driver's deploy code does
not import the compile-time graph library.

>>> first_cycle(["a", "b", "c"], {"a": {"b"}, "b": {"c"}, "c": {"b"}})
['b', 'c', 'b']
>>> first_cycle([0, 1], {0: {1}}) is None
True
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

N = TypeVar("N", bound=Hashable)


def first_cycle(nodes: Sequence[N], succ: Mapping[N, Iterable[N]]) -> list[N] | None:
    """A cycle ``[x, ..., x]`` along ``succ``, searched from ``nodes`` in their order and
    each node's successors in sorted order (the same graph gives the same cycle), or None."""
    state: dict[N, int] = {}  # 1: on the path, 2: done
    for start in nodes:
        if start in state:
            continue
        path, stack = [start], [iter(sorted(succ.get(start, ())))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(succ.get(nxt, ()))))
    return None
