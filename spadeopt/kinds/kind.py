"""What an operator kind is: the ``Kind`` record every stage dispatches on.

A kind module (``spadeopt.kinds.functor``, ...) defines its parameters and one ``KIND``:
how the DSL declares it, how its output schemas are derived and checked, how it is
lowered to the code fragments its template spells, its selectivity, what a parallel
region needs from it (may it be replicated, does it forward an attribute, how its
channel copy carries fission's sequence number), and what codegen needs (locks,
timing windows, static runs). ``spadeopt.kinds`` collects them in ``KINDS``.

The state kind (stateless, partitioned on a key, stateful) is decided by ``declare``
from the operator's parameters and recorded on the declaration (``Decl.state``,
``Decl.key``), then on the ``Operator``.

Layering: kinds import the IR (``model.schema``, ``model.graph``, ``model.expr``) and
``protocol``, never ``plan``, ``codegen`` or the runtime; those dispatch on kinds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from spadeopt.errors import UsageError
from spadeopt.model.graph import DYNAMIC, STATEFUL, STATELESS, AppGraph, Operator, SymbolRef
from spadeopt.model.schema import Schema

Problems = list[str]
Imports = dict[tuple[str, str], str]  # (module, qualname) -> alias in the generated module
Derived = tuple[Any, dict[str, Schema]] | tuple[None, None]  # (params, output schemas) or failure


@dataclass
class Decl:
    """One operator as the DSL recorded it, before validation (a builder's working record).

    ``inputs`` maps each input port to the streams it subscribes to (handles or
    ``"op.port"`` strings); ``raw`` holds what the kind's ``derive`` reads; problems found
    while declaring are collected in ``problems`` and reported with all the others."""

    name: str
    kind: str
    inputs: dict[str, list[Any]]
    raw: dict[str, Any]
    out_ports: tuple[str, ...] = ("out",)
    out_schemas: dict[str, Schema] | None = None  # declared (sources, custom); else derived
    state: str = STATELESS
    key: tuple[str, ...] = ()
    tuple_generating: dict[str, bool] = field(default_factory=dict)  # port -> flag (default True)
    line: str = ""
    problems: list[str] = field(default_factory=list)


def stateful_problem(op: Operator, why: str = "") -> str | None:
    """The region problem of a stateful operator (``why`` says what its state is), else None."""
    if op.state != STATEFUL:
        return None
    return f"operator '{op.name}' is stateful ({why or op.kind})"


def _dynamic(op: Operator) -> str:
    return DYNAMIC


def _never(op: Operator, attr: str) -> bool:
    return False


def _same_params(op: Operator, channel: int, width: int, dynamic: bool) -> Any:
    return op.params


def _no_clock(op: Operator) -> Any:
    return None


def _checkpointable(op: Operator) -> str | None:
    return None


def _no_checkpoint_note(graph: AppGraph, op: Operator) -> str | None:
    return None


def _no_number_bits(op: Operator) -> int:
    return 0


def _no_final_rows(op: Operator) -> bool:
    return False


def _no_generator(op: Operator) -> Any:
    return None


def _no_order(op: Operator, port: str) -> str | None:
    return None


def _no_flag(op: Operator) -> bool:
    return False


def _not_by_key(op: Operator) -> dict[str, Any] | str:
    return f"a {op.kind} operator's state is not kept per key of its region"


@dataclass(frozen=True)
class Kind:
    """Everything the stages need to know about one operator kind.

    ``declare(name, **args)`` makes the ``Decl`` (None: only ``plan.fission`` makes this
    kind); ``derive(where, raw, inputs, problems)`` checks the declaration against its
    input schemas and returns ``(params, output schemas)``, or ``(None, None)`` after
    appending its problems; ``lower(graph, op, imports)`` returns the template's context.
    ``template`` is a template name under ``templates/`` (built-in kinds) or an absolute
    path to the kind's own template.

    Parallel regions: ``region_problem(op)`` says why ``op`` cannot be replicated (None:
    it can); ``forwards(op, attr)`` whether it copies input attribute ``attr`` unchanged
    to an output of that name; ``channel_params(op, c, k, dynamic)`` the parameters of its
    copy in channel ``c`` of ``k`` (``dynamic``: every schema gains ``protocol.SEQ`` as its
    last attribute, and an operator that makes new tuples must carry it); ``selectivity``
    is ``STATIC`` when it emits exactly one tuple per input tuple; ``event_time(op)`` the
    ``(attribute, tumbling window)`` of an operator whose state advances on *every*
    tuple's event time, whatever its key (an event-time window: its channel copy learns
    the width-1 input's progress from watermark frames, ``plan.eventtime``), else None;
    ``final_rows(op)`` whether its channel copy may emit rows at end of stream numbered
    from its *final base* (``plan.fission.final_base``: after every number that can
    reach it, so end-of-stream cascades through a channel keep their width-1 order);
    ``number_bits(op)`` how many bits its channel copy's numbers take beyond its inputs'
    (a join numbers its matches by order value, side and input number, a sliding
    event-time window its rows by window and group: ``kinds.numbering``).

    Codegen: ``needs_lock`` (its code keeps state, so a PE whose threads both reach it
    locks it), ``never_blocks`` (its code never blocks or leaves its thread: profiling
    timing windows may cover it), ``passes_pulses`` (a channel copy hands fission pulses
    on), ``collapsible`` (a functor-like kind: its lowering gives ``filter``, ``row``,
    ``exprs`` and ``raw`` and its template a static run's loop and a sampled follower,
    so a chain of such operators may compile into one loop, ``codegen.collapse``, and a
    static one may follow its publisher's sampling countdown, ``codegen.pe_spec``).

    Checkpoints: ``checkpoint_problem(op)`` why a checkpointing build must refuse it;
    ``checkpoint_note(graph, op)`` (``graph`` the physical graph) what a checkpointing
    build guarantees for it short of "a failure-free run's output, exactly", said by
    ``spadeopt build`` and ``run`` (``codegen.render.checkpoint_notes``).

    Rescaling (a checkpoint resumed under another width of the region, issue 39):
    ``rescale(op)`` (``op`` a channel copy, or a split or merge fission made) how the
    state objects it registers (``rt.state``, in order) move to another width, as a
    JSON-able spec ``deploy.checkpoint_rescale`` carries out: ``{"slots": [...]}``, each
    slot ``"groups"`` (a dict of group key -> group: the copies' dicts merged, then split
    by the channel that owns each key at the new width; ``"key"`` names the group key's
    attributes, ``"first"`` where a group holds its first tuple, whose number orders the
    merged groups, None when the group is a list of rows), ``"clock"`` (a list every copy
    holds alike: the most advanced copy's), ``"opened"`` (a sliding window's key -> its
    group's opening number: orders the merged groups, dealt with them; none at width 1),
    ``"sum"`` (counters: summed into channel 0),
    ``"seq_merge"`` (a sequence-number merge's queues and floors, resized; rows it held
    kept); ``{"keep": True}``: all of it is the same at any width; or a str: why its
    state cannot move (the width must stay). The aggregate's spec also says which tuples
    a group keeps at width 1 and in a copy (``kinds.aggregate.rescale``).
    """

    name: str
    declare: Callable[..., Decl] | None
    derive: Callable[[str, dict[str, Any], dict[str, Schema], Problems], Derived] | None
    lower: Callable[[AppGraph, Operator, Imports], dict[str, Any]]
    template: str
    declares_outputs: bool = False  # output schemas are declared, not derived (feedback loops)
    selectivity: Callable[[Operator], str] = _dynamic
    region_problem: Callable[[Operator], str | None] = stateful_problem
    forwards: Callable[[Operator, str], bool] = _never
    channel_params: Callable[[Operator, int, int, bool], Any] = _same_params
    event_time: Callable[[Operator], Any] = _no_clock  # (attr, Window) or None
    final_rows: Callable[[Operator], bool] = _no_final_rows
    number_bits: Callable[[Operator], int] = _no_number_bits
    needs_lock: bool = True
    never_blocks: bool = True
    passes_pulses: bool = True
    checkpoint_problem: Callable[[Operator], str | None] = _checkpointable  # why its state cannot be checkpointed
    checkpoint_note: Callable[[AppGraph, Operator], str | None] = _no_checkpoint_note  # a weaker guarantee
    collapsible: bool = False
    fission_made: bool = False  # made by plan.fission (splits, merges, exchanges), never declared by apps
    generator: Callable[[Operator], Any] = _no_generator  # what a source reads (a SymbolRef), else None
    state_declared: bool = False  # its state and key are what the app declares (custom), not derived
    order_of: Callable[[Operator, str], str | None] = _no_order  # the attribute an input port is merged by (join)
    flushes_out_of_order: Callable[[Operator], bool] = _no_flag  # end-of-stream rows go back in order (count window)
    rescale: Callable[[Operator], dict[str, Any] | str] = _not_by_key  # how its state moves to another width


def derive_declared(where: str, raw: dict[str, Any], ins: dict[str, Schema], problems: Problems) -> Derived:
    """``derive`` of a kind whose ``declare`` put its params and declared output schemas
    in ``raw["params"]`` and ``raw["outputs"]`` (missing or None: already reported)."""
    if raw.get("outputs") is None or "params" not in raw:
        return None, None
    return raw["params"], raw["outputs"]


def symbol_of(obj: Any, what: str) -> SymbolRef:
    """The import path of a module-level function or class, or a clear error."""
    if isinstance(obj, SymbolRef):
        return obj
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if not module or not qualname or "<locals>" in qualname or "<lambda>" in qualname:
        msg = (f"{what}: {obj!r} is not a module-level function or class; PEs import user code "
               f"by name, so define it at the top level of a module")
        raise UsageError(msg)
    return SymbolRef(module, qualname)


def parse_schema(spec: Any, decl: Decl, what: str) -> Schema | None:
    """``Schema.parse(spec)``, or None with the problem recorded on ``decl``."""
    try:
        return Schema.parse(spec)
    except UsageError as exc:
        decl.problems.append(f"operator '{decl.name}' {what}: {exc}")
        return None


def declare_functions(functions: Iterable[Callable], decl: Decl) -> tuple[tuple[str, SymbolRef], ...]:
    """The user functions an operator's expressions may call, by name (sorted)."""
    out = []
    for fn in functions:
        try:
            ref = symbol_of(fn, f"operator '{decl.name}' function")
            out.append((ref.qualname.rsplit(".", 1)[-1], ref))
        except UsageError as exc:
            decl.problems.append(str(exc))
    return tuple(sorted(out, key=lambda x: x[0]))
