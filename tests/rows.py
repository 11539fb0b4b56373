"""Helpers for comparing sink rows across runs."""

from __future__ import annotations

from collections import defaultdict


def by_key(rows: list[dict], attr: str) -> dict[str, list[dict]]:
    """Each value of ``attr``'s rows in order: what an arrival-ordered (per-partition) run
    must not change, while the values may interleave differently."""
    out = defaultdict(list)
    for r in rows:
        out[r[attr]].append(r)
    return dict(out)


def by_customer(rows: list[dict]) -> dict[str, list[dict]]:
    """Each customer's rows in order (``by_key`` on ``customer``)."""
    return by_key(rows, "customer")
