"""Deterministic merging of several ordered input streams (used by Merge and Join).

Tuples are released in ``(key, port)`` order only once every live input has data (or
has ended), so the output order depends on the tuple sequences alone, never on which
input happened to arrive first. That is what keeps answers identical under any fusion.
"""

from __future__ import annotations

from collections import deque


class Ordered:
    def __init__(self, n: int, key_index: list[int]) -> None:
        self.queues = [deque() for _ in range(n)]
        self.live = [True] * n
        self.keys = list(key_index)

    def push(self, port: int, batch) -> list[tuple[int, tuple]]:
        self.queues[port].extend(batch)
        return self._drain()

    def finish(self, port: int) -> list[tuple[int, tuple]]:
        self.live[port] = False
        return self._drain()

    def _drain(self) -> list[tuple[int, tuple]]:
        queues, live, keys = self.queues, self.live, self.keys
        out = []
        append = out.append
        while True:
            best, best_key = -1, None
            for i, q in enumerate(queues):
                if q:
                    k = q[0][keys[i]]
                    if best < 0 or k < best_key:
                        best, best_key = i, k
                elif live[i]:
                    return out
            if best < 0:
                return out
            append((best, queues[best].popleft()))

    @property
    def buffered(self) -> int:
        return sum(len(q) for q in self.queues)
