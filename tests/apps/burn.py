"""Ground truth for refinement: operators that burn a known CPU time per tuple.

Every operator spins until its thread's CPU clock (``time.thread_time_ns``) has advanced
by a known number of nanoseconds per tuple, so the true CPU fraction of an operator is
``ns * 1e-9 * (its input tuple rate)`` (a source: ``ns * 1e-9 * its output rate``)::

    src  (source, burns src_ns per tuple it generates)
     └─ filt   functor: burns filt_ns per input tuple, keeps 3 in 4 (seq % 4 != 0)
         └─ route  custom, two outputs: burns route_ns per input tuple;
             │     seq % 3 == 0 -> "hi" (1/3), else -> "lo" (2/3)
             ├─ heavy  functor on hi: burns heavy_ns per tuple, keeps all
             └─ light  functor on lo: burns light_ns per tuple, keeps half (seq % 2 == 0)
                 union(heavy, light) -> sink (count)

Selectivities: filt 0.75, route 1/3 + 2/3, heavy 1, light 0.5, union 1. ``TRUTH_NS``
lists the burned nanoseconds per input tuple for a parameter set; ``union`` and ``sink``
burn nothing (their true CPU is only the runtime's per-batch work, close to 0).
"""

from __future__ import annotations

from time import thread_time_ns

from spadeopt import App, app


def _overshoot_ns() -> int:
    """Mean CPU a ``burn`` spends past its deadline (the last clock read and the return).

    Measured once per process so that ``burn(v, ns)`` costs ``ns`` on average rather
    than ``ns`` plus about one clock read (~0.5-1 us on a VM, 2-5 % of a 20 us burn).
    """
    tt = thread_time_ns
    n, ns = 200, 10_000
    t0 = tt()
    for _ in range(n):
        end = tt() + ns
        while tt() < end:
            pass
    per = (tt() - t0) / n
    return max(0, int(per - ns))


_BIAS = _overshoot_ns()


def burn(value, ns: int):
    """Spin until this thread has used ``ns`` more nanoseconds of CPU; return ``value``."""
    tt = thread_time_ns
    end = tt() + ns - _BIAS
    while tt() < end:
        pass
    return value


def burning_counter(n: int, ns: int, size: int = 40):
    """A source generator: ``n`` tuples ``(seq, payload)``, burning ``ns`` CPU each."""
    payload = b"x" * max(0, size - 12)
    for i in range(n):
        burn(None, ns)
        yield (i, payload)


class Router:
    """Custom operator with two outputs: ``hi`` gets seq % 3 == 0, ``lo`` the rest."""

    def __init__(self, ns: int) -> None:
        self.ns = ns

    def process(self, port, tup, submit) -> None:
        burn(None, self.ns)
        submit("hi" if tup[0] % 3 == 0 else "lo", tup)


DEFAULTS = {"src_ns": 20_000, "filt_ns": 30_000, "route_ns": 20_000, "heavy_ns": 60_000,
            "light_ns": 10_000}


def truth_ns(params: dict | None = None) -> dict[str, int]:
    """Nanoseconds burned per input tuple (per generated tuple for ``src``), by operator."""
    p = {**DEFAULTS, **(params or {})}
    return {"src": p["src_ns"], "filt": p["filt_ns"], "route": p["route_ns"],
            "heavy": p["heavy_ns"], "light": p["light_ns"], "u": 0, "sink": 0}


@app
def burn_app(tuples: int = 40_000, src_ns: int = 20_000, filt_ns: int = 30_000,
             route_ns: int = 20_000, heavy_ns: int = 60_000, light_ns: int = 10_000) -> App:
    a = App("burn")
    s = a.source("src", "seq:int, payload:bytes", generator=burning_counter,
                 args={"n": tuples, "ns": src_ns})
    f = a.functor("filt", s, filter=f"burn(seq % 4 != 0, {filt_ns})", functions=[burn])
    r = a.custom("route", Router, inputs={"in": f},
                 outputs={"hi": "seq:int, payload:bytes", "lo": "seq:int, payload:bytes"},
                 args={"ns": route_ns}, state="stateless")
    h = a.functor("heavy", r["hi"], output={"seq:int": f"burn(seq, {heavy_ns})", "payload": "payload"},
                  functions=[burn])
    lt = a.functor("light", r["lo"], filter=f"burn(seq % 2 == 0, {light_ns})", functions=[burn])
    m = a.union("u", [h, lt])
    a.sink("sink", m, mode="count")
    a.colocate("filt", "route")
    return a


app = burn_app
