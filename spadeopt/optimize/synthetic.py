"""Seeded random fusion problems for benchmarks and tests. Synthetic; not real profiles.

Two generators, both pure functions of the ``random.Random`` they are given:

* :func:`random_small_problem`: a random DAG of a few operators with independent uniform
  loads, rates and sizes; for comparing GreedyFuse with the exact optimizer.
* :func:`random_app_problem`: a larger, application-like DAG: a few sources feeding
  mostly local pipelines with some fan-in and fan-out, tuple rates that follow the flow
  (each operator's output rate is its input rate times a selectivity), and
  ``u = input rate x per-tuple CPU cost`` with a long-tailed cost, so that a few
  operators are heavy and most are light.
"""

from __future__ import annotations

import math
import random

from spadeopt.optimize.problem import FusionProblem, LinearCommModel, Link

SMALL_COMM = LinearCommModel(per_tuple_s=5e-6, per_byte_s=2e-9)
APP_COMM = LinearCommModel(per_tuple_s=3e-6, per_byte_s=1e-9)


def random_small_problem(
    rng: random.Random,
    n_ops: int,
    *,
    link_prob: float = 0.35,
    max_load: float = 0.25,
    comm: LinearCommModel = SMALL_COMM,
) -> FusionProblem:
    """A random connected DAG on ``o0 .. o<n-1>``.

    Every operator after the first gets one link from a random earlier operator, and each
    other forward pair gets a link with probability ``link_prob``. Loads are uniform in
    ``[0, max_load]``, rates in ``[10, 10000]`` tuples/s, sizes in ``[16, 1024]`` bytes.
    """
    names = [f"o{i}" for i in range(n_ops)]
    pairs = {(rng.randrange(j), j) for j in range(1, n_ops)}
    pairs |= {(i, j) for i in range(n_ops) for j in range(i + 1, n_ops) if rng.random() < link_prob}
    links = [
        Link(names[i], names[j], rng.uniform(10.0, 10_000.0), rng.uniform(16.0, 1024.0))
        for i, j in sorted(pairs)
    ]
    load = {name: rng.uniform(0.0, max_load) for name in names}
    return FusionProblem.build(names, load, links, comm)


def random_app_problem(
    rng: random.Random,
    n_ops: int,
    *,
    comm: LinearCommModel = APP_COMM,
    window: int = 20,
) -> FusionProblem:
    """An application-like random DAG with ``n_ops`` operators (see module docstring).

    About 2 % of operators are sources emitting 1k–50k tuples/s. Every other operator
    reads from one upstream operator (80 %), two (17 %) or three (3 %), picked among the
    ``window`` operators before it (5 % of the time from anywhere earlier). Selectivity is
    log-uniform in ``[0.1, 1.5]``; rates are capped at 200k tuples/s. Per-tuple CPU cost is
    log-normal with a median of 3 µs; ``u`` is capped at 1.0 CPU.
    """
    names = [f"op{i:05d}" for i in range(n_ops)]
    n_sources = max(1, n_ops // 50)
    out_rate: list[float] = []
    out_size: list[float] = []
    links: list[Link] = []
    load: dict[str, float] = {}
    for i, name in enumerate(names):
        size = float(rng.choice((32, 64, 128, 256, 512, 1024)))
        if i < n_sources:
            rate = rng.uniform(1_000.0, 50_000.0)
            load[name] = min(1.0, rate * 2e-6)
        else:
            ups = _upstreams(rng, i, window)
            in_rate = math.fsum(out_rate[j] for j in ups)
            links += [Link(names[j], name, out_rate[j], out_size[j]) for j in ups]
            per_tuple = math.exp(rng.gauss(math.log(3e-6), 1.2))
            load[name] = min(1.0, in_rate * per_tuple)
            selectivity = math.exp(rng.uniform(math.log(0.1), math.log(1.5)))
            rate = min(200_000.0, in_rate * selectivity)
        out_rate.append(rate)
        out_size.append(size)
    return FusionProblem.build(names, load, links, comm)


def _upstreams(rng: random.Random, i: int, window: int) -> list[int]:
    draw = rng.random()
    k = 1 if draw < 0.80 else 2 if draw < 0.97 else 3
    ups: set[int] = set()
    for _ in range(k):
        if rng.random() < 0.05:
            ups.add(rng.randrange(i))
        else:
            ups.add(rng.randrange(max(0, i - window), i))
    return sorted(ups)
