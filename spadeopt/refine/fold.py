"""A profile of a run with parallel regions, folded back onto the logical operators.

A plan with a region of width k > 1 runs each region operator ``op`` as k channel copies
``op__c`` plus the region's split(s), merge and exchanges (``plan.fission``). Refining
such a run (an adaptive run's later phase, issue 39) gives a profile of those physical
operators, and FATM plans from the *logical* ones' loads: it adds the split, merge and
exchange costs of whatever widths it tries itself (the calibration's). So
:func:`fold_copies` turns it into the profile a width-1 run at the same rate would give:

* an operator's ``u``, ``u_raw``, ``threads`` and ``ref_rate`` are its copies' sums (each
  copy's CPU fraction over its own window; together the operator's work per second);
  its CPU per tuple is ``u / ref_rate`` net of threads (the copies' tuple-weighted mean);
  selectivities are the copies' rate-weighted means; its PEs the copies' PEs;
* a port ``op__c.p`` adds into ``op.p``: rates, byte rates, tuples and samples add, size
  and CPU per tuple are tuple-weighted means;
* the split, merge and exchange operators (the physical names that are neither logical
  operators nor copies) and their ports are dropped;
* the links are the logical graph's streams, each at its source port's folded rate and
  size (a physical link into a split stands for the logical stream it deals);
* keyed ports' sampled key counts add up (each copy saw its own channel's keys).

Operators outside every wider region pass through unchanged. Pure: no Spark, no I/O.
Cost O(operators + ports + streams).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import TypeVar

from spadeopt.model.graph import AppGraph
from spadeopt.plan.regions import Region
from spadeopt.refine.profile import KeyCounts, LinkStats, OperatorStats, PortStats, Profile

T = TypeVar("T")


def copies_of(graph: AppGraph, regions: Iterable[Region]) -> dict[str, str]:
    """Physical name -> logical operator, for every channel copy of a region wider than 1.

    >>> from spadeopt import App
    >>> from spadeopt.toolkit.sources import counter
    >>> a = App("t"); s = a.source("s", "seq:int, payload:bytes", generator=counter, args={"n": 9})
    >>> f = a.functor("f", s, output={"seq": "seq"})
    >>> _ = a.sink("o", f)
    >>> copies_of(a.build(), [Region("r", ("f",), 2)])
    {'f__0': 'f', 'f__1': 'f'}
    """
    logical = {op.name for op in graph.operators}
    return {Region.channel_op(op, c): op for r in regions if r.width > 1 for op in r.operators if op in logical
            for c in range(r.width)}


def fold_copies(profile: Profile, graph: AppGraph, regions: Iterable[Region]) -> Profile:
    """``profile`` (of a run whose ``regions`` had their widths) as a profile of ``graph``'s
    logical operators (module docstring). Unchanged when no region is wider than 1."""
    copies = copies_of(graph, regions)
    if not copies:
        return profile
    logical = {op.name for op in graph.operators}

    def name(physical: str) -> str | None:
        return physical if physical in logical else copies.get(physical)

    def port(p: str) -> str | None:
        op, _, rest = p.partition(".")
        found = name(op)
        return None if found is None else f"{found}.{rest}"

    operators = _fold_operators(profile.operators, name, port)
    outputs = _fold_ports(profile.outputs, port)
    inputs = _fold_ports(profile.inputs, port)
    links = []
    for s in graph.streams:
        src, dst = f"{s.src.op}.{s.src.port}", f"{s.dst.op}.{s.dst.port}"
        got = outputs.get(src)
        if got is not None:
            links.append(LinkStats(src, dst, got.rate, got.size))
    keys: dict[str, tuple[dict[int, int], list[int]]] = {}
    for p, kc in profile.keys.items():
        folded = port(p)
        if folded is None:
            continue
        top, other = keys.setdefault(folded, ({}, [0]))
        for h, n in kc.top.items():
            top[h] = top.get(h, 0) + n
        other[0] += kc.other
    return replace(profile, operators=operators, outputs=outputs, inputs=inputs, links=tuple(links),
                   keys={p: KeyCounts(dict(top), other[0]) for p, (top, other) in sorted(keys.items())},
                   warnings=(*profile.warnings, f"folded the channel copies of {len(copies)} operator copies "
                                                f"into their logical operators (a run with parallel regions)"))


def _grouped(stats: Mapping[str, T], rename) -> list[tuple[str, list[T]]]:
    """``stats`` grouped under their logical names (``rename``; None: dropped), sorted."""
    groups: dict[str, list[T]] = {}
    for physical, st in sorted(stats.items()):
        found = rename(physical)
        if found is not None:
            groups.setdefault(found, []).append(st)
    return sorted(groups.items())


def _fold_operators(stats: Mapping[str, OperatorStats], name, port) -> dict[str, OperatorStats]:
    out = {}
    for op, sts in _grouped(stats, name):
        if len(sts) == 1:
            one = sts[0]
            out[op] = replace(one, inputs=tuple(sorted(port(p) or p for p in one.inputs)),
                              outputs=tuple(sorted(port(p) or p for p in one.outputs)))
            continue
        ref = sum(s.ref_rate for s in sts)
        u, threads = sum(s.u for s in sts), sum(s.threads for s in sts)
        per_tuple = (sum(s.cpu_per_tuple_s * s.ref_rate for s in sts) / ref) if ref > 0 else 0.0
        sel: dict[str, float | None] = {}
        for p in sorted({p for s in sts for p in s.selectivity}):
            vals = [(s.selectivity.get(p), s.ref_rate) for s in sts]
            known = [(v, w) for v, w in vals if v is not None]
            weight = sum(w for _, w in known)
            sel[p] = (sum(v * w for v, w in known) / weight if weight > 0 else
                      (sum(v for v, _ in known) / len(known) if known else None))
        out[op] = OperatorStats(u=u, u_raw=sum(s.u_raw for s in sts), cpu_per_tuple_s=per_tuple, ref_rate=ref,
                                threads=threads, pes=tuple(sorted({pe for s in sts for pe in s.pes})),
                                inputs=tuple(sorted({port(p) or p for s in sts for p in s.inputs})),
                                outputs=tuple(sorted({port(p) or p for s in sts for p in s.outputs})),
                                selectivity=sel)
    return out


def _fold_ports(stats: Mapping[str, PortStats], port) -> dict[str, PortStats]:
    out = {}
    for p, sts in _grouped(stats, port):
        rate, tuples = sum(s.rate for s in sts), sum(s.tuples for s in sts)
        size = sum(s.size * s.tuples for s in sts) / tuples if tuples else (sum(s.size for s in sts) / len(sts))
        timed = [s for s in sts if s.cpu_per_tuple_s is not None and s.tuples > 0]
        n_timed = sum(s.tuples for s in timed)
        cpu = sum(s.cpu_per_tuple_s * s.tuples for s in timed) / n_timed if n_timed else None
        out[p] = PortStats(rate=rate, byte_rate=rate * size, size=size, tuples=tuples, cpu_per_tuple_s=cpu,
                           samples=sum(s.samples for s in sts))
    return out
