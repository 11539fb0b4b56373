"""The fusion optimizer's input: operators, their profile, the cost model and annotations.

This module holds data only. A :class:`FusionProblem` is everything GreedyFuse, the exact
optimizer and ``explain`` need to know about one application (digest 003 §5.1):

* ``operators``: the operator names ``O``;
* ``load``: the CPU fraction ``u`` of each operator (Equation 1, in cores, so ``u`` may
  exceed 1 on a multi-core node);
* ``links``: one :class:`Link` per stream connection (output port -> input port), with
  its tuple rate and mean tuple size. Two operators may be joined by several links
  (several streams, or fan-out of one port to several ports of the same operator);
* ``comm``: the communication-cost mapping ``v(rate, size) -> CPU fraction`` (§4.4);
* ``max_frac`` / ``min_util``: the paper's MaxFrac (default 0.5) and MinUtil (0.95);
* ``colocate`` / ``exlocate`` / ``unfusable``: legality annotations (see
  :mod:`spadeopt.optimize.legality`);
* ``acyclic``: the plan takes aligned checkpoints, so its PE graph must have no cycle
  (the ``acyclic`` rule of :mod:`spadeopt.optimize.legality`; off by default).

Decisions (digest §5.2 [IMPL] items):

* A link whose ``src`` or ``dst`` is ``None`` is an imported or exported stream. It
  crosses the boundary of whichever PE holds its operator under every partitioning, so it
  counts in ``Rate`` but can never be saved by a merge.
* A self link (``src == dst``) is rejected: an operator's loop back into itself is never
  an inter-PE stream.
* Every problem is validated when it is built. All problems found are reported in one
  :class:`~spadeopt.errors.UsageError`, each naming the bad item.

The problem is immutable; the ``load`` mapping is not copied, so callers must not mutate
it afterwards. Derived indexes are cached properties.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol, runtime_checkable

from spadeopt.errors import UsageError

DEFAULT_MAX_FRAC = 0.5
DEFAULT_MIN_UTIL = 0.95


@runtime_checkable
class CommModel(Protocol):
    """The mapping ``v`` of digest §4.4: CPU fraction spent sending and receiving.

    ``cost(rate, size)`` takes the tuple rate (tuples/s) crossing a PE boundary and the
    rate-weighted mean tuple size (bytes), and returns a CPU fraction >= 0. It must
    be deterministic (a pure function of its arguments).
    """

    def cost(self, rate: float, size: float) -> float:
        """CPU fraction for ``rate`` tuples/s of ``size`` bytes each."""
        ...


@dataclass(frozen=True)
class LinearCommModel:
    """A linear ``v``: ``rate * (per_tuple_s + size * per_byte_s)``.

    ``per_tuple_s`` is the CPU seconds a PE spends per tuple sent or received,
    ``per_byte_s`` the extra CPU seconds per byte. Meant for tests and benchmarks; the
    real ``v`` is a calibrated table.

    >>> round(LinearCommModel(per_tuple_s=1e-5, per_byte_s=1e-8).cost(1000.0, 100.0), 9)
    0.011
    """

    per_tuple_s: float
    per_byte_s: float = 0.0

    def __post_init__(self) -> None:
        for name in ("per_tuple_s", "per_byte_s"):
            value = getattr(self, name)
            if not _finite_nonneg(value):
                msg = f"LinearCommModel.{name} must be a finite number >= 0; got {value!r}"
                raise UsageError(msg)

    def cost(self, rate: float, size: float) -> float:
        """CPU fraction for ``rate`` tuples/s of ``size`` bytes each."""
        return rate * (self.per_tuple_s + size * self.per_byte_s)


@dataclass(frozen=True)
class Link:
    """One stream connection between two operators.

    ``rate`` is in tuples/s and ``size`` in bytes/tuple (the mean over the stream).
    ``src`` or ``dst`` may be ``None`` for a stream imported from or exported to outside
    the application; it then always counts as crossing its operator's PE boundary.
    """

    src: str | None
    dst: str | None
    rate: float
    size: float

    @property
    def byte_rate(self) -> float:
        """Bytes per second carried by the link."""
        return self.rate * self.size


def with_rates(links: Iterable[Link], rates: Iterable[float]) -> tuple[Link, ...]:
    """``Link(lk.src, lk.dst, rate, lk.size)`` for each link and rate, paired in order:
    equal links, made without the frozen dataclass's ``__init__`` (four guarded
    ``__setattr__`` calls each; FATM's rate search rescales thousands of links per rate)."""
    new = object.__new__
    out = []
    append = out.append
    for lk, rate in zip(links, rates, strict=False):  # as many as the shorter gives
        link = new(Link)
        fields = link.__dict__
        fields.update(lk.__dict__)
        fields["rate"] = rate
        append(link)
    return tuple(out)


