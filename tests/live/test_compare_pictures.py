"""``spadeopt compare`` writes each strategy's plan picture beside its build (the drawing
step, without running Spark; tests/bench/test_compare.py checks it in a real compare)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from spadeopt import api
from spadeopt.bench.compare import draw_plans


def test_each_built_strategy_gets_its_plan_picture(tmp_path: Path):
    builds = {st: api.build("apps/chain.py", st, {"n": "2"}, 1, 2, tmp_path / f"build-{st}") for st in ("none", "all")}
    builds["manual"] = SimpleNamespace(directory=tmp_path / "not-a-build")  # unreadable: said and skipped
    said: list[str] = []
    drawn = draw_plans(builds, tmp_path, said.append)
    assert drawn == {"none": "plan-none.png", "all": "plan-all.png"}
    assert all((tmp_path / n).read_bytes().startswith(b"\x89PNG") for n in drawn.values())
    assert len(said) == 1 and said[0].startswith("FMAN: no plan picture")
