"""The FATM speed benchmark runs and writes its figures (timings are never asserted)."""

from __future__ import annotations

import json

from spadeopt.bench.fatm_speed import chain_app, run


def test_fatm_speed_writes_one_row_per_size_and_cores(tmp_path):
    doc = run(tmp_path, sizes=(30,), cores_list=(2,), log=lambda *_: None)
    (row,) = doc["runs"]
    assert row["operators"] == 30 and row["cores"] == 2 and row["seconds"] > 0 and row["pes"] >= 1
    assert json.loads((tmp_path / "optimizer_fatm_speed.json").read_text())["runs"] == doc["runs"]
    assert len(chain_app(30).operators) == 30
