"""Turn an app's declarations into a frozen ``AppGraph``, reporting every problem at once.

Streams are resolved, then output schemas are derived to a fixpoint by each operator's
kind (``spadeopt.kinds``; kinds that declare their outputs seed it, so feedback loops
through them resolve), then the annotations are checked. A user function named like an
input attribute of its operator is refused: attribute names take precedence in
expressions, so the call would read the attribute (``'float' object is not callable``
at run time)."""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping
from typing import Any

from spadeopt.errors import GraphError
from spadeopt.kinds import KINDS
from spadeopt.kinds.kind import Decl
from spadeopt.model.analysis import colocation_groups, recursion_cycles
from spadeopt.model.graph import (
    Annotations,
    AppGraph,
    InPort,
    Operator,
    OutPort,
    PortRef,
    Stream,
)
from spadeopt.model.schema import FILE_NAME_RULE, Schema, is_file_name, is_identifier, is_port_name


def _resolve(ref: Any, decls: Mapping[str, Decl], where: str, problems: list[str]) -> PortRef | None:
    text = str(ref)
    op, _, port = text.partition(".")
    if op not in decls:
        near = difflib.get_close_matches(op, list(decls), n=2, cutoff=0.6)
        hint = f"; did you mean {' or '.join(repr(n) for n in near)}?" if near else ""
        problems.append(f"{where} subscribes to unknown operator '{op}' (stream '{text}'){hint}")
        return None
    outs = decls[op].out_ports
    if not port:
        if len(outs) != 1:
            problems.append(f"{where} subscribes to '{op}', which has {len(outs)} output ports "
                            f"({', '.join(outs) or 'none'}); name one as '{op}.<port>'")
            return None
        port = outs[0]
    if port not in outs:
        problems.append(f"{where} subscribes to unknown port '{op}.{port}' "
                        f"('{op}' has output ports: {', '.join(outs) or 'none'})")
        return None
    return PortRef(op, port)


def where_declared(line: str) -> str:
    """``file:line`` of a declaration, relative to the working directory when under it."""
    path, sep, lineno = line.rpartition(":")
    if not sep:
        return f"at {line}" if line else "at an unknown line"
    try:
        rel = os.path.relpath(path)
        path = rel if not rel.startswith("..") else path
    except ValueError:
        pass
    return f"at {path}:{lineno}"


def build_graph(app: str, declared: Iterable[Decl], ann: Annotations, params: Mapping[str, Any],
                module: str) -> AppGraph:
    """The graph of app ``app`` from its declarations; raises ``GraphError`` listing every problem."""
    problems: list[str] = []
    if not is_file_name(app):
        problems.append(f"app name {app!r} cannot name a build folder (build/<app>/...) or stand in "
                        f"generated code: use {FILE_NAME_RULE}; give App(...) such a name")
    decls = _declarations(declared, problems)
    inputs = _connect_streams(decls, problems)
    out_schema, in_schema, derived_params = _derive_schemas(decls, inputs, problems)
    problems.extend(_check_annotations(ann, decls))

    if problems:
        raise GraphError(app, problems)
    return _assemble(app, decls, inputs, out_schema, in_schema, derived_params, ann, params, module)


def _declarations(declared: Iterable[Decl], problems: list[str]) -> dict[str, Decl]:
    """The declarations by name; names, ports and duplicates checked into ``problems``."""
    decls: dict[str, Decl] = {}
    for d in declared:
        problems.extend(d.problems)
        if not is_identifier(d.name):
            problems.append(f"operator name {d.name!r} ({d.line}) must be a Python identifier "
                            f"(ASCII letters, digits, underscores; not a keyword)")
        for port in (*d.inputs, *d.out_ports):
            if not is_port_name(port):
                problems.append(f"{d.kind} '{d.name}' ({d.line}): port name {port!r} must be an ASCII "
                                f"identifier (letters, digits, underscores)")
        if d.name in decls:
            problems.append(f"duplicate operator name '{d.name}' (declared at {decls[d.name].line} and {d.line})")
            continue
        decls[d.name] = d
    return decls


