"""Run test apps under several fusions: for real (processes + ZeroMQ), or simulated.

``run_fusions`` builds and runs an app with ``spadeopt.orchestrate.build_local.build_and_run`` under every
fusion in ``FUSIONS`` with a small source batch size (so batch boundaries fall inside
windows) and returns the sink rows per fusion. ``same_under_fusions`` also checks
that every fusion gives the same rows, in the same order.

``simulate`` runs the same generated PE modules inside this process with a fake
runtime: sources run to completion, batches sent between PEs queue up on their links,
and a seeded scheduler delivers them in a random interleaving (FIFO per link, as
ZeroMQ does). It is fast enough for hypothesis, and explores arrival orders a real
run on an idle machine rarely produces.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import random
import sys
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import islice
from pathlib import Path
from typing import Any

from spadeopt.codegen.render import render_build
from spadeopt.deploy.local import read_sinks
from spadeopt.frontend.dsl import App
from spadeopt.model.graph import AppGraph
from spadeopt.optimize.strategies import plan_for
from spadeopt.orchestrate.build_local import build_and_run
from spadeopt.plan.fission import physical_graph
from spadeopt.plan.plan import Plan, make_plan
from spadeopt.plan.regions import resolve_regions
from spadeopt.runtime import metrics as run_metrics
from spadeopt.runtime.merges import read_splits
from spadeopt.runtime.metrics import Metrics
from spadeopt.runtime.ordered import Ordered
from spadeopt.runtime.pe_ports import Pending
from spadeopt.runtime.pe_sources import check_shape
from spadeopt.runtime.sinks import Sink, commit

FUSIONS = ("none", "all", "mixed", "all-nocollapse")
BATCH = 7

Rows = dict[str, list[dict[str, Any]]]


def plan(graph: AppGraph, fusion: str, widths: Mapping[str, int] | None = None) -> Plan:
    """``none``/``all``/``manual`` as in the CLI; ``mixed``: operators (of the physical
    graph, with parallel regions at ``widths``) fused in consecutive pairs (declaration
    order), so some links are direct calls and some cross PEs; ``all-nocollapse``:
    ``all`` without collapsing static runs (codegen.collapse), so every semantics test
    also compares collapsed and uncollapsed builds."""
    if fusion == "all-nocollapse":
        return dataclasses.replace(plan_for(graph, "all", widths=dict(widths or {})), collapse=False)
    if fusion != "mixed":
        return plan_for(graph, fusion, widths=dict(widths or {}))
    regions = resolve_regions(graph, dict(widths or {}))
    physical = physical_graph(graph, regions)
    names = [op.name for op in physical.operators]
    side: dict[str, dict[int, int]] = {}  # a key exchange's two sides never share a PE (check_plan)
    for i, pair in enumerate(physical.annotations.apart):
        for s, ops in enumerate(pair):
            for o in ops:
                side.setdefault(o, {})[i] = s
    groups = []
    for i in range(0, len(names), 2):
        pair = names[i:i + 2]
        x, y = side.get(pair[0], {}), side.get(pair[-1], {})
        apart = any(x[k] != y[k] for k in x.keys() & y.keys())
        groups.extend([[o] for o in pair] if apart else [pair])
    return make_plan(graph, "mixed", groups, [0] * len(groups), 1, 2, regions=regions)


def as_graph(app: App | AppGraph) -> AppGraph:
    return app.build() if isinstance(app, App) else app


def run_fusions(app: App | AppGraph, tmp_path: Path, fusions: Sequence[str] = FUSIONS,
                batch_size: int = BATCH) -> dict[str, Rows]:
    graph = as_graph(app)
    return {f: build_and_run(graph, plan(graph, f), workdir=tmp_path / f,
                             settings={"batch_size": batch_size}).sinks
            for f in fusions}


def same_under_fusions(app: App | AppGraph, tmp_path: Path, fusions: Sequence[str] = FUSIONS,
                       batch_size: int = BATCH, unordered: Sequence[str] = ()) -> Rows:
    """Run under every fusion; assert identical sinks (as multisets for ``unordered``)."""
    runs = run_fusions(app, tmp_path, fusions, batch_size)
    first = runs[fusions[0]]
    for f in fusions[1:]:
        assert set(runs[f]) == set(first), f"fusion {f}: sinks differ"
        for name in first:
            if name in unordered:
                assert multiset(runs[f][name]) == multiset(first[name]), f"fusion {f}, sink {name}"
            else:
                assert runs[f][name] == first[name], f"fusion {f}, sink {name}"
    return first


def multiset(rows: list[dict[str, Any]]) -> Counter:
    return Counter(json.dumps(r, sort_keys=True) for r in rows)


# ---- in-process simulation ----------------------------------------------------------


class _Link:
    def __init__(self) -> None:
        self.queues: list[list] = []  # one FIFO per subscribed remote input port

    def __call__(self, batch) -> None:
        for q in self.queues:
            q.append(list(batch))  # the real sender serialises at once

    def final(self) -> None:
        for q in self.queues:
            q.append(None)


class _FakeRT:
    """The part of ``PERuntime`` generated code talks to."""

    def __init__(self, out_dir: Path, chunks: list[int]) -> None:
        self.out_dir = out_dir
        self.chunks = chunks
        self.senders: dict[str, _Link] = {}
        self.inputs: dict[str, tuple] = {}
        self.sources: dict[str, Any] = {}
        self.sinks: dict[str, Sink] = {}
        self.metrics = Metrics()

    def sender(self, ref: str, locked: bool = False) -> _Link:
        return self.senders.setdefault(ref, _Link())

    def pending(self, op: str, counts: dict[str, int]) -> Pending:
        return Pending(op, counts)

    def lock(self) -> threading.RLock:
        return threading.RLock()

    def stopping(self) -> bool:
        return False  # its runs are never stopped mid-stream (a static merge's check, runtime.merges)

    def ordered(self, n: int, key_index: list[int]) -> Ordered:
        return Ordered(n, key_index)

    def sink(self, name: str, mode: str, names: list[str], types: list[str], report_as: str | None = None) -> Sink:
        s = self.sinks[name] = Sink(report_as or name, mode, names, types, str(self.out_dir), part=name)
        return s

    def input(self, ref: str, fn, final, links: int) -> None:
        self.inputs[ref] = (fn, final)

    def source(self, name: str, fn) -> None:
        self.sources[name] = fn

    def read_splits(self, name: str, splits, part: int, parts: int, size: int, stamp: bool):
        return read_splits(name, splits, part, parts, size, stamp)

    def source_batches(self, name: str, iterable, arity: int | None = None):
        it = iter(iterable)
        i = 0
        while True:
            batch = list(islice(it, self.chunks[i % len(self.chunks)]))
            i += 1
            if not batch:
                return
            if arity is not None:
                check_shape(f"source '{name}'", batch, arity)
            yield batch


def simulate(app: App | AppGraph, fusion: str, out_dir: Path, *, seed: int = 0,
             chunks: Sequence[int] = (BATCH,), widths: Mapping[str, int] | None = None,
             given: Plan | None = None, counters: dict | None = None, tallies: dict | None = None) -> Rows:
    """Run ``app`` under ``fusion`` in this process; ``chunks`` are the source batch
    sizes (cycled); ``seed`` picks the interleaving of deliveries between PEs;
    ``widths`` are the parallel regions' widths; ``given``: run this plan instead;
    ``counters``: filled with the run's operator counters and ``"warnings"``, as the
    driver merges them (``runtime.metrics.merge``); ``tallies``: filled with each
    operator's live-metrics output counts (``{operator: {port: tuples}}``, channel copies
    by their own names)."""
    graph = as_graph(app)
    p = given if given is not None else plan(graph, fusion, widths)
    files = render_build(graph, p, "")
    deploy = json.loads(files["deploy.json"])
    out_dir.mkdir(parents=True, exist_ok=True)
    rts: dict[str, _FakeRT] = {}
    for pe in deploy["pes"]:
        path = out_dir / f"_sim_{pe['pe']}.py"
        path.write_text(files[pe["module"]])
        spec = importlib.util.spec_from_file_location(f"_spadeopt_sim_{pe['pe']}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        rt = rts[pe["pe"]] = _FakeRT(out_dir, list(chunks))
        module.build(rt)
    # wire: every link gets its own FIFO, delivered to the destination port's functions
    queues: list[tuple[list, Any, Any, str]] = []
    for ln in deploy["links"]:
        q: list = []
        rts[ln["src_pe"]].senders[ln["src"]].queues.append(q)
        fn, final = rts[ln["dst_pe"]].inputs[ln["dst"]]
        queues.append((q, fn, final, ln["dst"].split(".", 1)[1]))
    rng = random.Random(seed)
    for pe in sorted(rts):
        for _, run in sorted(rts[pe].sources.items()):
            for _ in run():  # one batch per step
                pass
            _deliver(queues, rng, stop_early=True)
    _deliver(queues, rng, stop_early=False)
    for rt in rts.values():
        for s in rt.sinks.values():
            s.close()
    commit(out_dir)  # as the driver does once every node succeeded
    if counters is not None:
        ops, warnings = run_metrics.merge(rt.metrics.report() for rt in rts.values())
        counters.update(ops, warnings=warnings)
    if tallies is not None:
        for rt in rts.values():
            tallies.update(rt.metrics.tallies())
    for m in [k for k in sys.modules if k.startswith("_spadeopt_sim_")]:
        del sys.modules[m]
    return read_sinks(out_dir)


def _deliver(queues, rng: random.Random, stop_early: bool) -> None:
    """Deliver queued batches in a random order; ``stop_early`` may leave some queued
    (so a later source's tuples can overtake them)."""
    while True:
        ready = [x for x in queues if x[0]]
        if not ready:
            return
        if stop_early and rng.random() < 0.2:
            return
        q, fn, final, port = rng.choice(ready)
        batch = q.pop(0)
        if batch is None:
            final(port)
        else:
            fn(batch)


def check_unchanged(app: App | AppGraph, tmp_path: Path, **kw: Any) -> Rows:
    """Simulate under every fusion and assert identical results; return them."""
    graph = as_graph(app)
    runs = {f: simulate(graph, f, tmp_path / f"sim-{f}", **kw) for f in FUSIONS}
    for f in FUSIONS[1:]:
        assert runs[f] == runs[FUSIONS[0]], f"simulated fusion {f} differs from {FUSIONS[0]}"
    return runs[FUSIONS[0]]


def by_keys(rows: list[Mapping[str, Any]], *keys: str) -> list[Mapping[str, Any]]:
    return sorted(rows, key=lambda r: tuple(r[k] for k in keys))


def assert_every_width_matches(app, tmp_path_factory, seed: int, chunks, widths=(2, 3, 4),
                               fusions=("none", "all", "mixed")) -> list[dict]:
    """``app``'s region ``reg`` simulated at each width under each fusion gives the sinks
    of width 1 (which must be non-empty); returns the width-1 sink rows."""
    base = simulate(app, "all", tmp_path_factory.mktemp("w1"), widths={"reg": 1}, chunks=chunks)
    assert base["sink"], "the test needs output to compare"
    for width in widths:
        for fusion in fusions:
            got = simulate(app, fusion, tmp_path_factory.mktemp(f"w{width}"), seed=seed + width,
                           widths={"reg": width}, chunks=chunks)
            assert got == base, (width, fusion)
    return base["sink"]