def with_ends(links: Sequence[Link], ends: Iterable[tuple[int, str | None, str | None]]) -> tuple[Link, ...]:
    """``Link(src, dst, links[i].rate, links[i].size)`` for each ``(i, src, dst)`` of
    ``ends``, made as :func:`with_rates` makes them (a channel quotient's links)."""
    new = object.__new__
    out = []
    append = out.append
    for i, src, dst in ends:
        link = new(Link)
        fields = link.__dict__
        fields.update(links[i].__dict__)
        fields["src"] = src
        fields["dst"] = dst
        append(link)
    return tuple(out)


@dataclass(frozen=True)
class FusionProblem:
    """The fusion optimizer's input. Validated on construction (raises ``UsageError``).

    Contract: ``operators`` are unique non-empty names; ``load`` has exactly one finite
    value >= 0 per operator; every link names known operators (or ``None`` for an
    external end), is not a self link and has finite rate and size >= 0; ``max_frac > 0``;
    ``0 < min_util <= 1``; annotation groups name known operators; ``exlocate`` and
    ``unfusable`` groups have at least two members and mean "pairwise in different PEs";
    each item of ``channels`` is one parallel region's channels (at least two disjoint,
    non-empty operator sets; an operator in at most one region) and means "no PE holds
    operators of two channels of one region" (paper 000's first rule); each item of
    ``apart`` is two disjoint, non-empty operator sets and means "no PE holds operators of
    both" (the two sides of a key exchange, ``Annotations.apart``); ``acyclic`` means "no
    cycle of PEs" (a build that takes aligned checkpoints: record 074).

    Use :meth:`build` to construct one from lists, dicts or plain tuples.
    """

    operators: tuple[str, ...]
    load: Mapping[str, float] = field(hash=False)
    links: tuple[Link, ...]
    comm: CommModel
    max_frac: float = DEFAULT_MAX_FRAC
    min_util: float = DEFAULT_MIN_UTIL
    colocate: tuple[frozenset[str], ...] = ()
    exlocate: tuple[frozenset[str], ...] = ()
    unfusable: tuple[frozenset[str], ...] = ()
    channels: tuple[tuple[frozenset[str], ...], ...] = ()
    apart: tuple[tuple[frozenset[str], frozenset[str]], ...] = ()
    acyclic: bool = False

    def __post_init__(self) -> None:
        problems = _validate(self)
        if problems:
            lines = "\n".join(f"  - {p}" for p in problems)
            n = len(problems)
            msg = f"invalid fusion problem ({n} problem{'s' if n != 1 else ''}):\n{lines}"
            raise UsageError(msg)

    @classmethod
    def build(
        cls,
        operators: Iterable[str],
        load: Mapping[str, float],
        links: Iterable[Link | tuple[str | None, str | None, float, float]],
        comm: CommModel,
        *,
        max_frac: float = DEFAULT_MAX_FRAC,
        min_util: float = DEFAULT_MIN_UTIL,
        colocate: Iterable[Iterable[str]] = (),
        exlocate: Iterable[Iterable[str]] = (),
        unfusable: Iterable[Iterable[str]] = (),
        channels: Iterable[Iterable[Iterable[str]]] = (),
        apart: Iterable[tuple[Iterable[str], Iterable[str]]] = (),
        acyclic: bool = False,
    ) -> FusionProblem:
        """Build a problem from any iterables; links may be ``(src, dst, rate, size)``."""
        return cls(
            operators=tuple(operators),
            load=dict(load),
            links=tuple(lk if isinstance(lk, Link) else Link(*lk) for lk in links),
            comm=comm,
            max_frac=max_frac,
            min_util=min_util,
            colocate=tuple(frozenset(g) for g in colocate),
            exlocate=tuple(frozenset(g) for g in exlocate),
            unfusable=tuple(frozenset(g) for g in unfusable),
            channels=tuple(tuple(frozenset(c) for c in region) for region in channels),
            apart=tuple((frozenset(a), frozenset(b)) for a, b in apart),
            acyclic=acyclic,
        )

    def rescaled(self, load: Mapping[str, float], links: tuple[Link, ...], max_frac: float | None = None,
                 min_util: float | None = None) -> FusionProblem:
        """This problem with other numbers: ``load`` for the same operators and ``links``
        with the same ends and sizes, in the same order (e.g. the problem at another
        source rate), and ``max_frac`` and ``min_util`` when given. Only what can differ is
        validated: every load and link rate must be a finite number >= 0, MaxFrac a float
        > 0 and MinUtil one in (0, 1]; if one is not, the problem is built (and refused) in
        full, with the message :meth:`build` gives. Equal, field for field, to building it
        anew; used by FATM's rate search, which rescales one problem many times."""
        inf = math.inf
        max_frac = self.max_frac if max_frac is None else max_frac
        min_util = self.min_util if min_util is None else min_util
        values = (*load.values(), *(lk.rate for lk in links))
        if not (all(type(v) is float and 0.0 <= v < inf for v in values) and type(max_frac) is float
                and 0.0 < max_frac < inf and type(min_util) is float and 0.0 < min_util <= 1.0):
            return FusionProblem(self.operators, load, links, self.comm, max_frac, min_util,
                                 self.colocate, self.exlocate, self.unfusable, self.channels, self.apart,
                                 self.acyclic)
        new = object.__new__(FusionProblem)
        for name, value in (("operators", self.operators), ("load", load), ("links", links), ("comm", self.comm),
                            ("max_frac", max_frac), ("min_util", min_util), ("colocate", self.colocate),
                            ("exlocate", self.exlocate), ("unfusable", self.unfusable),
                            ("channels", self.channels), ("apart", self.apart), ("acyclic", self.acyclic)):
            object.__setattr__(new, name, value)
        new.__dict__["shared"] = self.shared
        return new

    @cached_property
    def shared(self) -> dict[str, Any]:
        """A memo for what depends only on the problem's structure (operators and
        annotations), e.g. GreedyFuse's initial partitions; the problems :meth:`rescaled`
        derives from this one share it."""
        return {}

    @cached_property
    def channel_of(self) -> Mapping[str, tuple[int, int]]:
        """Operator -> (index of its region in ``channels``, its channel), for channel members."""
        return {op: (r, c) for r, region in enumerate(self.channels) for c, chan in enumerate(region) for op in chan}

    @cached_property
    def sides_of(self) -> Mapping[str, tuple[tuple[int, int], ...]]:
        """Operator -> every ``(key, value)`` fusion must keep single-valued per PE: its
        channel ``(r, c)`` (``channel_of``) and, for each ``apart`` item ``i`` it is in,
        ``(len(channels) + i, side)``. A PE is legal iff no key takes two values in it
        (``legality.channels_of``)."""
        acc: dict[str, list[tuple[int, int]]] = {op: [rc] for op, rc in self.channel_of.items()}
        base = len(self.channels)
        for i, pair in enumerate(self.apart):
            for side, ops in enumerate(pair):
                for op in ops:
                    acc.setdefault(op, []).append((base + i, side))
        return {op: tuple(v) for op, v in acc.items()}

    @cached_property
    def operator_set(self) -> frozenset[str]:
        """The operators as a set."""
        return frozenset(self.operators)

    @cached_property
    def incident(self) -> Mapping[str, tuple[Link, ...]]:
        """For each operator, the links with that operator at one end (each link once)."""
        acc: dict[str, list[Link]] = {op: [] for op in self.operators}
        for link in self.links:
            if link.src is not None:
                acc[link.src].append(link)
            if link.dst is not None:
                acc[link.dst].append(link)
        return {op: tuple(ls) for op, ls in acc.items()}


