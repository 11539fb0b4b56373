"""The plan picture of a big plan fits a screen: bargain's FATM plan (204 operators,
44 candidate regions) is at most 3,000 px wide with every PE box drawn, the regions in
a legend (not the title), boundary reasons wrapped (not cut) and one rate label per link."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from spadeopt import api
from spadeopt.codegen.render import generate
from spadeopt.optimize.fatm import OperatorProfile, fuse_auto
from spadeopt.optimize.problem import LinearCommModel
from spadeopt.plan import picture
from tests.cli.clitools import cli


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG")
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def bargain_build(tmp_path_factory) -> Path:
    graph, ref = api.load_graph("apps/bargain.py", {})
    load = {op.name: 0.01 for op in graph.operators}
    prof = OperatorProfile(graph.name, graph.fingerprint, load,
                           tuple((s.src.op, s.dst.op, 10_000.0, 60.0) for s in graph.streams), 10_000.0)
    # links cheap enough that FATM's best plan has many PEs (at 2 us a tuple its model
    # ranks one PE best, and a one-box picture would test nothing)
    auto = fuse_auto(graph, prof, LinearCommModel(2e-7, 1e-9), nodes=1, cores=2, rate="max")
    out = tmp_path_factory.mktemp("bargain") / "build"
    generate(graph, auto.plan, out, ref)
    (out / "explain.json").write_text(json.dumps(auto.explain))
    return out


def test_bargain_plan_picture_fits_with_every_pe_and_a_legend(bargain_build, tmp_path, monkeypatch):
    drawn: list[set[str]] = []
    real = picture.to_png
    monkeypatch.setattr(picture, "to_png", lambda pic, path: drawn.append(real(pic, path)) or drawn[-1])
    png = tmp_path / "plan.png"
    proc = cli("explain", str(bargain_build), "--png", str(png))
    assert proc.returncode == 0, proc.stderr
    width, height = _png_size(png)
    assert width <= 3000, f"{width} px wide"
    pes = {p["pe"] for p in json.loads((bargain_build / "deploy.json").read_text())["pes"]}
    assert len(pes) > 5 and drawn == [pes]
    pic = picture.load_picture(bargain_build)
    assert len(pic.regions) == 44
    legend = picture._legend(pic, 100)
    assert legend[0] == "parallel regions (44), by width:" and all(len(x) <= 100 for x in legend)
    reasons = [c.split(": ", 1)[1] for c in pic.candidates if c.startswith("   | ")]
    assert reasons and not any(r.endswith("...") for r in reasons), "reasons are whole"
    long = next(r for r in reasons if len(r) > 100)
    wrapped = " ".join(x.strip() for x in picture._legend(picture.Picture("a", "auto", [], [], {},
                                                                           (f"   | op: {long}",)), 60)[1:])
    assert long in wrapped, "a long reason is wrapped onto several lines, every word kept"


def test_a_rate_label_sits_on_its_own_arrow_between_the_boxes():
    x, y = picture._label_at((4.1, 5.0), (5.9, 1.0), 0.15)
    assert 4.1 < x < 5.9 + 0.5 and 1.0 < y < 5.0  # between the two columns, on the curve
    assert picture._label_at((1.0, 0.0), (3.0, 0.0), 0.0) == (2.0, 0.0)


def test_explain_shows_each_kind_of_region_and_refusal_once_and_full_lists_all(bargain_build):
    short = cli("explain", str(bargain_build))
    full = cli("explain", str(bargain_build), "--full")
    assert short.returncode == full.returncode == 0, short.stderr + full.stderr
    assert len(short.stdout.splitlines()) < 80 < 200 < len(full.stdout.splitlines())
    cands = short.stdout.split("candidate regions discovered from the graph: 44\n", 1)[1]
    regions = [ln for ln in cands.splitlines() if ln.startswith("region '")]
    assert len(regions) == 2 and all("[and 21 more like it: " in ln for ln in regions)
    assert "region 'auto_g13_trade'" in full.stdout and "region 'auto_g13_trade'" not in short.stdout
