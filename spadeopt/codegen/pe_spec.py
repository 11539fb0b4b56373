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
from spadeopt.kinds import kind_of
from spadeopt.model.graph import AppGraph, Operator, PortRef
from spadeopt.model.schema import gid
from spadeopt.plan.fission import final_base
from spadeopt.plan.plan import PE, Plan
from spadeopt.protocol import SEQ


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
    template: str = ""  # the kind's template (``Kind.template``)
    locked: bool = False
    threads: tuple[str, ...] = ()
    emit: dict[str, list[str]] = field(default_factory=dict)  # out port -> call targets
    final: dict[str, list[str]] = field(default_factory=dict)  # out port -> final statements
    pending: dict[str, int] = field(default_factory=dict)  # in port -> streams to wait for
    instrumented: bool = False
    checkpoints: bool = False  # register its state objects (rt.state) for checkpoints
    # instrumented builds: out port -> (internal subscriber ports, timed calls, sender or None)
    submits: dict[str, tuple[list[str], list[str], str | None]] = field(default_factory=dict)
    # codegen.collapse: the head of a static run gets the run's loop; the others its name
    run: dict[str, Any] | None = None
    in_run: str | None = None
    run_tail: bool = False  # the last operator of a static run: the run's loop emits through it
    # instrumented builds: the timing window (a build() local) its sampled submits share
    # with the other operators of its thread, or None: thread CPU timers of their own
    window: str | None = None
    # instrumented builds: the port whose countdown this functor's output follows, or
    # None (``assign_followers``); and this operator's ports that lead a group of followers
    leader: PortRef | None = None
    leads: set[str] = field(default_factory=set)
    # sample groups: a follower's first slot in its leader's times list (its submit, then
    # each call's when it has several) and where its tuples' sizes come from (-1: the
    # leader's sampled tuple; i >= 0: output slot i, its own or the follower's it
    # forwards); its output slot, if it makes new tuples; a leader port's list lengths
    slot: int = 0
    size_src: int = -1
    tail: bool = False  # its one call ends where its leader's does: one clock read (see below)
    out_slot: int | None = None
    group_len: dict[str, tuple[int, int]] = field(default_factory=dict)  # port -> (times, outputs)

    @property
    def g(self) -> str:
        """The operator's name as generated code spells it (``model.schema.gid``)."""
        return gid(self.op.name)

    @property
    def follow(self) -> str | None:
        """The leader port as generated names spell it (``<op>__<port>``), or None."""
        return None if self.leader is None else f"{gid(self.leader.op)}__{self.leader.port}"

    @property
    def follows(self) -> str:
        """The leader port as users spell it (``op.port``), or ``""``."""
        return "" if self.leader is None else str(self.leader)

    @property
    def emit_line(self) -> dict[str, str]:
        """The statement that hands ``out`` to every subscriber of each output port.

        In instrumented builds each port counts down its sampling countdown (a one-item
        list, ``_cd_<op>__<port>``) inline, and only a batch in which a sample is due
        goes through the port's submit signal (``<op>__submit_<port>``), which times and
        records it: a batch with no sample costs one subtraction and one comparison, not
        a function call (issue 14, round 3).
        """
        if self.instrumented and not self.follow:  # a follower counts nothing
            return {p: self._counted_emit(p) for p in self.emit}
        return self.plain_emit_line

    def _counted_emit(self, port: str) -> str:
        cd = f"_cd_{self.g}__{port}"
        calls = [f"{t}(out)" for t in self.emit[port]]
        plain = calls[0] if len(calls) == 1 else f"({', '.join(calls)},)" if calls else "None"
        return (f"{cd}[0] = _cd = {cd}[0] - len(out); "
                f"{plain} if _cd > 0 else {self.g}__submit_{port}(out, _cd)")

    @property
    def tallied(self) -> list[str]:
        """The output ports whose tuples this operator counts for live metrics
        (``runtime.metrics.Metrics.tally``, a one-item list ``_n_<op>__<port>``, one
        addition per batch): every port of an operator the app declared, not of fission
        plumbing (splits, merges, exchanges) and not in instrumented builds (profiles
        time the operators as before). A static run is one loop (``codegen.collapse``):
        only its last operator, through which the loop emits, counts."""
        if self.instrumented or kind_of(self.op).fission_made:
            return []
        if self.run is not None or (self.in_run is not None and not self.run_tail):
            return []
        return list(self.emit)

    @property
    def key_samples(self) -> list[tuple[str, list[int], list[str], int]]:
        """Instrumented builds: the input ports of a keyed operator whose tuples carry its
        key, as ``(port, key attribute positions, their types, the tuples' length)``: the
        length tells a channel copy's fission pulses (1-tuples) apart; each port's batches have
        their key hashes sampled (``profiling.keys``), so FATM sees how skewed the keys
        a region would split are."""
        if not self.instrumented or not self.op.key or kind_of(self.op).fission_made:
            return []
        out = []
        for p in self.op.inputs:
            schema = p.schema
            if schema is not None and all(a in schema for a in self.op.key):
                out.append((p.name, [schema.index(a) for a in self.op.key], [schema.type_of(a) for a in self.op.key],
                            len(schema.names)))
        return out

    def _tally(self, port: str) -> str:
        """The statement counting ``out``'s tuples on ``port``. Inside a parallel region a
        batch may end with a fission pulse (a 1-tuple: ``_macros.pulse_out``, a numbering
        source's), which is not counted: the same test the receiving ``pulse_in`` makes."""
        box = f"_n_{self.g}__{port}[0]"
        if self.ctx.get("pulse") or self.ctx.get("seq"):  # a numbering source ends its batches with one
            return f"{box} += len(out) - (len(out[-1]) == 1 if out else 0)"
        return f"{box} += len(out)"

    @property
    def plain_emit_line(self) -> dict[str, str]:
        tallied = set(self.tallied)
        return {p: "; ".join(([self._tally(p)] if p in tallied else []) + [f"{t}(out)" for t in ts]) or "pass"
                for p, ts in self.emit.items()}

    @property
    def final_line(self) -> dict[str, str]:
        lines = {p: "; ".join(fs) for p, fs in self.final.items() if fs}
        if self.instrumented:
            for p in self.emit:
                close = (f"_rec_{self.g}__{p}.close_as(_rec_{self.follow})" if self.follow
                         else f"_rec_{self.g}__{p}.close(_cd_{self.g}__{p}[0])")
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
    windows: list[str] = field(default_factory=list)  # timing windows to create, one per thread


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


