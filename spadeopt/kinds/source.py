"""``source``: a seeded generator ``generator(**args)`` yielding tuples, or a file replay
(CSV with a header, JSON lines, Parquet). Output schema declared; stateful; a source
may lead a parallel region only when its generator is splittable
(``toolkit.sources.splittable``): each channel's copy then reads its own splits; or when
it is a connector reading several partitions (Redis stream keys) that declares how the
app partitions them (``partitioned_by``): each channel's copy reads its own keys
(``partitioning``; the region's merge interleaves by arrival, ``plan.regions``)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from spadeopt.connectors.declared import ConnectorSpec, is_live, is_unbounded
from spadeopt.connectors.declared import partitioning as connector_partitioning
from spadeopt.errors import UsageError
from spadeopt.kinds.kind import Decl, Imports, Kind, derive_declared, parse_schema, symbol_of
from spadeopt.kinds.lowering import alias, call_args
from spadeopt.model.graph import STATEFUL, AppGraph, Operator, SymbolRef
from spadeopt.protocol import SEQ
from spadeopt.toolkit.sources import declared_length_args, split_size

READERS = {"csv": "read_csv", "jsonl": "read_jsonl", "json": "read_jsonl", "parquet": "read_parquet"}


@dataclass(frozen=True)
class SourceParams:
    generator: SymbolRef
    args: tuple[tuple[str, Any], ...] = ()
    split: int = 0  # records per split of a splittable generator (``toolkit.sources.splittable``); 0: not
    part: int = 0  # which of ``parts`` interleaved shares of the splits this copy reads (fission)
    parts: int = 1


def declare(name: str, schema: Any, *, generator: Callable | None = None,
            args: Mapping[str, Any] | None = None, file: str | None = None,
            format: str | None = None, connector: ConnectorSpec | None = None) -> Decl:
    decl = Decl(name, "source", {}, {}, state=STATEFUL)
    sch = parse_schema(schema, decl, "schema")
    decl.out_schemas = {"out": sch} if sch else None
    if sum(x is not None for x in (generator, file, connector)) != 1:
        decl.problems.append(f"source '{name}': give exactly one of generator=, file= or connector=")
    elif connector is not None:
        _declare_connector(decl, name, sch, connector, args, format)
    elif file is not None:
        file = os.path.abspath(file)  # PEs may run elsewhere: resolve against the builder's cwd
        fmt = format or file.rsplit(".", 1)[-1].lower()
        if fmt not in READERS:
            decl.problems.append(f"source '{name}': unknown file format '{fmt}'; use csv, jsonl or parquet")
        else:
            decl.raw["params"] = SourceParams(
                SymbolRef("spadeopt.toolkit.sources", READERS[fmt]),
                (("path", file), ("schema", sch.to_json() if sch else [])),
            )
    else:
        try:
            try:
                split = split_size(generator, dict(args or {}))
            except ValueError as exc:
                raise UsageError(f"source '{name}': {exc}") from None
            if split and {"part", "parts"} & set(args or {}):
                raise UsageError(f"source '{name}': args must not set part/parts of a splittable "
                                 f"generator; fission sets them for each channel")
            decl.raw["params"] = SourceParams(symbol_of(generator, f"source '{name}'"),
                                              tuple(sorted((args or {}).items())), split=split)
        except UsageError as exc:
            decl.problems.append(str(exc))
    decl.raw["outputs"] = decl.out_schemas
    return decl


def _declare_connector(decl: Decl, name: str, sch: Any, spec: Any, args: Any, format: Any) -> None:
    """A live source: the connector's factory is called with its arguments, the
    source's name and its schema (``spadeopt.connectors.declared``)."""
    if not isinstance(spec, ConnectorSpec) or spec.role != "source":
        what = f"a {spec.role} connector" if isinstance(spec, ConnectorSpec) else repr(spec)
        decl.problems.append(f"source '{name}': connector= takes a source connector (spadeopt.connectors: "
                             f"redis_source, tcp_source, folder_source), got {what}")
        return
    if args is not None or format is not None:
        decl.problems.append(f"source '{name}': args= and format= belong to generator= and file=; "
                             f"give a connector's options to the connector")
    decl.problems.extend(f"source '{name}' ({spec.describe}): {p}" for p in spec.problems)
    if sch is not None:
        decl.problems.extend(f"source '{name}': {p}" for p in connector_schema_problems(spec, sch))
    if not spec.problems:
        decl.raw["params"] = SourceParams(SymbolRef(spec.module, spec.qualname), tuple(sorted(
            (*spec.args, ("name", name), ("schema", sch.to_json() if sch else [])))))


def connector_schema_problems(spec: ConnectorSpec, sch: Any) -> list[str]:
    args = dict(spec.args)
    missing = [a for a in args.get("partitioned_by") or () if a not in sch]
    if missing:
        return [f"partitioned_by names {', '.join(repr(a) for a in missing)}, not attribute(s) of the schema "
                f"({', '.join(sch.names)})"]
    attr = args.get("time_from_id")
    if attr is None:
        return []
    if attr not in sch:
        return [f"time_from_id '{attr}' is not an attribute of the schema ({', '.join(sch.names)})"]
    if sch.type_of(attr) not in ("int", "float"):
        return [f"time_from_id '{attr}' must be an int (milliseconds) or float (seconds) attribute, "
                f"not {sch.type_of(attr)}"]
    return []


