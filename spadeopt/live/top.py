"""A running job on the terminal: ``render`` draws one screen of plain text from a state
dict; ``watch`` polls a job's ``URL/api/state`` every second and redraws it (``spadeopt
top URL``), until the job is done or failed, or its server goes away.

>>> print(render({"app": "a", "status": "running", "started": 0.0, "now": 75.0}).splitlines()[0])
a  RUNNING  elapsed 1m15s
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

CLEAR = "\x1b[H\x1b[2J"
ENDED = ("done", "failed")


def _rate(r: float | None) -> str:
    if r is None:
        return "-"
    return f"{r / 1e6:.2f}M/s" if r >= 1e6 else f"{r / 1e3:.1f}k/s" if r >= 1e3 else f"{r:,.0f}/s"


def _num(n: float | None) -> str:
    return "-" if n is None else f"{n:,.0f}"


def _pct(f: float | None) -> str:
    return "-" if f is None else f"{f * 100:.0f}%"


def _secs(s: float | None) -> str:
    if s is None:
        return "-"
    if s < 60:
        return f"{s:.1f}s"
    m, sec = divmod(int(s), 60)
    return f"{m // 60}h{m % 60:02d}m" if m >= 60 else f"{m}m{sec:02d}s"


def _bytes(b: float | None) -> str:
    if b is None:
        return "-"
    for unit in ("B", "KiB", "MiB"):
        if b < 1024:
            return f"{b:.0f}{unit}" if unit == "B" else f"{b:.1f}{unit}"
        b /= 1024
    return f"{b:.1f}GiB"


def _ms(ms: float | None) -> str:
    return "-" if ms is None else f"{ms:,.1f}ms"


def _table(header: Sequence[str], rows: list[list[str]], width: int) -> list[str]:
    """Columns right-aligned but the first, each as wide as its widest cell; cut at ``width``."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    out = []
    for r in [header, *rows]:
        cells = [str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))]
        out.append("  ".join(cells)[:width].rstrip())
    return out


def render(state: Mapping[str, Any], width: int = 100) -> str:
    """One screen: the job's header, its PEs (the bottleneck marked ``*``), sources, sinks,
    latency, the latest checkpoint and restarts."""
    s = state
    elapsed = (s["now"] - s["started"]) if s.get("now") is not None and s.get("started") is not None else None
    head = f"{s.get('app') or '?'}  {str(s.get('status') or '?').upper()}  elapsed {_secs(elapsed)}"
    if s.get("strategy"):
        head += f"  strategy {s['strategy']}"
    lines = [head[:width]]
    nodes = s.get("nodes") or []
    if nodes:
        lines.append(("nodes: " + ", ".join(f"{n.get('node')}={n.get('host') or '?'}" for n in nodes))[:width])
    lines += ["", *_pe_lines(s, width), ""]
    sources = s.get("sources") or []
    lines += _table(["source", "rate", "tuples", "lag"],
                    [[x.get("source", "?"), _rate(x.get("rate")), _num(x.get("tuples")),
                      _num(x.get("lag")) if x.get("lag") is not None else ("?" if x.get("live") else "-")]
                     for x in sources], width) if sources else ["sources: none reported yet"]
    sinks = s.get("sinks") or []
    if sinks:
        lines += ["", *_table(["sink", "rate", "tuples"], [[x.get("sink", "?"), _rate(x.get("rate")),
                                                             _num(x.get("tuples"))] for x in sinks], width)]
    lines += ["", *_footer(s, width)]
    return "\n".join(lines)


def _pe_lines(s: Mapping[str, Any], width: int) -> list[str]:
    pes = s.get("pes") or []
    if not pes:
        return ["PEs: none reported yet"]
    rows = []
    for p in pes:
        mark = "*" if p.get("pe") == s.get("bottleneck") else " "
        down = "" if p.get("up", True) else " (done)" if p.get("done") else " (down)"
        rows.append([f"{mark}{p.get('pe', '?')}{down}", str(p.get("node", "?")), _rate(p.get("rate_in")),
                     _rate(p.get("rate_out")), "-" if p.get("cpu") is None else f"{p['cpu']:.2f}",
                     _pct(p.get("busy")), _pct(p.get("backpressure")), _num(p.get("queued")),
                     _num(p.get("restarts"))])
    out = _table([" PE", "node", "in/s", "out/s", "CPU", "busy", "backpr", "queued", "restarts"], rows, width)
    if s.get("bottleneck"):
        out.append(f"* bottleneck: {s['bottleneck']}")
    return out


def _footer(s: Mapping[str, Any], width: int) -> list[str]:
    lat, ck = s.get("latency"), s.get("checkpoints")
    out = [f"latency   p50 {_ms(lat.get('p50_ms'))}  p99 {_ms(lat.get('p99_ms'))}  ({_num(lat.get('count'))} markers)"
           if lat else "latency   -"]
    out.append(f"checkpoint #{ck.get('last_id', '?')} of {_num(ck.get('taken'))}: took "
               f"{_secs(ck.get('last_duration_s'))}, {_bytes(ck.get('last_bytes'))}, {_secs(ck.get('age_s'))} ago"
               if ck else "checkpoint off")
    out.append(f"restarts  {_num(s.get('restarts') or 0)}")
    ad = s.get("adaptive")
    if ad:
        out.append(f"adaptive  phase {ad.get('phase', '?')}: {ad.get('plan', '')}")
        out += [f"          {ad[k]}" for k in ("switch", "why") if ad.get(k)]
    return [x[:width] for x in out]


def fetch(url: str, token: str | None = None, timeout: float = 5.0) -> dict[str, Any]:
    """The state at ``url`` (a job's server: ``http://HOST:PORT/``, or its /api/state)."""
    import urllib.request

    target = url if url.rstrip("/").endswith("/api/state") else url.rstrip("/") + "/api/state"
    req = urllib.request.Request(target, headers={"Authorization": f"Bearer {token}"} if token else {})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


def watch(url: str, token: str | None = None, interval: float = 1.0, once: bool = False,
          out: TextIO | None = None) -> int:
    """Poll ``url`` and redraw every ``interval`` seconds (clearing the screen when ``out``
    is a terminal, else screens one after the other, a blank line between) until the job
    is done or failed (its last screen shown), or the server goes away. Returns the exit
    code: 0, or 1 when the job failed or went away without being done."""
    import urllib.error

    out = out or sys.stdout
    tty = out.isatty() if hasattr(out, "isatty") else False
    status, first = None, True
    while True:
        try:
            state = fetch(url, token)
        except urllib.error.HTTPError as exc:
            if exc.code == 401:
                out.write(f"{url}: 401, the job's server wants its token: spadeopt top URL --token TOKEN\n")
                return 2
            out.write(f"{url}: HTTP {exc.code}\n")
            return 1
        except (OSError, ValueError) as exc:  # refused, reset, timed out, not JSON: the job is gone
            if status is None:
                out.write(f"cannot reach {url}: {exc}\n")
                return 1
            out.write(f"the job's server went away (last status: {status})\n")
            return 0 if status == "done" else 1
        status = state.get("status")
        screen = render(state, shutil.get_terminal_size((100, 40)).columns if tty else 100)
        out.write((CLEAR if tty else "" if first else "\n") + screen + "\n")
        out.flush()
        first = False
        if once or status in ENDED:
            return 1 if status == "failed" else 0
        time.sleep(interval)
