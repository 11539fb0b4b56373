"""docs/guide.md's app (apps/clicks.py): its code is the guide's, it builds, and it runs
end to end on local Spark with the same answers fused and unfused, which plain Python
computes too."""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
from pathlib import Path

import pytest

from tests.cli.clitools import cli

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("guide_clicks", ROOT / "apps" / "clicks.py")
guide_app = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(guide_app)  # the top-level `apps` in tests is tests/apps: load the file itself
GUIDE = (ROOT / "docs" / "guide.md").read_text()
APP = (ROOT / "apps" / "clicks.py").read_text()


def _code_lines(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        line = re.sub(r"\s+#.*$", "", line).strip()
        if line and line != "..." and not line.startswith("#"):
            out.append(line)
    return out


def test_the_guide_s_python_is_the_app_s():
    """Every line of the guide's steps 1-5 is a line of apps/clicks.py (comments aside),
    so the file the test runs is the code the guide shows."""
    steps = GUIDE.split("## 1.", 1)[1].split("## 6.", 1)[0]
    app_lines = set(_code_lines(APP))
    missing = [ln for _, code in re.findall(r"```(python)\n(.*?)```", steps, flags=re.S)
               for ln in _code_lines(code) if ln not in app_lines]
    assert not missing, f"guide lines not in apps/clicks.py: {missing}"


def test_the_guide_s_commands_use_only_options_that_exist():
    from spadeopt.cli import parser

    for _, code in re.findall(r"```(sh)\n(.*?)```", GUIDE, flags=re.S):
        for line in code.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words[:1] == ["spadeopt"]:
                parser().parse_args(words[1:])


def test_the_app_builds_fused_and_live():
    from spadeopt import api

    graph, _ = api.load_graph("apps/clicks.py", {"n": "100"})
    assert {op.name for op in graph.operators} == {"clicks", "humans", "enrich", "per_user", "sessionize",
                                                   "per_user_out", "sessions_out", "late_clicks"}
    live, _ = api.load_graph("apps/clicks.py", {"live": "true"})
    assert live.op("clicks").params != graph.op("clicks").params


def expected(n: int, window: float = 60.0, gap: float = 30.0) -> tuple[list[dict], list[dict]]:
    """The app's two answers in plain Python."""
    rows = [r for r in guide_app.clicks(n, 50, 1) if not guide_app.is_bot(r[3])]
    wins: dict[tuple, list] = {}
    for user, ts, _page, _agent, dwell in rows:
        k = (int(ts // window), user)
        w = wins.setdefault(k, [0, 0.0, dwell])
        w[0], w[1], w[2] = w[0] + 1, w[1] + dwell, max(w[2], dwell)
    per_user = [{"user": u, "start": k * window, "clicks": c, "dwell": d, "longest": m}
                for (k, u), (c, d, m) in wins.items()]
    sessions, open_ = [], {}
    for user, ts, *_ in rows:
        s = open_.get(user)
        if s is not None and ts - s[1] > gap:
            sessions.append({"user": user, "start": s[0], "end": s[1], "clicks": s[2]})
            s = None
        if s is None:
            open_[user] = [ts, ts, 1]
        else:
            s[1], s[2] = ts, s[2] + 1
    sessions += [{"user": u, "start": a, "end": b, "clicks": c} for u, (a, b, c) in open_.items()]
    return per_user, sessions


def _key(r: dict) -> tuple:
    return tuple(sorted(r.items()))


@pytest.mark.spark
def test_the_guide_s_app_runs_end_to_end_with_the_same_answers_fused_and_unfused(tmp_path):
    (tmp_path / "apps").symlink_to(ROOT / "apps")
    step5 = GUIDE.split("## 5.", 1)[1].split("## 6.", 1)[0]
    (sh,) = re.findall(r"```sh\n(.*?)```", step5, flags=re.S)
    runs = [shlex.split(ln, comments=True) for ln in sh.splitlines() if ln.startswith("spadeopt run")]
    assert [w[w.index("--fusion") + 1] for w in runs] == ["all", "none"]
    outs = []
    for words in runs:
        proc = cli(*words[1:], "-p", "n=3000", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        outs.append(tmp_path / words[words.index("--out") + 1])
    for sink in ("per_user_out", "sessions_out"):
        assert (outs[0] / f"{sink}.jsonl").read_bytes() == (outs[1] / f"{sink}.jsonl").read_bytes()
    per_user, sessions = expected(3000)
    got = [json.loads(r) for r in (outs[0] / "per_user_out.jsonl").read_text().splitlines()]
    assert sorted(map(_key, got)) == sorted(map(_key, per_user))
    got = [json.loads(r) for r in (outs[0] / "sessions_out.jsonl").read_text().splitlines()]
    assert sorted(map(_key, got)) == sorted(map(_key, sessions))
    assert len(sessions) > 50 and len(per_user) > 100


@pytest.mark.spark
def test_the_guide_s_live_step_own_producer_in_live_run_out_and_reading_the_sink(tmp_path):
    """Step 7 as written: a plain redis-py producer, a live run ended by --duration (its
    windows and sessions closed at the end), the output streams read back: the same rows
    as plain Python computes."""
    import subprocess
    import sys
    import uuid

    from spadeopt.deploy import broker

    if broker.status() is None:
        pytest.fail("the Redis broker is not running: start it with `make broker`", pytrace=False)
    stream = f"spadeopt-test:clicks-{uuid.uuid4().hex[:8]}"
    r = guide_app._redis()
    try:
        py = [sys.executable, "-m", "apps.clicks"]
        done = subprocess.run([*py, "produce", "--count", "3000", "--stream", stream], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and f"wrote 3000 clicks to stream '{stream}'" in done.stdout, done.stderr
        proc = cli("run", "apps/clicks.py", "-p", "live=true", "-p", f"stream={stream}", "--fusion", "all",
                   "--duration", "6", "--build-dir", str(tmp_path / "b"))
        assert proc.returncode == 0, proc.stderr
        assert "ended by" in proc.stdout and "includes the backlog read at the start: clicks" in proc.stdout
        shown = subprocess.run([*py, "show", "--stream", stream], cwd=ROOT, capture_output=True, text=True,
                               timeout=60)
        assert shown.returncode == 0 and f"{stream}:sessions" in shown.stdout, shown.stderr
        per_user, sessions = expected(3000)
        for key, want in ((f"{stream}:per_user", per_user), (f"{stream}:sessions", sessions)):
            got = [json.loads(f[b"value"]) for _, f in r.xrange(key)]
            assert sorted(map(_key, got)) == sorted(map(_key, want)), key
    finally:
        r.delete(stream, f"{stream}:per_user", f"{stream}:sessions")


def test_the_guide_s_late_clicks_are_counted_and_an_allowed_lateness_keeps_them(tmp_path, monkeypatch):
    """Step 3, "Late data", as written: ``-p jitter=90`` makes some clicks late (counted,
    warned of, in ``late_clicks``); ``-p lateness=90`` keeps every click in the rows."""
    from spadeopt import api
    from spadeopt.runtime.loader import APP_ENV, canonical_ref
    from tests.toolkit.harness import simulate

    monkeypatch.setenv(APP_ENV, canonical_ref("apps/clicks.py:app"))
    humans = sum(not guide_app.is_bot(r[3]) for r in guide_app.clicks(3000, 50, 1, 90.0))
    runs = {}
    for extra in ({}, {"lateness": "90"}):
        graph, _ = api.load_graph("apps/clicks.py", {"n": "3000", "jitter": "90", **extra})
        counted: dict = {}
        sinks = simulate(graph, "all", tmp_path / str(len(extra)), counters=counted)
        runs[bool(extra)] = (counted, sinks)
    counted, sinks = runs[False]
    assert counted["per_user"]["late"] == len(sinks["late_clicks"]) > 100
    assert counted["warnings"][0].startswith("source 'clicks': event time 'ts' went back by at least")
    assert sum(r["clicks"] for r in sinks["per_user_out"]) + len(sinks["late_clicks"]) == humans
    counted, sinks = runs[True]
    assert counted["per_user"]["late"] == 0 and sinks["late_clicks"] == [] and not counted["warnings"]
    assert sum(r["clicks"] for r in sinks["per_user_out"]) == humans
