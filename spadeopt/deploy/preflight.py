"""Checks made on the driver before anything is written or Spark starts.

Each check raises a ``SpadeoptError`` whose message names the flag or file involved and
what to do; none writes anything. ``preflight`` runs them all for a build about to run:
the Spark master URL and whether its task slots fit the plan's nodes x cores, Java, the
input files of file sources (where the driver can see them), and the brokers and folders
of connectors (a broker that does not answer is named here, not by a failing PE).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from spadeopt.deploy.masters import Master, parse_master
from spadeopt.errors import UsageError


def check_fit(master: Master, nodes: int, cores: int, flag: str = "--master") -> None:
    """A barrier stage needs ``nodes`` tasks at once, each with ``cores`` CPUs (``spark.task.cpus``)."""
    if master.kind == "local" and master.cores is not None:  # local[N]: one executor of N cores
        need = nodes * cores
        if master.cores < need:
            raise UsageError(
                f"{flag} {master.url} offers {master.cores} core(s), but the plan runs {nodes} node(s) x "
                f"{cores} core(s) at once (one barrier task per node, spark.task.cpus = {cores}); use "
                f"--master local[{need}], or plan for fewer --nodes/--cores")
    elif master.kind == "local-cluster" and master.executors is not None and master.executors < nodes:
        raise UsageError(
            f"{flag} {master.url} starts {master.executors} executor(s), but the plan has {nodes} node(s), "
            f"one barrier task each; use local-cluster[{nodes},{master.cores},1024], or plan for "
            f"--nodes {master.executors}")


def _generator(op):
    """A source's generator (a ``SymbolRef``), read off its params as data (deploy is a
    runner and does not import ``kinds``, where ``kinds.generator_of`` says the same)."""
    return getattr(getattr(op, "params", None), "generator", None)


def source_files(graph) -> list[tuple[str, str]]:
    """(source operator, path) for every file-replay source of the graph."""
    out = []
    for op in graph.operators:
        params = getattr(op, "params", None)
        gen = _generator(op)
        if gen is not None and getattr(gen, "module", "") == "spadeopt.toolkit.sources":
            path = dict(params.args).get("path")
            if path:
                out.append((op.name, str(path)))
    return out


def check_inputs(graph, master: Master, say: Callable[[str], None] | None = None) -> None:
    """Input files of file sources exist and are readable (local masters only: elsewhere PEs
    read them on the executors, which the driver cannot see)."""
    files = source_files(graph)
    if not files:
        return
    if master.kind == "cluster":
        if say:
            say(f"input files of {', '.join(op for op, _ in files)} not checked: on {master.url} the "
                f"executors read them, and must see them at the same path")
        return
    problems = []
    for op, path in files:
        if not os.path.exists(path):
            problems.append(f"source '{op}': input file {path} does not exist")
        elif not os.path.isfile(path):
            problems.append(f"source '{op}': input file {path} is not a regular file")
        elif not os.access(path, os.R_OK):
            problems.append(f"source '{op}': input file {path} is not readable (check its permissions)")
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        raise UsageError(f"app '{graph.name}' cannot run:\n{lines}")


def connectors(graph) -> list[tuple[str, str, dict]]:
    """(operator, factory ``module:qualname``, its arguments) of every connector source or
    sink of the graph (``spadeopt.connectors``)."""
    out = []
    for op in graph.operators:
        params = getattr(op, "params", None)
        ref = getattr(params, "generator", None) or getattr(params, "connector", None)
        if ref is not None and getattr(ref, "module", "").startswith("spadeopt.connectors."):
            out.append((op.name, f"{ref.module}:{ref.qualname}", dict(params.args)))
    return out


def check_connectors(graph, master: Master, say: Callable[[str], None] | None = None) -> None:
    """Every Redis broker a connector names answers and takes its password, and every
    watched folder exists, before any PE starts (local masters: a broker on 127.0.0.1
    is the driver's own; on a cluster, only brokers not on loopback are checked)."""
    from spadeopt.connectors.contract import ConnectorError
    from spadeopt.connectors.redis_streams import check

    problems = []
    for op, factory, args in connectors(graph):
        role = "sink" if factory.endswith("Sink") else "source"
        if factory.startswith("spadeopt.connectors.redis_streams:"):
            if master.kind == "cluster" and args["host"] in ("127.0.0.1", "localhost", "::1"):
                if say:
                    say(f"{role} '{op}': broker {args['host']}:{args['port']} not checked: on {master.url} it "
                        f"is each executor's own loopback")
                continue
            try:
                check(args, f"{role} '{op}'")
            except ConnectorError as exc:
                problems.append(str(exc))
        elif factory == "spadeopt.connectors.folder:FolderSource" and master.kind != "cluster":
            if not os.path.isdir(args["path"]):
                problems.append(f"source '{op}': watched folder {args['path']} does not exist "
                                f"(create it, or fix the path)")
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        raise UsageError(f"app '{graph.name}' cannot run:\n{lines}")


def preflight(graph, master_url: str | None, nodes: int, cores: int,
              say: Callable[[str], None] | None = None) -> Master:
    """Every check that can fail before a build is written or Spark starts."""
    from spadeopt.deploy.spark_session import check_java

    master = parse_master(master_url or f"local[{nodes * cores}]")
    check_fit(master, nodes, cores)
    check_java()
    if graph is not None:
        check_inputs(graph, master, say)
        check_connectors(graph, master, say)
        if master.kind != "cluster":  # a cluster's workers may see data this driver does not
            check_generators(graph)
    return master


def _first_record(op) -> tuple | None:
    """The first record a generator source yields (its first split's first record for a
    splittable one), or None when the generator cannot be found here or yields nothing."""
    import itertools
    import sys

    p = op.params
    fn = sys.modules.get(p.generator.module)
    for part in p.generator.qualname.split("."):
        fn = getattr(fn, part, None)
    if not callable(fn):
        return None
    args = dict(p.args) | ({"part": 0, "parts": 1} if p.split else {})
    first = next(iter(fn(**args)), None)
    if p.split and first is not None:
        first = next(itertools.islice(first, 1), None)
    return first


def check_generators(graph) -> None:
    """Each generator source's first record against its schema: arity and the type of
    every attribute (as the links between PEs accept them: an int for a float too),
    naming the source and the attribute, before Spark starts. A wrong type would
    otherwise fail later, in whichever operator first computes with it."""
    from spadeopt.errors import user_failure
    from spadeopt.wire import WIRE_TYPES

    problems = []
    for op in graph.operators:
        gen = _generator(op)
        if gen is None or gen.module.startswith("spadeopt."):
            continue
        try:
            first = _first_record(op)
        except Exception as exc:  # noqa: BLE001 - the user's generator
            problems.append(str(user_failure(exc, f"source '{op.name}': its generator raised on its first record")))
            continue
        schema = op.outputs[0].schema
        if first is None:
            continue
        if not isinstance(first, tuple | list) or len(first) != len(schema):
            size = len(first) if isinstance(first, tuple | list) else "not a tuple"
            problems.append(f"source '{op.name}' ({op.line}): its generator's first record {first!r} has "
                            f"{size} value(s), but the schema has {len(schema)} ({schema}); yield tuples "
                            f"in the schema's order")
            continue
        for (name, typ), value in zip(schema.attrs, first, strict=True):
            if type(value) not in WIRE_TYPES[typ]:
                problems.append(f"source '{op.name}' ({op.line}): attribute '{name}' is declared {typ}, but "
                                f"the generator's first record has {value!r} ({type(value).__name__}); "
                                f"yield {typ} values (e.g. {typ}(...)) or declare '{name}:"
                                f"{_type_name(value)}'")
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        raise UsageError(f"app '{graph.name}' cannot run:\n{lines}")


def _type_name(value) -> str:
    return {bool: "bool", int: "int", float: "float", str: "str", bytes: "bytes"}.get(type(value), "str")
