"""The FATM speed benchmark runs and writes its figures (timings are never asserted, only
that each case ran and what it planned)."""

from __future__ import annotations

import json

from spadeopt.bench.fatm_speed import chain_app, run


def test_fatm_speed_writes_one_row_per_size_cores_and_discovery(tmp_path):
    doc = run(tmp_path, sizes=(30,), cores_list=(2,), log=lambda *_: None, discovery_app="apps/outlier.py",
              many_cores=((30, 4),))
    off, on = doc["runs"]
    assert [off["discover"], on["discover"]] == [False, True]
    for row in (off, on):
        assert row["operators"] == 30 and row["cores"] == 2 and row["seconds"] > 0 and row["pes"] >= 1
    assert set(on["widths"]) > set(off["widths"]) == {"reg"}, "discovery adds the chain's regions"
    assert doc["discovery"]["checks"] > 0 and doc["discovery"]["cpu_seconds"] >= 0
    assert json.loads((tmp_path / "optimizer_fatm_speed.json").read_text())["runs"] == doc["runs"]
    assert len(chain_app(30).operators) == 30
    (many,) = doc["many_cores"]
    assert many["operators"] == 30 and many["cores"] == 4 and many["cpu_seconds"] > 0 and many["pes"] >= 1
