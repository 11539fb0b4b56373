"""Plan -> per-PE program specs: every decision codegen makes, as plain data.

Templates only spell what is decided here: which operators call which directly,
which ports are exposed (paper 003 §2.3), which threads reach which operators
(and so which need locks), and each operator's specialised code fragments.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spadeopt.codegen import collapse
from spadeopt.model.graph import AppGraph, Operator, PortRef
from spadeopt.model.schema import gid
from spadeopt.plan.plan import PE, Plan
from spadeopt.runtime.fission import SEQ

NEEDS_LOCK_KINDS = frozenset({"aggregate", "join", "merge", "custom", "sink", "fission_split", "fission_merge"})


@dataclass(frozen=True)
class Link:
    """One inter-PE link: an exposed output port feeding an exposed input port."""

    link_id: str
    src_pe: str
    src: PortRef
    dst_pe: str
    dst: PortRef
    transport: str  # "ipc" (same node) or "tcp"

    def to_json(self) -> dict[str, Any]:
        return {"id": self.link_id, "src_pe": self.src_pe, "src": str(self.src),
                "dst_pe": self.dst_pe, "dst": str(self.dst), "transport": self.transport}


@dataclass
class OpSpec:
    op: Operator
    ctx: dict[str, Any]  # kind-specific, filled by lower.py
    locked: bool = False
    threads: tuple[str, ...] = ()
    emit: dict[str, list[str]] = field(default_factory=dict)  # out port -> call targets
    final: dict[str, list[str]] = field(default_factory=dict)  # out port -> final statements
    pending: dict[str, int] = field(default_factory=dict)  # in port -> streams to wait for
    instrumented: bool = False
    # instrumented builds: out port -> (internal subscriber ports, timed calls, sender or None)
    submits: dict[str, tuple[list[str], list[str], str | None]] = field(default_factory=dict)
    # codegen.collapse: the head of a static run gets the run's loop; the others its name
    run: dict[str, Any] | None = None
    in_run: str | None = None

    @property
    def g(self) -> str:
        """The operator's name as generated code spells it (``model.schema.gid``)."""
        return gid(self.op.name)

    @property
    def emit_line(self) -> dict[str, str]:
        """The statement that hands ``out`` to every subscriber of each output port.

        In instrumented builds each port's submit goes through its submit signal
        (``<op>__submit_<port>``), which samples and times it.
        """
        if self.instrumented:
            return {p: f"{self.g}__submit_{p}(out)" for p in self.emit}
        return self.plain_emit_line

    @property
    def plain_emit_line(self) -> dict[str, str]:
        return {p: "; ".join(f"{t}(out)" for t in ts) or "pass" for p, ts in self.emit.items()}

    @property
    def final_line(self) -> dict[str, str]:
        lines = {p: "; ".join(fs) for p, fs in self.final.items() if fs}
        if self.instrumented:
            for p in self.emit:
                close = f"_rec_{self.g}__{p}.close(_cd_{self.g}__{p})"
                lines[p] = f"{close}; {lines[p]}" if p in lines else close
        return lines


@dataclass
class PESpec:
    app: str
    pe: PE
    ops: list[OpSpec]
    imports: list[tuple[str, str, str, bool]]  # alias, module, qualname, from_app
    exposed_in: list[tuple[PortRef, int]]  # port, number of external links
    exposed_out: list[tuple[PortRef, bool]]  # port, locked
    sources: list[str]
    has_main: bool
    instrumented: bool = False


def links_of(plan: Plan, graph: AppGraph) -> list[Link]:
    pe_of = plan.pe_of
    node = {pe.pe_id: pe.node for pe in plan.pes}
    links = []
    for s in graph.streams:
        a, b = pe_of[s.src.op], pe_of[s.dst.op]
        if a != b:
            transport = "ipc" if node[a] == node[b] else "tcp"
            links.append(Link(f"L{len(links)}", a, s.src, b, s.dst, transport))
    return links


def fn(ref: PortRef | str, port: str | None = None) -> str:
    """Name of the generated function for an operator input port."""
    if isinstance(ref, PortRef):
        return f"{gid(ref.op)}__{ref.port}"
    return f"{gid(ref)}__{port}"


