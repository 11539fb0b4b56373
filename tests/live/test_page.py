"""The web page in real headless Chromium: served by ``serve`` with a state provider
whose numbers change at every call (the driver's change every second), every PE of the
plan appears as an SVG box with its live numbers, updated after the first poll; the
panels show sources, latency, checkpoints and restarts; a screenshot is kept in
out/test-artefacts/live-page.png for a person to look at."""

from __future__ import annotations

import re

import pytest

from spadeopt.live.server import serve
from tests.live.browser import by_id, dump_dom, keep, pe_numbers, requires_chromium, screenshot
from tests.live.states import Changing, plan
from tests.toolkit import netns

pytestmark = [pytest.mark.browser, requires_chromium]


def _rate(r: float) -> str:  # the page's fmtRate
    return f"{r / 1e6:.2f} M/s" if r >= 1e6 else f"{r / 1e3:.1f} k/s" if r >= 1e3 else f"{round(r):,}/s"


def _shown(p: dict) -> tuple[str, str]:
    return (f"in {_rate(p['rate_in'])}  ·  out {_rate(p['rate_out'])}",
            f"cpu {p['cpu']:.2f}  ·  busy {round(p['busy'] * 100)}%  ·  bp {round(p['backpressure'] * 100)}%")


def test_every_pe_of_the_plan_shows_its_live_numbers():
    states = Changing()
    lay = plan()
    with serve(states, lay) as srv:
        dom = dump_dom(srv.url, budget_ms=4000)
    assert states.calls >= 2, "the page polled the state more than once"
    boxes = pe_numbers(dom)
    assert set(boxes) == {b["pe"] for b in lay["boxes"]} == {"pe0", "pe1", "pe2"}
    shown_at = set()
    for pe, texts in boxes.items():
        assert texts["title"].startswith(pe)
        # the numbers of one state the server handed out, and not the first one: the page updates
        served = {n: _shown(next(p for p in s["pes"] if p["pe"] == pe)) for n, s in enumerate(states.served)}
        match = [n for n, (rate, cpu) in served.items() if (texts["pe-rate"], texts["pe-cpu"]) == (rate, cpu)]
        assert match, f"{pe}: {texts} is none of the served states' {served}"
        shown_at.add(match[0])
    assert len(shown_at) == 1 and shown_at != {0}
    n = shown_at.pop()
    assert boxes["pe0"]["classes"] == "pe bottleneck" and boxes["pe0"]["pe-flag"] == "★ bottleneck"
    assert "backpressure" in boxes["pe1"]["classes"] and boxes["pe1"]["pe-flag"] == "‖ backpressure"
    assert "down" in boxes["pe2"]["classes"]
    assert boxes["pe2"]["pe-queue"] == f"queued {200 + n + 1}  ·  restarts 2"
    assert len(re.findall(r'<g class="link( live)?" data-from', dom)) == 3 and "39.0 k/s" in dom and "38.0 k/s" in dom  # live link rates
    assert "100/s" in dom  # pe0 -> pe2 has no live rate: its planned label
    assert by_id(dom, "app") == "demo" and by_id(dom, "status") == "running"
    assert by_id(dom, "lat-p50") == "4.1 ms" and by_id(dom, "lat-p99") == "12 ms" and by_id(dom, "lat-count") == "40"
    assert by_id(dom, "ckpt-taken") == "3" and by_id(dom, "ckpt-bytes") == "20.0 KiB"
    assert by_id(dom, "ckpt-age") == "1.2 s" and by_id(dom, "restarts") == "1"
    assert by_id(dom, "bottleneck") == "pe0"
    assert by_id(dom, "adaptive-phase") == "2" and by_id(dom, "adaptive-switch").startswith("switched at checkpoint 4")
    assert "widths {'keyed': 2}" in by_id(dom, "adaptive-plan") and "1.98x" in by_id(dom, "adaptive-why")
    assert '<td class="source-rate">' + _rate(states.served[n]["sources"][0]["rate"]) + "</td>" in dom
    assert '<td class="source-lag">345</td>' in dom


@pytest.mark.skipif(netns.available() is not None, reason=str(netns.available()))
def test_the_page_sends_the_token_on(tmp_path):
    """Bound beyond loopback, a browser in another network namespace (a peer that is not
    loopback) needs the token: the page loads with ?token= and its files and API calls carry it."""
    states = Changing()
    with netns.peer_namespace() as (ip, in_peer), serve(states, plan(), host=ip) as srv:
        dom = dump_dom(srv.page_url, budget_ms=3000, prefix=in_peer)
        assert states.calls >= 1 and set(pe_numbers(dom)) == {"pe0", "pe1", "pe2"}
        without = dump_dom(srv.url, budget_ms=1500, prefix=in_peer)
    assert "pe0" not in without  # 401: no page at all


def test_screenshot(tmp_path):
    states = Changing()
    with serve(states, plan()) as srv:
        png = screenshot(srv.url, tmp_path / "live-page.png", size=(1400, 900))
    kept = keep(png, "live-page.png")
    import matplotlib.image as mpimg

    img = mpimg.imread(kept)
    assert img.shape[:2] == (900, 1400)
    # drawn, not blank: the header's dark blue and a busy PE's orange are both there
    rgb = (img[..., :3] * 255).round()
    dark = ((abs(rgb[..., 0] - 29) < 4) & (abs(rgb[..., 1] - 60) < 4) & (abs(rgb[..., 2] - 90) < 4)).mean()
    assert dark > 0.03, "the page's header is not drawn"
    assert states.calls >= 1


def test_without_a_plan_the_page_still_shows_the_job():
    states = Changing()
    with serve(states, {}) as srv:
        dom = dump_dom(srv.url, budget_ms=2500)
    assert "no plan picture for this run" in dom and pe_numbers(dom) == {}
    assert by_id(dom, "status") == "running" and "<td>pe1</td>" in dom  # the PE table
