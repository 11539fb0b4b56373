"""Live metrics of a real run (issue 38), through the entry point a user types.

``spadeopt run`` (real Spark in local mode, real PE processes) serves Prometheus metrics
and the job's page while it runs. The tests scrape ``/metrics`` over real HTTP during
the run: every documented metric is there for every PE of the build, counters only
grow, and the run's last counts equal its result. A request from a peer outside
loopback (a network namespace made here) without the run's token is refused.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from spadeopt.live.prometheus import METRICS
from tests.live.browser import dump_dom, keep, pe_numbers, requires_chromium, screenshot
from tests.toolkit import netns

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
URL = re.compile(r"live metrics: (http://\S+?/)(?:\?token=(\S+))? ")
# a chain of 4 opaque operators, one PE each: long enough to be scraped several times while it runs
CHAIN = ["apps/chain.py", "--fusion", "none", "-p", "n=4", "-p", "work=300", "-p", "tuples=400000"]
CHECKPOINT_METRICS = {m.name for m in METRICS if m.source.startswith("checkpoints.")}
# a bounded source has no lag, the chain's operators count no events, and a bottleneck is
# named only while a PE is at least half busy
OPTIONAL = {"spadeopt_source_lag_entries", "spadeopt_operator_events_total", "spadeopt_pe_bottleneck",
            "spadeopt_adaptive_phase"}  # and only an adaptive run has a phase


class Run:
    """``spadeopt run ...`` in the background; its live-metrics URL once it prints it."""

    def __init__(self, args: list[str], tmp: Path) -> None:
        self.json = tmp / "result.json"
        self.proc = subprocess.Popen([sys.executable, "-m", "spadeopt", "run", *args, "--json", str(self.json),
                                      "--build-dir", str(tmp / "build"), "--force"],
                                     cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self.url: str | None = None
        self.token: str | None = None
        self._found = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        self._out = ""
        threading.Thread(target=lambda: setattr(self, "_out", self.proc.stdout.read()), daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line)
            m = URL.search(line)
            if m and not self._found.is_set():
                self.url, self.token = m.group(1), m.group(2)
                self._found.set()
        self._found.set()

    def wait_url(self, timeout: float = 120) -> str:
        assert self._found.wait(timeout) and self.url, "no live-metrics URL printed:\n" + "".join(self.lines)
        return self.url

    def finish(self, timeout: float = 300) -> dict:
        code = self.proc.wait(timeout)
        assert code == 0, "".join(self.lines)[-4000:]
        return json.loads(self.json.read_text())

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


def _scrape(url: str) -> dict[tuple[str, tuple], float]:
    with urllib.request.urlopen(url + "metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[s.name, tuple(sorted(s.labels.items()))] = s.value
    return out


def _value(scrape: dict, name: str, **labels: str) -> float | None:
    want = set(labels.items())
    hits = [v for (n, ls), v in scrape.items() if n == name and want <= set(ls)]
    return sum(hits) if hits else None


def test_a_running_job_s_metrics_are_scraped_grow_and_end_at_the_run_s_result(tmp_path):
    run = Run(CHAIN, tmp_path)
    try:
        url = run.wait_url()
        scrapes = []
        while run.proc.poll() is None:
            try:
                scrapes.append(_scrape(url))
            except (urllib.error.URLError, ConnectionError):  # the run ended between poll and scrape
                break
            time.sleep(0.5)
        result = run.finish()
    finally:
        run.kill()
    deploy = json.loads((tmp_path / "build" / "deploy.json").read_text())
    pes = [p["pe"] for p in deploy["pes"]]
    assert len(pes) == 6
    running = [s for s in scrapes if _value(s, "spadeopt_job_info", status="running")]
    assert len(running) >= 3, f"only {len(running)} scrape(s) while running: the run was too short to watch"
    names = {n for n, _ in running[-1]}
    # every documented metric is exposed (a histogram and counters by their sample names)
    for m in METRICS:
        if m.name in CHECKPOINT_METRICS | OPTIONAL:
            continue
        sample = {"counter": m.name, "gauge": m.name, "histogram": m.name + "_count"}[m.type]
        assert sample in names, f"{m.name} missing from /metrics"
        if m.name.startswith("spadeopt_pe_") and m.name != "spadeopt_pe_bottleneck":  # one series per PE
            assert {_value(running[-1], sample, pe=pe) is not None for pe in pes} == {True}, m.name
    # counters only grow
    counters = [m.name for m in METRICS if m.type == "counter"]
    for before, after in zip(scrapes, scrapes[1:], strict=False):
        for (name, labels), v in before.items():
            if name in counters and (name, labels) in after:
                assert after[name, labels] >= v, (name, labels, v, after[name, labels])
    # something moved while it ran, and the work is seen where it is done
    assert _value(running[-1], "spadeopt_pe_cpu_seconds_total") > _value(running[0], "spadeopt_pe_cpu_seconds_total")
    assert _value(running[-1], "spadeopt_source_tuples_total") > 0
    # the run's last counts are its result
    live = result["live"]
    assert live["status"] == "done"
    assert {s["sink"]: s["tuples"] for s in live["sinks"]} == result["sinks"]
    assert sum(s["tuples"] for s in live["sources"]) == result["tuples"]
    last = {s["sink"]: s["tuples"] for s in live["sinks"]}
    for sink, n in last.items():
        assert _value(scrapes[-1], "spadeopt_sink_tuples_total", sink=sink) <= n
    by_pe = {p["pe"]: p for p in live["pes"]}
    assert by_pe[pes[0]]["tuples_out"] == result["tuples"]  # the source's PE sent every tuple on
    assert all(p["tuples_in"] == result["tuples"] for p in live["pes"][1:]), live["pes"]


@pytest.mark.skipif(netns.available() is not None, reason=str(netns.available()))
def test_a_peer_outside_loopback_needs_the_printed_token(tmp_path):
    with netns.peer_namespace() as (host, in_peer):
        run = Run([*CHAIN, "--metrics-host", host], tmp_path)
        try:
            url = run.wait_url()
            assert url.startswith(f"http://{host}:") and run.token, "".join(run.lines)
            for path, want in (("metrics", "401"), ("api/state", "401"), ("", "401"),
                               (f"metrics?token={run.token}", "200"), (f"?token={run.token}", "200")):
                got = in_peer("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", url + path)
                assert got.stdout == want, (path, got.stdout, got.stderr)
            bearer = in_peer("curl", "-s", "-H", f"Authorization: Bearer {run.token}", url + "api/state")
            assert json.loads(bearer.stdout)["app"] == "chain"
            run.finish()
        finally:
            run.kill()


@pytest.mark.browser
@requires_chromium
def test_the_job_s_page_in_a_real_browser_shows_every_pe_with_live_numbers(tmp_path):
    """The run is far longer than the look (Chromium may take many seconds on a loaded
    machine); once the page was read, the run is stopped (SIGTERM: cancelled, its PEs end)."""
    run = Run(["apps/chain.py", "--fusion", "none", "-p", "n=4", "-p", "work=300", "-p", "tuples=20000000"],
              tmp_path)
    try:
        url = run.wait_url()
        while _value(_scrape(url), "spadeopt_source_tuples_total") in (None, 0.0):  # the PEs are running
            time.sleep(0.2)
        shot = screenshot(url, tmp_path / "live-page.png", budget_ms=2500)
        dom = dump_dom(url, budget_ms=2500)
        still_running = _value(_scrape(url), "spadeopt_pe_up") == 6
        run.proc.send_signal(signal.SIGTERM)
        run.proc.wait(120)
    finally:
        run.kill()
    keep(shot, "live-page-run.png")
    assert still_running, "the PEs ended before the page was looked at: make the run longer"
    pes = [p["pe"] for p in json.loads((tmp_path / "build" / "deploy.json").read_text())["pes"]]
    boxes = pe_numbers(dom)
    assert sorted(boxes) == sorted(pes), (sorted(boxes), pes)
    live = [pe for pe, texts in boxes.items() if re.search(r"\d", texts.get("pe-rate", ""))
            and re.search(r"\d", texts.get("pe-cpu", ""))]
    assert sorted(live) == sorted(pes), boxes
    assert any(re.search(r"[1-9]", boxes[pe]["pe-rate"]) for pe in pes), "no PE shows a rate above 0"
    assert shot.stat().st_size > 10_000