def sender(ref: PortRef) -> str:
    return f"send_{gid(ref.op)}__{ref.port}"


def thread_reach(graph: AppGraph, members: set[str], roots: Mapping[str, list[str]]) -> dict[str, set[str]]:
    """For each thread, the operators it executes by direct calls inside the PE."""
    reach: dict[str, set[str]] = {}
    for thread, starts in roots.items():
        seen: set[str] = set()
        stack = list(starts)
        while stack:
            op = stack.pop()
            if op in seen:
                continue
            seen.add(op)
            for out in graph.op(op).outputs:
                for dst in graph.subscribers(PortRef(op, out.name)):
                    if dst.op in members and graph.op(dst.op).in_port(dst.port).tuple_generating:
                        stack.append(dst.op)
                    elif dst.op in members:
                        seen.add(dst.op)
        reach[thread] = seen
    return reach


def pe_spec(graph: AppGraph, plan: Plan, pe: PE, links: list[Link], lower_op) -> PESpec:
    members = set(pe.operators)
    ops = [graph.op(n) for n in pe.operators]
    exposed_in_count: dict[PortRef, int] = {}
    for ln in links:
        if ln.dst_pe == pe.pe_id:
            exposed_in_count[ln.dst] = exposed_in_count.get(ln.dst, 0) + 1
    exposed_out_ports = sorted({ln.src for ln in links if ln.src_pe == pe.pe_id})
    sources = [op.name for op in ops if op.is_source]
    roots: dict[str, list[str]] = {f"source:{s}": [s] for s in sources}
    if exposed_in_count:
        roots["main"] = sorted({p.op for p in exposed_in_count})
    reach = thread_reach(graph, members, roots)
    threads_of: dict[str, list[str]] = {op.name: [] for op in ops}
    for thread, opset in reach.items():
        for op in opset:
            threads_of[op].append(thread)
    specs = []
    imports: dict[tuple[str, str], str] = {}
    for op in ops:
        threads = tuple(sorted(threads_of[op.name]))
        # Instrumented builds also lock stateless operators shared by threads: their
        # submit signals keep sampling state.
        lockable = plan.instrumented or op.kind in NEEDS_LOCK_KINDS
        spec = OpSpec(op, {}, locked=len(threads) > 1 and lockable, threads=threads,
                      instrumented=plan.instrumented)
        for out in op.outputs:
            ref = PortRef(op.name, out.name)
            internal = [d for d in graph.subscribers(ref) if d.op in members]
            spec.submits[out.name] = ([str(d) for d in internal], [fn(d) for d in internal],
                                      sender(ref) if ref in exposed_out_ports else None)
            targets = [fn(d) for d in graph.subscribers(ref) if d.op in members]
            finals = [f'{gid(d.op)}__final("{d.port}")' for d in graph.subscribers(ref) if d.op in members]
            if ref in exposed_out_ports:
                targets.append(sender(ref))
                finals.append(f"{sender(ref)}.final()")
            spec.emit[out.name] = targets
            spec.final[out.name] = finals
        for inp in op.inputs:
            spec.pending[inp.name] = len(graph.publishers(PortRef(op.name, inp.name)))
        spec.ctx = lower_op(graph, op, imports)
        # a dynamic parallel region's channel copy: pass fission pulses on (regions.py)
        spec.ctx["pulse"] = op.kind != "fission_merge" and any(
            p.schema is not None and SEQ in p.schema for p in op.inputs)
        specs.append(spec)
    if plan.collapse and not plan.instrumented:
        collapse.apply(graph, specs)  # profiling builds keep operator boundaries
    locked_out = []
    for ref in exposed_out_ports:
        locked_out.append((ref, len(threads_of[ref.op]) > 1))
    imp = sorted(
        ((alias, mod, qual, mod == graph.module) for (mod, qual), alias in imports.items()),
        key=lambda x: x[0],
    )
    return PESpec(graph.name, pe, specs, imp, sorted(exposed_in_count.items()), locked_out,
                  sources, bool(exposed_in_count), plan.instrumented)
