"""What every entry point prints on the terminal, and how it ends a command.

``cli`` (``spadeopt ...``) and ``submit`` (the application spark-submit runs) share
these: status lines redrawn in place, the result table, and ``guarded``, which turns a
``SpadeoptError`` into its message and exit code and always stops Spark.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable

from spadeopt.errors import SpadeoptError

_last_status = [0.0]


def progress(msg: str) -> None:
    """Status lines start with \\r: redrawn in place on a terminal, every 10 s otherwise."""
    if msg.startswith("\r"):
        if sys.stderr.isatty():
            print(msg, end="", file=sys.stderr, flush=True)
        elif time.time() - _last_status[0] >= 10:
            print(f"[spadeopt] {msg[1:].strip()}", file=sys.stderr, flush=True)
            _last_status[0] = time.time()
        return
    if sys.stderr.isatty():
        print("\r\033[K", end="", file=sys.stderr)
    print(f"[spadeopt] {msg}", file=sys.stderr, flush=True)


def result_table(result) -> str:
    rows = [("app", result.app), ("strategy", result.strategy), ("master", result.master),
            ("PEs", str(result.pes)), ("nodes used", f"{result.nodes_used} of {result.nodes} (executors that ran PEs)"),
            ("source tuples", f"{result.tuples:,}"), ("throughput", f"{result.throughput:,.0f} tuples/s"),
            ("wall time", f"{result.wall_s:.2f} s")]
    rows += [(f"sink {k}", f"{v:,} tuples") for k, v in result.sinks.items()]
    late = {op: c["late"] for op, c in (getattr(result, "operators", None) or {}).items() if "late" in c}
    if late:  # every event-time window, also when it dropped nothing
        rows.append(("late tuples", ", ".join(f"{op} {n:,}" for op, n in late.items())
                     + " (dropped by event-time windows: older than allowed_lateness; late=True sends them on)"))
    lat = getattr(result, "latency", None)
    if lat:
        rows.append(("latency", f"p50 {lat['p50_ms']:,.1f} ms, p99 {lat['p99_ms']:,.1f} ms, max {lat['max_ms']:,.1f} ms "
                                f"(source -> sink, {lat['markers']:,} markers)"))
        if lat.get("backlog_sources"):
            rows.append(("", f"includes the backlog read at the start: {', '.join(lat['backlog_sources'])} "
                             f"started at the beginning of its stream(s) (start=\"beginning\", the default), so "
                             f"entries waiting there count from when they were added; start=\"end\" reads only "
                             f"new entries"))
    for name, rep in getattr(result, "connectors", {}).items():
        if "lag" in rep:  # a live source: where it stopped, and what was left behind it
            lag = "?" if rep["lag"] is None else f"{rep['lag']:,}"
            rows.append((f"source {name}", f"lag {lag} at the end; position {json.dumps(rep['position'])[:120]}"))
    if getattr(result, "stopped_by", None):
        rows.append(("ended by", {"request": "a stop request (Ctrl-C / SIGTERM): sources ended, tuples drained, "
                                  "sinks flushed", "duration": "--duration: sources ended, tuples drained, "
                                  "sinks flushed"}.get(result.stopped_by, result.stopped_by)))
    refused = {p["pe"]: sum(p.get("refused", {}).values()) for p in result.per_pe}
    if any(refused.values()):
        rows.append(("refused connections", ", ".join(f"{pe} {n}" for pe, n in refused.items() if n)
                     + " (not of this run; see the PE logs)"))
    width = max(len(k) for k, _ in rows)
    lines = [f"{k.ljust(width)}  {v}" for k, v in rows]
    lines.append("")
    lines.append(f"{'PE'.ljust(6)} {'node':>4} {'CPU s':>8} {'wall s':>8}  host / executor (where it ran)")
    for p in result.per_pe:
        lines.append(f"{p['pe'].ljust(6)} {p['node']:>4} {p['cpu_s']:>8.2f} {p['wall_s']:>8.2f}  "
                     f"{p.get('host', '?')} / {p.get('executor', '?')}")
    lines += ["", "throughput: source tuples / the time from the first source tuple to the last PE's end (the app",
              "at work); wall time also counts starting the PEs, so it is longer than tuples / throughput"]
    return "\n".join(lines)


def show_result(result) -> None:
    """A run's warnings on stderr (each once: ``runtime.metrics``), then its result table."""
    for w in getattr(result, "warnings", None) or ():
        print(f"spadeopt: WARNING: {w}", file=sys.stderr)
    print(result_table(result))


def end_status() -> None:
    if sys.stderr.isatty():
        print("\r\033[K", end="", file=sys.stderr, flush=True)


def guarded(command: Callable[[], int]) -> int:
    """Run ``command`` as every entry point does: a SpadeoptError becomes its message and
    exit code, Ctrl-C (or SIGTERM) exit 130, and Spark is stopped either way."""
    try:
        return command()
    except SpadeoptError as exc:
        stop_spark()
        print(f"spadeopt: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("spadeopt: interrupted", file=sys.stderr)
        return 130
    finally:
        stop_spark()


def stop_spark() -> None:
    """Stop this process's Spark session, if it ever started one."""
    if "pyspark" in sys.modules:
        from spadeopt.deploy import spark_session

        spark_session.stop_spark()