def assign_windows(specs: list[OpSpec]) -> list[str]:
    """Give each operator that may time by wall clock its thread's timing window.

    Profiling builds (issue 14, round 3; ``spadeopt.profiling.CpuWindow``): a window
    scales the wall-clock times taken inside it by its own CPU/wall ratio, which is
    unbiased only if nothing inside it blocks. So an operator gets a window only if it
    is reached by exactly one thread (no lock: a lock wait blocks, and a window belongs
    to one thread), its kind's code cannot block (``Kind.never_blocks``: not a custom
    operator's opaque code, not fission's queues), none of its ports sends to another PE
    (a full send queue blocks), and the same holds, recursively, for every in-PE
    subscriber its submits call. Operators in a cycle inside the PE get none. Returns
    the window variables to create, one per thread that has any, in thread order.
    """
    by_name = {s.op.name: s for s in specs}
    safe: dict[str, bool] = {}

    def ok(name: str) -> bool:
        if name not in safe:
            safe[name] = False  # provisional: a cycle back to this operator is not safe
            s = by_name[name]
            safe[name] = (
                not s.locked
                and len(s.threads) == 1
                and kind_of(s.op).never_blocks
                and all(
                    send is None and all(ok(sub.split(".", 1)[0]) for sub in subs)
                    for subs, _, send in s.submits.values()
                )
            )
        return safe[name]

    timed = [s for s in specs if s.submits and ok(s.op.name)]
    var = {t: f"_win_{i}" for i, t in enumerate(sorted({s.threads[0] for s in timed}))}
    for s in timed:
        s.window = var[s.threads[0]]
    return list(var.values())


