"""Does a profile plan this run? The same operator graph, whatever the sources' length.

A profile says what each operator costs per tuple and how streams carry tuples, for one
operator graph. A run of the same app with a longer source (``-p tuples=4000000`` after
profiling 1 M tuples) has the same operators, streams and parameters but for the length
its generators are called with, so the profile plans it: refusing it made a user profile
every run length again. Two graphs match when their :func:`shape_fingerprint` agree:
the graph fingerprint with every source's generator arguments left out. Then each
source argument that differs is sorted: an argument that only bounds the generator's
length (``spadeopt.toolkit.sources.length``, or a conventional name such as ``n``) is
silent; any other (a seed, a key count, a record size, a stream name) gets a warning,
since the profiled costs and rates may not hold for it; nothing is refused.

>>> from spadeopt.frontend.dsl import App
>>> from spadeopt.toolkit.sources import counter
>>> def graph(n, size):
...     a = App("g")
...     a.sink("out", a.functor("f", a.source("src", "seq:int, payload:bytes", generator=counter,
...                                            args={"n": n, "size": size})), mode="count")
...     return a.build()
>>> shape_fingerprint(graph(10, 100)) == shape_fingerprint(graph(40, 100)) != graph(10, 100).fingerprint
True
>>> source_warnings(graph(10, 100), graph(40, 100))
[]
>>> source_warnings(graph(10, 100), graph(10, 64))
["source 'src': size is 64 here but 100 in the profiled run: the profile's costs and rates may not hold for it"]
"""

from __future__ import annotations

from spadeopt.errors import OptimizeError
from spadeopt.kinds.source import generator_args, length_args, without_args
from spadeopt.model.graph import AppGraph


def shape_fingerprint(graph: AppGraph) -> str:
    """``graph``'s fingerprint without its sources' generator arguments."""
    return graph.fingerprint_with(without_args)


def source_warnings(profiled: AppGraph, run: AppGraph) -> list[str]:
    """One warning per source argument of ``run`` that differs from ``profiled`` and does
    not only bound the generator's length (module docstring). The graphs must have the
    same shape (:func:`check_same_shape`)."""
    out = []
    for op in run.operators:
        now = generator_args(op)
        if now is None:
            continue
        then = generator_args(profiled.op(op.name)) or {}
        lengths = length_args(op)
        for name in sorted(set(now) | set(then)):
            if name in lengths or now.get(name) == then.get(name):
                continue
            out.append(f"source '{op.name}': {name} is {now.get(name)!r} here but {then.get(name)!r} in the "
                       f"profiled run: the profile's costs and rates may not hold for it")
    return out


def check_same_shape(profiled: AppGraph, run: AppGraph) -> None:
    """Refuse to plan ``run`` with a profile of ``profiled`` unless their operator graphs
    match (:func:`shape_fingerprint`), naming what differs."""
    if shape_fingerprint(profiled) == shape_fingerprint(run):
        return
    a, b = {op.name for op in profiled.operators}, {op.name for op in run.operators}
    if a != b:
        what = "operators " + ", ".join(sorted(a ^ b)[:5]) + " are in one graph only"
    else:
        changed = sorted(op.name for op in run.operators
                         if without_args(op) != without_args(profiled.op(op.name)) or op.kind != profiled.op(op.name).kind)
        what = ("operator(s) " + ", ".join(changed[:5]) + " have other parameters") if changed else \
            "the streams between operators differ"
    raise OptimizeError(f"the profile describes another operator graph than app '{run.name}' with these "
                        f"parameters ({what}); only a source's length may differ between the profiled run "
                        f"and the planned one. Profile the app with these parameters (spadeopt profile) "
                        f"and refine it again")
