"""Real headless Chromium for the live page's tests (Debian's ``chromium``: ``make
chromium``). Reusable by any test that serves a page: ``dump_dom(url)`` is the DOM after
the page's JavaScript ran for ``budget_ms`` of virtual time, ``screenshot(url, path)`` a
PNG of it, ``pe_numbers(dom)`` the live numbers of every PE box of the plan drawing.

    @requires_chromium
    def test_x(...):
        dom = dump_dom(server.url)
        assert pe_numbers(dom)["pe0"]["pe-rate"].startswith("in ")
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTEFACTS = ROOT / "out" / "test-artefacts"  # screenshots kept for a person to look at after the run


def chromium() -> str | None:
    """The Chromium binary, or None when it is not installed."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


requires_chromium = pytest.mark.skipif(
    chromium() is None, reason="Chromium is not installed: `make chromium` (apt-get install chromium) "
                               "runs the browser tests")


def _run(args: list[str], timeout: float, prefix=None) -> subprocess.CompletedProcess:
    exe = chromium()
    if exe is None:
        pytest.skip("Chromium is not installed: `make chromium`")
    cmd = [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
           "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
           "--hide-scrollbars", *args]
    if prefix is not None:  # e.g. tests.toolkit.netns's run_in_peer: the browser on another host
        return prefix(*cmd, timeout=timeout)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def dump_dom(url: str, budget_ms: int = 4000, timeout: float = 60.0, prefix=None) -> str:
    """The page's DOM (serialized HTML) after its scripts ran ``budget_ms`` of virtual time
    (the page polls once a virtual second; network waits do not use the budget up);
    ``prefix``: runs the browser's command line instead (another network namespace)."""
    proc = _run([f"--virtual-time-budget={budget_ms}", "--dump-dom", url], timeout, prefix)
    assert proc.returncode == 0 and "<html" in proc.stdout, f"chromium failed: {proc.stderr[-2000:]}"
    return proc.stdout


def screenshot(url: str, path: Path, size: tuple[int, int] = (1400, 900), budget_ms: int = 4000,
               timeout: float = 60.0) -> Path:
    """A PNG of the page at ``size`` after ``budget_ms`` of virtual time."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    proc = _run([f"--virtual-time-budget={budget_ms}", f"--window-size={size[0]},{size[1]}",
                 f"--screenshot={path}", url], timeout)
    assert proc.returncode == 0 and path.is_file(), f"chromium failed: {proc.stderr[-2000:]}"
    return path


def keep(path: Path, name: str) -> Path:
    """Copy a screenshot to out/test-artefacts/NAME for a person to look at."""
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copyfile(path, ARTEFACTS / name))


_PE = re.compile(r'<g class="(pe[^"]*)" data-pe="([^"]+)"[^>]*>(.*?)</g>', re.S)
_TEXT = re.compile(r'<text class="([^"]*)"[^>]*>(.*?)</text>', re.S)


def pe_numbers(dom: str) -> dict[str, dict[str, str]]:
    """Every PE box of the plan drawing: {pe: {text class: text}}, e.g.
    ``{"pe0": {"pe-rate": "in 40.0 k/s  ·  out 39.0 k/s", "pe-cpu": ..., "pe-queue": ...,
    "title": "pe0  1.00 cores", "pe-flag": "★ bottleneck", "classes": "pe bottleneck"}}``
    (a text of several classes is keyed by each: "live pe-rate" -> "live" and "pe-rate")."""
    out: dict[str, dict[str, str]] = {}
    for classes, pe, body in _PE.findall(dom):
        texts: dict[str, str] = {"classes": classes}
        for cls, text in _TEXT.findall(body):
            for c in cls.split():
                texts.setdefault(c, html.unescape(text))
        out[html.unescape(pe)] = texts
    return out


def by_id(dom: str, id_: str) -> str | None:
    """The text of the element with this id (no nested elements), or None."""
    m = re.search(rf'id="{re.escape(id_)}"[^>]*>([^<]*)<', dom)
    return html.unescape(m.group(1)) if m else None
