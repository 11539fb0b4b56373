"""Helpers for comparing sink rows across runs."""

from __future__ import annotations

from collections import defaultdict


def by_customer(rows: list[dict]) -> dict[str, list[dict]]:
    """Each customer's rows in order: what an arrival-ordered (per-partition) run must not
    change, while customers may interleave differently."""
    out = defaultdict(list)
    for r in rows:
        out[r["customer"]].append(r)
    return dict(out)