def fmt_names(names: Iterable[str], limit: int = 6) -> str:
    """Render a set of operator names as ``{a,b,c}``, sorted, eliding after ``limit``."""
    ordered = sorted(names)
    if len(ordered) > limit:
        shown = ",".join(ordered[:limit])
        return f"{{{shown},...(+{len(ordered) - limit})}}"
    return "{" + ",".join(ordered) + "}"


def fmt_vs(value: float, reference: float) -> tuple[str, str]:
    """Format two numbers with 2 decimals, or more until they read differently (max 6).

    >>> fmt_vs(0.5004, 0.5)
    ('0.5004', '0.5000')
    """
    for digits in range(2, 7):
        left, right = f"{value:.{digits}f}", f"{reference:.{digits}f}"
        if left != right:
            return left, right
    return f"{value:.2f}", f"{reference:.2f}"


def _finite_nonneg(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


def _validate(p: FusionProblem) -> list[str]:
    """Every problem with ``p``, as messages naming the offending item."""
    problems: list[str] = []
    if not isinstance(p.operators, tuple) or not all(isinstance(o, str) for o in p.operators):
        problems.append("operators must be a tuple of str (use FusionProblem.build)")
        return problems
    if not p.operators:
        problems.append("operators is empty; a fusion problem needs at least one operator")
    seen: set[str] = set()
    for op in p.operators:
        if not op:
            problems.append("operator names must be non-empty strings; got ''")
        elif op in seen:
            problems.append(f"operator '{op}' is declared more than once")
        seen.add(op)
    problems += _validate_load(p, seen)
    problems += _validate_links(p, seen)
    if not isinstance(p.comm, CommModel):
        problems.append(f"comm must have a cost(rate, size) method; got {type(p.comm).__name__}")
    if not (_finite_nonneg(p.max_frac) and p.max_frac > 0):
        problems.append(f"max_frac must be a finite number > 0; got {p.max_frac!r}")
    if not (_finite_nonneg(p.min_util) and 0 < p.min_util <= 1):
        problems.append(f"min_util must be in (0, 1]; got {p.min_util!r}")
    for kind, groups, min_size in (
        ("colocate", p.colocate, 1),
        ("exlocate", p.exlocate, 2),
        ("unfusable", p.unfusable, 2),
    ):
        problems += _validate_groups(kind, groups, min_size, seen)
    problems += _validate_channels(p.channels, seen)
    problems += _validate_apart(p.apart, seen)
    if not isinstance(p.acyclic, bool):
        problems.append(f"acyclic must be a bool; got {p.acyclic!r}")
    return problems


def _validate_apart(apart: object, ops: set[str]) -> list[str]:
    if not isinstance(apart, tuple) or not all(
            isinstance(x, tuple) and len(x) == 2 and all(isinstance(s, frozenset) for s in x) for x in apart):
        return ["apart must be a tuple of pairs of frozensets (use FusionProblem.build)"]
    problems: list[str] = []
    for i, (a, b) in enumerate(apart):
        if not a or not b:
            problems.append(f"apart item #{i} has an empty side")
        unknown = sorted((a | b) - ops)
        if unknown:
            problems.append(f"apart item #{i} names unknown operator(s) {', '.join(unknown)}")
        both = sorted(a & b)
        if both:
            problems.append(f"apart item #{i} has operator(s) on both sides: {', '.join(both)}")
    return problems


def _validate_channels(channels: object, ops: set[str]) -> list[str]:
    if not isinstance(channels, tuple) or not all(
            isinstance(r, tuple) and all(isinstance(c, frozenset) for c in r) for r in channels):
        return ["channels must be a tuple of tuples of frozensets (use FusionProblem.build)"]
    problems: list[str] = []
    placed: set[str] = set()
    for i, region in enumerate(channels):
        if len(region) < 2:
            problems.append(f"channels item #{i} has {len(region)} channel(s); a parallel region has at least 2")
        for c, chan in enumerate(region):
            if not chan:
                problems.append(f"channel {c} of channels item #{i} is empty")
            unknown = sorted(chan - ops)
            if unknown:
                problems.append(f"channel {c} of channels item #{i} names unknown operator(s) {', '.join(unknown)}")
            again = sorted(chan & placed)
            if again:
                problems.append(f"operator(s) {', '.join(again)} in more than one channel")
            placed |= chan
    return problems


def _validate_load(p: FusionProblem, ops: set[str]) -> list[str]:
    if not isinstance(p.load, Mapping):
        return [f"load must be a mapping operator -> CPU fraction; got {type(p.load).__name__}"]
    problems = [f"load has no value for operator '{op}'" for op in p.operators if op not in p.load]
    problems += [f"load names unknown operator '{op}'" for op in p.load if op not in ops]
    problems += [
        f"load of operator '{op}' must be a finite number >= 0; got {u!r}"
        for op, u in p.load.items()
        if op in ops and not _finite_nonneg(u)
    ]
    return problems


def _validate_links(p: FusionProblem, ops: set[str]) -> list[str]:
    if not isinstance(p.links, tuple) or not all(isinstance(lk, Link) for lk in p.links):
        return ["links must be a tuple of Link (use FusionProblem.build)"]
    problems: list[str] = []
    for i, lk in enumerate(p.links):
        where = f"link #{i} ({lk.src} -> {lk.dst})"
        if lk.src is None and lk.dst is None:
            problems.append(f"{where} has no operator at either end")
        for end in (lk.src, lk.dst):
            if end is not None and end not in ops:
                problems.append(f"{where} names unknown operator '{end}'")
        if lk.src is not None and lk.src == lk.dst:
            problems.append(f"{where} is a self link; an operator cannot stream to itself")
        if not _finite_nonneg(lk.rate):
            problems.append(f"{where} rate must be a finite number >= 0; got {lk.rate!r}")
        if not _finite_nonneg(lk.size):
            problems.append(f"{where} size must be a finite number >= 0; got {lk.size!r}")
    return problems


def _validate_groups(
    kind: str, groups: tuple[frozenset[str], ...], min_size: int, ops: set[str]
) -> list[str]:
    if not isinstance(groups, tuple) or not all(isinstance(g, frozenset) for g in groups):
        return [f"{kind} must be a tuple of frozensets (use FusionProblem.build)"]
    problems: list[str] = []
    for group in groups:
        label = fmt_names(str(o) for o in group)
        if len(group) < min_size:
            problems.append(f"{kind} group {label} needs at least {min_size} operators")
        unknown = sorted(str(o) for o in group if o not in ops)
        if unknown:
            problems.append(f"{kind} group {label} names unknown operator(s) {unknown}")
    return problems
