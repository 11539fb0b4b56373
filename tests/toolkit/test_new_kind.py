"""Adding an operator kind takes one kind module and its template (``sample_kind.py`` and
``sample.py.j2``, defined only here): the toy kind builds, runs under every fusion, runs
in a parallel region at any width, and the region rules apply to it."""

from __future__ import annotations

import pytest

from spadeopt import App
from spadeopt.errors import UsageError
from spadeopt.optimize.strategies import plan_for
from tests.toolkit import sample_kind
from tests.toolkit.gens import replay
from tests.toolkit.harness import run_fusions, simulate

ROWS = [(i, i % 4, i * 10) for i in range(200)]
K = 3


def sampled(rows: list[tuple], k: int) -> list[dict]:
    """The reference: every k-th tuple of each key, in input order, after ``f``."""
    seen: dict[int, int] = {}
    out = []
    for i, key, v in rows:
        seen[key] = seen.get(key, 0) + 1
        if seen[key] % k == 0:
            out.append({"id": i, "k": key, "w": v + 1})
    return out


def sample_app(width: int | None = None, by: tuple[str, ...] = ("k",)) -> App:
    a = App("sampled")
    s = a.source("src", "id:int, k:int, v:int", generator=replay, args={"rows": ROWS})
    f = a.functor("f", s, output={"id": "id", "k": "k", "w:int": "v + 1"})
    smp = a.operator("sample", "smp", f, k=K, by=by)
    g = a.functor("g", smp, filter="w >= 0")
    a.sink("out", g)
    a.fuse("f", "smp")
    if width is not None:
        a.parallel("f", "smp", "g", width=width, name="reg")
    return a


def test_the_kind_is_registered_by_its_module():
    assert sample_kind.KIND.name == "sample"
    assert sample_app().build().op("smp").state == "partitioned"


@pytest.mark.parametrize("fusion", ["none", "all", "manual"])
def test_a_new_kind_runs_under_every_fusion(tmp_path, fusion):
    runs = run_fusions(sample_app(), tmp_path, fusions=(fusion,))
    assert runs[fusion]["out"] == sampled(ROWS, K)


@pytest.mark.parametrize("width", [2, 3])
def test_a_new_kind_runs_in_a_parallel_region(tmp_path, width):
    graph = sample_app(width).build()
    plan = plan_for(graph, "manual")
    assert [(r.name, r.width, r.key) for r in plan.regions] == [("reg", width, ("k",))]
    assert run_fusions(graph, tmp_path, fusions=("manual",))["manual"]["out"] == sampled(ROWS, K)
    for fusion in ("none", "all", "mixed"):
        got = simulate(graph, fusion, tmp_path / f"sim-{fusion}", seed=width, chunks=(5, 11),
                       widths={"reg": width})
        assert got["out"] == sampled(ROWS, K), fusion


def test_region_rules_apply_to_a_new_kind():
    with pytest.raises(UsageError, match="operator 'smp' is stateful \\(sample\\)"):
        plan_for(sample_app(2, by=()).build(), "manual")