def _connect_streams(decls: dict[str, Decl], problems: list[str]) -> dict[str, dict[str, list[PortRef]]]:
    """Each operator's input ports -> the output ports (streams) they read."""
    inputs: dict[str, dict[str, list[PortRef]]] = {}
    for d in decls.values():
        inputs[d.name] = {}
        for port, refs in d.inputs.items():
            resolved = [_resolve(r, decls, f"input '{d.name}.{port}' ({where_declared(d.line)})", problems)
                        for r in refs]
            inputs[d.name][port] = [r for r in resolved if r is not None]
            if not refs:
                problems.append(f"input port '{d.name}.{port}' is not connected to any stream")
    return inputs


def _derive_schemas(decls: dict[str, Decl], inputs: dict[str, dict[str, list[PortRef]]], problems: list[str]
                    ) -> tuple[dict[PortRef, Schema], dict[str, dict[str, Schema]], dict[str, Any]]:
    """Schemas, derived to a fixpoint (feedback loops need declared schemas somewhere):
    output schemas, input schemas and each operator's derived params."""
    out_schema: dict[PortRef, Schema] = {}
    in_schema: dict[str, dict[str, Schema]] = {}
    derived_params: dict[str, Any] = {}
    pending = dict(decls)
    for d in decls.values():
        if d.out_schemas is not None:
            out_schema.update({PortRef(d.name, p): s for p, s in d.out_schemas.items()})
    failed: set[str] = set()  # operators whose own derivation failed (already reported)
    progress = True
    while pending and progress:
        progress = False
        for name, d in list(pending.items()):
            ports = inputs[name]
            if any(r not in out_schema for refs in ports.values() for r in refs):
                continue
            del pending[name]
            progress = True
            ins: dict[str, Schema] = {}
            bad = False
            for port, refs in ports.items():
                schemas = [out_schema[r] for r in refs]
                if not schemas:
                    bad = True
                    continue
                for r, s in zip(refs[1:], schemas[1:], strict=True):
                    if s != schemas[0]:
                        problems.append(f"schema mismatch at '{name}.{port}': stream '{refs[0]}' carries "
                                        f"({schemas[0]}) but stream '{r}' carries ({s})")
                        bad = True
                ins[port] = schemas[0]
            in_schema[name] = ins
            problems.extend(_shadowed_functions(d, ins))
            if bad:
                failed.add(name)
                continue
            found = len(problems)
            prm, outs = KINDS[d.kind].derive(f"{d.kind} '{name}'", d.raw, ins, problems)
            problems[found:] = [f"{p} ({where_declared(d.line)})" for p in problems[found:]]
            if prm is None:
                failed.add(name)
                continue
            derived_params[name] = prm
            out_schema.update({PortRef(name, p): s for p, s in outs.items()})
    blocked = _downstream_of(failed | {d.name for d in decls.values() if KINDS[d.kind].declares_outputs
                                        and d.out_schemas is None}, inputs)
    for name in pending:
        if name in blocked:
            continue  # its upstream's problem is already reported
        problems.append(f"cannot determine the input schema of '{name}': it depends on a feedback loop "
                        f"with no declared schema (declare the custom operator's output schemas)")
    return out_schema, in_schema, derived_params


def _assemble(app: str, decls: dict[str, Decl], inputs: dict[str, dict[str, list[PortRef]]],
              out_schema: dict[PortRef, Schema], in_schema: dict[str, dict[str, Schema]],
              derived_params: dict[str, Any], ann: Annotations, params: Mapping[str, Any],
              module: str) -> AppGraph:
    """The checked declarations as an ``AppGraph``; a colocated loop that re-enters a
    tuple-generating port is refused (``GraphError``)."""
    operators, streams = [], []
    for name, d in decls.items():
        in_ports = tuple(
            InPort(p, in_schema.get(name, {}).get(p), d.tuple_generating.get(p, True))
            for p in d.inputs
        )
        out_ports = tuple(OutPort(p, out_schema[PortRef(name, p)]) for p in d.out_ports)
        operators.append(Operator(name, d.kind, in_ports, out_ports, derived_params[name], d.state, d.key, d.line))
        for port, refs in inputs[name].items():
            streams.extend(Stream(r, PortRef(name, port)) for r in refs)
    graph = AppGraph(app, tuple(operators), tuple(streams), ann,
                     tuple(sorted(params.items())), module)
    cycle_problems = [
        f"colocated operators {sorted(group)} form a loop that re-enters tuple-generating port(s) "
        f"{', '.join(cyc)} inside one PE (infinite recursion); mark the feedback input "
        f"tuple_generating=False or do not colocate the loop"
        for group in colocation_groups(graph, manual=True)
        for cyc in recursion_cycles(graph, group)
    ]
    if cycle_problems:
        raise GraphError(app, cycle_problems)
    return graph