def lower(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    p = op.params
    args = call_args(op, p.args)
    if p.split or p.parts > 1:  # this copy's share of the splits, or of a partitioned connector's keys
        args = ", ".join(a for a in (args, f"part={p.part}, parts={p.parts}") if a)
    out = op.out_port("out").schema
    return {"gen": alias(p.generator, imports), "args": args, "split": p.split, "part": p.part,
            "parts": p.parts, "seq": out is not None and SEQ in out,
            "live": is_live(p.generator.module, p.generator.qualname)}


def unbounded(op: Operator) -> bool:
    """A live connector source with no end of its own: a run of it ends only on a stop
    request or ``--duration`` (``connectors.declared.is_unbounded``)."""
    p = op.params
    return is_unbounded(p.generator.module, p.generator.qualname, dict(p.args))


def partitioning(op: Operator) -> tuple[int, tuple[str, ...]] | None:
    """``(partitions, partitioned_by)`` of a connector source that may lead a parallel region
    (each channel's copy reads partitions c, c + k, ...: ``parts`` of them), else None."""
    p = op.params
    found = connector_partitioning(p.generator.module, p.generator.qualname, p.args)
    if found is None:
        return None
    keys, by = found
    return (len(keys), tuple(by)) if len(keys) > 1 and by else None


def region_problem(op: Operator) -> str | None:
    if op.params.split or partitioning(op) is not None:
        return None
    found = connector_partitioning(op.params.generator.module, op.params.generator.qualname, op.params.args)
    if found is not None:
        keys, by = found
        if len(keys) < 2:
            return (f"operator '{op.name}' is a connector source reading one stream key: a parallel region "
                    f"may start at it only when it reads several keys (channel c reads keys c, c + width, "
                    f"...); give it several stream keys with partitioned_by=[...], or start the region after "
                    f"the source")
        return (f"operator '{op.name}' is a connector source of {len(keys)} stream keys that does not declare "
                f"how the app partitions them: a parallel region may start at it only with "
                f"redis_source(..., partitioned_by=[attributes]) (every record with the same values of "
                f"those attributes on one key), and then every partitioned operator of the region keyed on "
                f"them; or start the region after the source")
    if op.params.generator.module.startswith("spadeopt.connectors."):
        return (f"operator '{op.name}' is a connector source that is not partitioned: a parallel region "
                f"cannot start at it (only at a Redis streams source of several keys that declares "
                f"partitioned_by=[...]); start the region after the source")
    return (f"operator '{op.name}' is a source whose generator is not splittable: only a generator "
            f"marked spadeopt.toolkit.sources.splittable can be read by several channels")


def channel_params(op: Operator, channel: int, width: int, dynamic: bool) -> SourceParams:
    return dataclasses.replace(op.params, part=channel, parts=width)  # splits (or keys) c, c + k, c + 2k, ...


def generator(op: Operator) -> SymbolRef | None:
    """The generator or connector factory the source reads (None: its params are missing)."""
    params = getattr(op, "params", None)
    return getattr(params, "generator", None)


def rescale(op: Operator) -> dict[str, Any] | str:
    """A splittable source's copies checkpoint the records each read of its own splits
    (``c, c + k, ...``): from width 1, where the records read are a prefix ``[0, n)``, each
    new copy's position is how many of its splits' records lie below ``n`` (passed over
    unread at the resume), and a static merge starts at split ``n // split``'s channel
    (``deploy.checkpoint_rescale``). A partitioned broker source's copies keep their own
    stream keys' entry IDs: from width 1, where one reader holds every key's, copy ``c``
    of ``k`` takes those of its keys ``c, c + k, ...``. A ``count=`` limit counts per
    reader, so such a source keeps its width."""
    if op.params.split:
        return {"position": "splits", "size": op.params.split}
    p = op.params
    found = connector_partitioning(p.generator.module, p.generator.qualname, p.args)
    if found is None:
        return "a source that is neither splittable nor partitioned is not replicated"
    if dict(p.args).get("count") is not None:
        return ("a partitioned source with count= reads that many records per channel, so its records read do not "
                "move to another width")
    return {"position": "keys", "keys": list(found[0])}


KIND = Kind("source", declare, derive_declared, lower, "ops/source.py.j2", declares_outputs=True,
            region_problem=region_problem, channel_params=channel_params, generator=generator, rescale=rescale)


def generator_args(op: Operator) -> dict[str, Any] | None:
    """The arguments a source operator calls its generator or connector with, else None
    (not a source). ``spadeopt.optimize.profile_match`` compares them between a profile's
    run and the run being planned."""
    if op.kind != KIND.name:
        return None
    return dict(op.params.args)


def without_args(op: Operator) -> Any:
    """``op``'s parameters, a source's without its generator's arguments: what decides the
    operator graph a profile describes (``spadeopt.optimize.profile_match``)."""
    if op.kind != KIND.name:
        return op.params
    return dataclasses.replace(op.params, args=())


def length_args(op: Operator) -> frozenset[str]:
    """The arguments of a source's generator that only bound how many records it yields:
    those it declares with ``spadeopt.toolkit.sources.length`` (or ``splittable(...,
    length=)``), else the conventional names of ``toolkit.sources.LENGTH_NAMES`` that the
    generator takes. Empty for connectors and other kinds."""
    if op.kind != KIND.name or op.params.generator.module.startswith("spadeopt.connectors."):
        return frozenset()
    return declared_length_args(op.params.generator.module, op.params.generator.qualname)
