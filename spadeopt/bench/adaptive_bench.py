"""``spadeopt bench adaptive APP``: what a switch of ``run --adaptive`` costs and gains.

For one app at the given parameters, side by side in one invocation on this machine:

1. **static FATM**: the app profiled under FALL (s = 0.01), refined, planned by FATM for
   1 x ``cores`` and run; its steady source rate is the reference (issue 39: "the
   adaptive run started from FALL without a profile ends within 10 % of FATM's
   throughput from a profiling run");
2. **adaptive**: ``run --adaptive`` (phase 1 under instrumented FALL for ``adapt_after``
   s, the switch at a checkpoint, phase 2 under the plan it chose).

Reported: the pause (the stopping checkpoint completed -> every new PE running) and its
parts (refine, plan; the warm-up before phase 1), the plan each phase ran, phase 1's and
phase 2's steady rates, phase 2's over static FATM's, and whether the sinks of the two
runs are identical (they must be): the file sinks byte for byte and every sink's count
(a counting sink has no file). One run of each: the 2-core VM is noisy, so a
rate ratio within ~10 % is noise.

    spadeopt bench adaptive apps/ysb.py -p tuples=20000000 --out OUT_DIR

Writes ``OUT_DIR/adaptive.json`` and ``adaptive.txt`` (runs under ``OUT_DIR``).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from spadeopt.atomic import write_atomic
from spadeopt.errors import UsageError

ADAPT_AFTER = 3.0  # s of phase 1 before the switch


def _digest(sinks: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(p for p in sinks.rglob("*.jsonl") if p.is_file()):
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def run(app_ref: str, out_dir: Path, params: Mapping[str, str] | None = None, cores: int = 2,
        adapt_after: float = ADAPT_AFTER, force: bool = False, log: Callable[[str], None] = print) -> dict[str, Any]:
    from spadeopt import adaptive, api
    from spadeopt.bench.compare import _profile_for_auto
    from spadeopt.deploy.options import RunOptions
    from spadeopt.output_paths import claim_dir, mark_dir

    out_dir = claim_dir(Path(out_dir), "bench-adaptive", "--out", force)
    out_dir.mkdir(parents=True, exist_ok=True)
    parts = ["adaptive.json", "adaptive.txt", "profile-run", "profile.json", "fatm", "fatm-out", "adaptive-work",
             "adaptive-out"]
    mark_dir(out_dir, "bench-adaptive", parts)
    for d in parts[2:]:
        p = out_dir / d
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
    options = RunOptions(progress=log)
    graph, _ = api.load_graph(app_ref, params)
    profile = _profile_for_auto(app_ref, out_dir, params, 1, cores, 0.01, "all", options)
    log("planning static FATM from the profile")
    build, explain = api.optimize(app_ref, profile, out_dir / "fatm", None, params, nodes=1, cores=cores)
    log(f"running static FATM ({len(explain['pes'])} PE(s))")
    static = api.run(str(out_dir / "fatm"), options=RunOptions(progress=log, out=out_dir / "fatm-out"))
    log(f"running --adaptive (phase 1 for {adapt_after:g} s)")
    adapt = adaptive.AdaptOptions(adapt_after=adapt_after)
    result, sw = adaptive.run_adaptive(app_ref, params, nodes=1, cores=cores, work=out_dir / "adaptive-work",
                                       options=RunOptions(progress=log, out=out_dir / "adaptive-out"), adapt=adapt)
    doc = {"app": graph.name, "app_ref": app_ref, "params": dict(params or {}), "cores": cores,
           "adapt_after_s": adapt_after, "switched": sw.switched, "reason": sw.reason, "pause_s": sw.pause_s,
           "timings": sw.timings, "refused": sw.refused, "decided_before_the_stop": sw.ahead,
           "phase1": {k: sw.before.get(k) for k in ("strategy", "pes", "widths", "steady_rate", "rate")},
           "phase2": {k: sw.after.get(k) for k in ("strategy", "pes", "widths", "steady_rate", "rate")},
           "static_fatm": {"pes": len(explain["pes"]), "widths": explain.get("fission", {}).get("widths"),
                           "steady_rate": static.steady_throughput, "rate": static.throughput},
           "sink_counts": {"static_fatm": dict(static.sinks), "adaptive": dict(result.sinks)},
           "answers_identical": _digest(out_dir / "fatm-out") == _digest(out_dir / "adaptive-out")
           and dict(static.sinks) == dict(result.sinks)}
    s2, sf = doc["phase2"]["steady_rate"], doc["static_fatm"]["steady_rate"]
    doc["phase2_over_static_fatm"] = (s2 / sf) if s2 and sf else None
    write_atomic(out_dir / "adaptive.json", json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n")
    write_atomic(out_dir / "adaptive.txt", table(doc) + "\n")
    return doc


def table(doc: Mapping[str, Any]) -> str:
    """The benchmark's figures as text."""
    t = doc["timings"]
    p1, p2, sf = doc["phase1"], doc["phase2"], doc["static_fatm"]

    def rate(x: Any) -> str:
        return f"{x:,.0f}/s" if isinstance(x, int | float) else "-"

    ratio = doc["phase2_over_static_fatm"]
    pause = f"{doc['pause_s']:.2f} s" if doc["pause_s"] is not None else "- (no switch)"
    return "\n".join([
        f"bench adaptive: {doc['app']} ({doc['app_ref']}) {doc['params']}, 1 x {doc['cores']} cores",
        f"switched {doc['switched']}: {doc['reason']}",
        f"pause {pause} ({'decided before the stop: ' if doc.get('decided_before_the_stop') else ''}refine "
        f"{t.get('refine_s', 0):.2f} s, plan {t.get('plan_s', 0):.2f} s; warm-up before phase 1 "
        f"{t.get('warm_up_s', 0):.2f} s)",
        f"phase 1 {p1['strategy']} ({p1['pes']} PE(s), instrumented): steady {rate(p1['steady_rate'])}",
        f"phase 2 {p2.get('strategy')} ({p2.get('pes')} PE(s), widths {p2.get('widths')}): steady "
        f"{rate(p2.get('steady_rate'))}",
        f"static FATM from a profiling run ({sf['pes']} PE(s), widths {sf['widths']}): steady "
        f"{rate(sf['steady_rate'])}",
        f"phase 2 / static FATM: {ratio:.2f}" if ratio else "phase 2 / static FATM: -",
        f"answers: {'identical sinks' if doc['answers_identical'] else 'SINKS DIFFER'} (counts "
        f"{doc['sink_counts']['adaptive']})",
        *(f"refused: {r}" for r in doc["refused"])])


def from_args(args, log: Callable[[str], None]) -> dict[str, Any]:
    """The registry's entry: ``spadeopt bench adaptive APP [-p K=V] [--cores N]``."""
    if not getattr(args, "app", None):
        raise UsageError("bench adaptive needs an app: spadeopt bench adaptive APP [-p KEY=VALUE]")
    return run(args.app, Path(args.out), args.params, cores=int(args.cores or 2), force=getattr(args, "force", False),
               log=log)