def _shadowed_functions(d: Decl, ins: Mapping[str, Schema]) -> list[str]:
    """A user function of ``d`` named like one of its input attributes: in an expression
    the name reads the attribute, so calling it would fail at run time."""
    return [f"{d.kind} '{d.name}' ({d.line}): function '{fn}' has the name of input attribute "
            f"'{fn}' (port '{port}'); an expression's name reads the attribute, so the function "
            f"could never be called: rename the function or the attribute"
            for fn, _ in d.raw.get("functions", ()) for port, schema in ins.items() if fn in schema]


def _downstream_of(roots: set[str], inputs: dict[str, dict[str, list[PortRef]]]) -> set[str]:
    """Operators fed, directly or not, by any of ``roots``."""
    feeds: dict[str, set[str]] = {}
    for op, ports in inputs.items():
        for refs in ports.values():
            for r in refs:
                feeds.setdefault(r.op, set()).add(op)
    seen, stack = set(), list(roots)
    while stack:
        for nxt in feeds.get(stack.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def _check_annotations(ann: Annotations, decls: Mapping[str, Any]) -> list[str]:
    problems = []
    for kind, groups in (("colocate", ann.colocate), ("exlocate", ann.exlocate), ("fuse", ann.fuse)):
        for g in groups:
            for op in g:
                if op not in decls:
                    problems.append(f"{kind}({', '.join(g)}) names unknown operator '{op}'")
            if len(g) < 2:
                problems.append(f"{kind}({', '.join(g)}) needs at least two operators")
    for op, node in ann.host:
        if op not in decls:
            problems.append(f"place('{op}', {node}) names unknown operator '{op}'")
        if not isinstance(node, int) or node < 0:
            problems.append(f"place('{op}', {node}): node must be an integer >= 0")
    known = lambda group: tuple(o for o in group if o in decls)  # noqa: E731
    import networkx as nx  # here, not at the top: a PE imports the DSL with the app, never validates

    uf = nx.utils.UnionFind(decls)
    for g in (*ann.colocate, *ann.fuse):
        uf.union(*known(g))
    for g in map(known, ann.exlocate):
        for i, a in enumerate(g):
            for b in g[i + 1:]:
                if uf[a] == uf[b]:
                    problems.append(f"exlocate({', '.join(g)}) conflicts with colocate/fuse: '{a}' and "
                                    f"'{b}' must share a PE by colocation or manual fusion")
    seen_region: dict[str, str] = {}
    names: set[str] = set()
    for region, ops, width in ann.parallel:
        if not is_identifier(region):
            problems.append(f"parallel region name {region!r} must be a Python identifier")
        if region in names:
            problems.append(f"parallel region '{region}' is declared twice")
        names.add(region)
        if not ops:
            problems.append(f"parallel region '{region}' has no operators")
        if isinstance(width, bool) or not isinstance(width, int) or width < 1:
            problems.append(f"parallel region '{region}': width must be an integer >= 1, got {width!r}")
        for op in ops:
            if op not in decls:
                problems.append(f"parallel region '{region}' names unknown operator '{op}'")
            elif op in seen_region:
                problems.append(f"operator '{op}' is in parallel regions '{seen_region[op]}' and '{region}'")
            else:
                seen_region[op] = region
    hosts: dict[str, tuple[str, int]] = {}
    for op, node in ann.host:
        if op not in decls:
            continue
        root = uf[op]
        if root in hosts and hosts[root][1] != node:
            problems.append(f"place('{op}', {node}) conflicts with place('{hosts[root][0]}', "
                            f"{hosts[root][1]}): they are colocated")
        hosts.setdefault(root, (op, node))
    return problems
