"""One drawing: the plan picture's layout is computed once (``picture.layout``); the PNG
draws it and the live page gets it as JSON (``plan_layout``, ``/api/plan``)."""

from __future__ import annotations

import json
from pathlib import Path

from spadeopt.plan import picture
from tests.live.states import plan


def _pic() -> picture.Picture:
    return picture.Picture("demo", "auto", [[picture.PEBox("pe0", 0, ("src", "f"), 0.4),
                                             picture.PEBox("pe1", 0, ("g__1",), None)],
                                            [picture.PEBox("pe2", 1, ("agg", "out"), 0.3)]],
                           [("pe0", "pe1", "1,000/s"), ("pe1", "pe2", "900/s"), ("pe2", "pe0", "2 streams")],
                           {"g": 2})


def test_the_layout_places_every_pe_and_link_and_its_json_is_plain():
    lay = picture.layout(_pic())
    assert [b.pe for b in lay.boxes] == ["pe0", "pe1", "pe2"] and [c.node for c in lay.columns] == [0, 1]
    b0, b1, b2 = lay.boxes
    assert b0.x == b1.x < b2.x and b1.y + b1.h < b0.y  # pe1 under pe0 in node 0's column
    assert b0.title == "pe0  0.40 cores" and b1.title == "pe1" and b1.lines[0][0] == "g@1" and b1.lines[0][3]
    for a in lay.arrows:
        (x1, y1), (cx, cy), (x2, y2) = a.start, a.ctrl, a.end
        mid = ((x1 + 2 * cx + x2) / 4, (y1 + 2 * cy + y2) / 4)  # the Bezier's middle: the label sits on it
        assert a.label_at is not None and all(abs(p - q) < 1e-9 for p, q in zip(mid, a.label_at, strict=True))
    same = next(a for a in lay.arrows if (a.src, a.dst) == ("pe0", "pe1"))
    assert abs(same.start[0] - (b0.x + b0.w)) < 1e-9 and same.start[0] == same.end[0]
    assert same.ctrl[0] > same.start[0] and same.rad == -0.35  # downwards: a loop out on the right
    doc = lay.to_json()
    assert doc["kind"] == "spadeopt-plan-layout" and json.loads(json.dumps(doc)) == doc
    assert doc["legend"][0] == "parallel regions (1), by width:"


def test_live_rows_make_each_box_taller_and_nothing_else_moves_sideways():
    flat, live = picture.layout(_pic()), picture.layout(_pic(), live_lines=3)
    for a, b in zip(flat.boxes, live.boxes, strict=True):
        assert abs(b.h - a.h - 3 * picture.LINE_H) < 1e-9 and a.x == b.x and a.w == b.w
        assert a.live_at is None and b.live_at is not None and b.live_at[1] > b.y
    assert flat.width == live.width and len(plan()["boxes"]) == 3


def test_to_png_draws_the_layout(tmp_path: Path):
    drawn = picture.to_png(_pic(), tmp_path / "p.png")
    assert drawn == {"pe0", "pe1", "pe2"} and (tmp_path / "p.png").read_bytes().startswith(b"\x89PNG")


def test_plan_layout_of_a_build(tmp_path: Path):
    from spadeopt import api

    b = api.build("apps/chain.py", "none", {"n": "2"}, 2, 1, tmp_path / "b")
    doc = picture.plan_layout(b.directory)
    assert {x["pe"] for x in doc["boxes"]} == {p.pe_id for p in b.plan.pes}
    assert all(x["live_at"] for x in doc["boxes"]) and len(doc["columns"]) == 2
    assert {(a["src"], a["dst"]) for a in doc["arrows"]} == {("pe0", "pe1"), ("pe1", "pe2"), ("pe2", "pe3")}
