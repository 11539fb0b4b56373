"""Module-level user code for the toolkit tests (PEs import it by name)."""

from __future__ import annotations


def replay(rows):
    """Yield the given rows as tuples."""
    for r in rows:
        yield tuple(r)