def assign_followers(graph: AppGraph, specs: list[OpSpec]) -> None:
    """Give each functor whose output counts exactly what its input's publisher counts no
    countdown of its own: it follows that port's (``spadeopt.profiling.groups``,
    sample groups; issue 14, round 8).

    A functor *follows* when it has no filter and no fission pulse (so it emits one tuple
    per input tuple, in the same call), one input port fed by one stream from an operator
    of this PE, and the same timing window as that operator (so both run in one thread
    and nothing between them blocks). Its output then counts what the publishing port
    counts, batch by batch, and a countdown of its own would sample the same tuples. The
    group's leader is the first port up the chain that does not follow; its submit
    signal calls the followers' sampled variants (``<op>__in_s``) and records them. Only
    the countdown and the bookkeeping are shared: every follower keeps its own point,
    sizes and times.
    """
    by_name = {s.op.name: s for s in specs}
    publisher: dict[str, PortRef] = {}  # follower -> the port it follows
    for s in specs:
        if (not kind_of(s.op).collapsible or s.window is None or len(s.emit) != 1
                or s.ctx.get("filter") or s.ctx.get("pulse") or len(s.op.inputs) != 1):
            continue
        pubs = graph.publishers(PortRef(s.op.name, s.op.inputs[0].name))
        if len(pubs) == 1 and pubs[0].op in by_name and by_name[pubs[0].op].window == s.window:
            publisher[s.op.name] = pubs[0]
    for name, pub in publisher.items():
        lead = pub
        while lead.op in publisher:  # a chain of followers has no cycle: windows exclude them
            lead = publisher[lead.op]
        by_name[name].leader = lead
        by_name[lead.op].leads.add(lead.port)
    # Slots, in PE order: each follower's wall times (its submit, then each call's when it
    # has several) and, if it makes new tuples, its output batch; a forwarder's tuples are
    # those of its publisher (sized once, where they were made).
    def calls(s: OpSpec, port: str | None = None) -> int:
        """Timed calls of ``port`` (a follower's: its one output port)."""
        return len(s.submits[next(iter(s.emit)) if port is None else port][1])

    sized: dict[str, int] = {}

    def size_src(name: str) -> int:
        if name not in sized:
            f = by_name[name]
            pub = publisher[name]
            sized[name] = f.out_slot if f.out_slot is not None else (
                size_src(pub.op) if pub.op in publisher else -1)
        return sized[name]

    for s in specs:
        if s.op.name in publisher:
            lead = by_name[s.leader.op]
            times, outs = lead.group_len.get(s.leader.port, (0, 0))
            n = calls(s)
            s.slot = times
            if s.ctx.get("row"):
                s.out_slot = outs
                outs += 1
            lead.group_len[s.leader.port] = (times + (1 if n == 1 else 1 + n), outs)
    # A follower whose one call ends its submit, reached from the leader through ports of
    # one call each (its own included), is a tail call of the leader's one call: nothing
    # runs between its call's end and the leader's but returns, so it reads the wall
    # clock only where its submit starts and its time ends at the leader's end.
    tails: dict[str, bool] = {}

    def tail(name: str) -> bool:
        if name not in tails:
            pub = publisher[name]
            tails[name] = calls(by_name[name]) == 1 and calls(by_name[pub.op], pub.port) == 1 and (
                pub.op not in publisher or tail(pub.op))
        return tails[name]

    for s in specs:
        if s.op.name in publisher:
            s.size_src = size_src(s.op.name)
            s.tail = tail(s.op.name)
    for s in specs:
        for port, (subs, calls, send) in s.submits.items():
            s.submits[port] = (subs, [f"{c}_s" if sub.split(".", 1)[0] in publisher else c
                                      for sub, c in zip(subs, calls, strict=True)], send)


def pe_spec(graph: AppGraph, plan: Plan, pe: PE, links: list[Link], lower_op, *,
            sample_groups: bool = True) -> PESpec:
    """Everything codegen decides for ``pe``. ``sample_groups=False`` gives every port of
    a profiling build its own countdown (no followers): for tests comparing the two."""
    members = set(pe.operators)
    ops = [graph.op(n) for n in pe.operators]
    exposed_in_count: dict[PortRef, int] = {}
    for ln in links:
        if ln.dst_pe == pe.pe_id:
            exposed_in_count[ln.dst] = exposed_in_count.get(ln.dst, 0) + 1
    exposed_out_ports = sorted({ln.src for ln in links if ln.src_pe == pe.pe_id})
    sources = [op.name for op in ops if op.is_source]
    # one thread drives every source of the PE (runtime.pe.PERuntime.drive_sources)
    roots: dict[str, list[str]] = {"sources": sources} if sources else {}
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
        kind = kind_of(op)
        lockable = plan.instrumented or kind.needs_lock
        spec = OpSpec(op, {}, kind.template, locked=len(threads) > 1 and lockable, threads=threads,
                      instrumented=plan.instrumented, checkpoints=plan.checkpoints)
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
        spec.ctx["pulse"] = kind.passes_pulses and any(
            p.schema is not None and SEQ in p.schema for p in op.inputs)
        if spec.ctx["pulse"] and (kind.final_rows(op) or kind.number_bits(op)):  # numbers reaching it are below
            spec.ctx["final_base"] = final_base(graph, op)
        specs.append(spec)
    if plan.collapse and not plan.instrumented:
        collapse.apply(graph, specs)  # profiling builds keep operator boundaries
    windows = assign_windows(specs) if plan.instrumented else []
    if windows and sample_groups:
        assign_followers(graph, specs)
    locked_out = []
    for ref in exposed_out_ports:
        locked_out.append((ref, len(threads_of[ref.op]) > 1))
    imp = sorted(
        ((alias, mod, qual, mod == graph.module) for (mod, qual), alias in imports.items()),
        key=lambda x: x[0],
    )
    return PESpec(graph.name, pe, specs, imp, sorted(exposed_in_count.items()), locked_out,
                  sources, bool(exposed_in_count), plan.instrumented, windows)
