"""``spadeopt run --verify-fission N``: the plan's parallel regions against width 1, on the
first N records of every source, before the real run.

A parallel region is legal by the state kind its operators declare. For the built-in
kinds spadeopt knows it; a custom operator's ``state="stateless"`` or
``state="partitioned", key=[...]`` is the author's word (as 002 trusts operator models),
and a wrong word gives wrong answers at width > 1 only. The check runs the app twice
through the same launcher as the run itself (same master, same generated code):

1. a width-1 reference, every operator fused into one PE (FALL: any fusion gives the
   width-1 answers, which the test suite checks for every app), and
2. the build that is about to run, with its regions at their widths,

each source ending after its first N records (a splittable source after the splits
that begin among them, so every width reads the same records). The sinks must match
line for line, in order. A difference stops the command with exit 1 naming the sink,
the first differing line and the custom operators in the regions with their declared
state kinds; the two runs' outputs are kept under ``BUILD/verify/`` to look at. A live
source (a broker, a socket, a folder) is refused: its first N records are not the same
twice.

Build-then-run orchestration (the reference is planned and generated here), so it sits
above ``deploy``, whose ``launcher.run_build`` runs both builds.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from spadeopt.connectors.declared import is_live
from spadeopt.deploy.options import RunOptions, SettingsChange
from spadeopt.errors import RunError, UsageError
from spadeopt.kinds import generator_of, kind_of
from spadeopt.model.graph import AppGraph
from spadeopt.plan.plan import Plan

MAX_LINES_SHOWN = 160  # characters of a differing line quoted in the error


def wide_regions(plan: Plan) -> list:
    return [r for r in plan.regions if r.width > 1]


def check_verifiable(graph: AppGraph, n: int) -> None:
    """Refuse ``--verify-fission N`` before anything is written: N must be a positive
    count and every source must replay the same records twice."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise UsageError(f"--verify-fission needs a positive number of records, got {n!r}")
    live = [op.name for op in graph.operators if (gen := generator_of(op)) is not None
            and is_live(gen.module, gen.qualname)]
    if live:
        raise UsageError(f"--verify-fission replays the first N records of every source twice, but source(s) "
                         f"{', '.join(repr(s) for s in live)} read a live stream, whose first records are not the "
                         f"same twice: verify on a recorded copy of the stream (a file source) instead")


def verify(graph: AppGraph, app_ref: str, plan: Plan, build_dir: Path, options: RunOptions, n: int) -> None:
    """Run ``build_dir`` (``plan``'s build) and a width-1 reference on the first ``n``
    records of every source; ``RunError`` naming the first difference."""
    from spadeopt.codegen.render import generate
    from spadeopt.deploy.launcher import run_build
    from spadeopt.optimize.strategies import plan_for

    regions = wide_regions(plan)
    say = options.say
    if not regions:
        say("--verify-fission: the plan has no parallel region wider than 1; nothing to verify")
        return
    work = Path(build_dir) / "verify"
    shutil.rmtree(work, ignore_errors=True)  # inside the build directory spadeopt claimed
    reference = plan_for(graph, "all", plan.nodes, plan.cores)
    ref_build = generate(graph, reference, work / "width1-build", app_ref)
    quiet = options.replace(out=None, checkpoints=None, duration=None, force=False)
    outs = {}
    for label, directory in (("width 1", ref_build.directory), ("the plan", Path(build_dir))):
        say(f"--verify-fission {n}: running {label} on the first {n:,} record(s) of every source")
        out = outs[label] = work / ("width1-out" if label == "width 1" else "plan-out")
        run_build(directory, quiet.replace(out=out), settings=SettingsChange(source_limit=n))
    problem = first_difference(outs["width 1"], outs["the plan"])
    if problem is None:
        shutil.rmtree(work, ignore_errors=True)
        say(f"--verify-fission {n}: every sink matches width 1 under regions "
            + ", ".join(f"{r.name} (width {r.width})" for r in regions))
        return
    customs = [(op.name, op.state, op.key) for r in regions for name in r.operators
               for op in [graph.op(name)] if kind_of(op).state_declared]
    suspects = ("; the regions' custom operators declare " + ", ".join(
        f"'{name}' state='{state}'" + (f" key={list(key)}" if key else "") for name, state, key in customs)
        + ": a custom operator whose state is not what it declares gives these differences (declare "
          "state='stateful', or the key its state is really partitioned by)") if customs else ""
    raise RunError(f"--verify-fission {n}: {problem} (regions "
                     + ", ".join(f"{r.name} at width {r.width}" for r in regions)
                     + f"){suspects}; both outputs are kept in {work}; meanwhile keep the region at width 1 "
                       f"(--width REGION=1, or `spadeopt optimize --no-fission`)")


def first_difference(width1: Path, plan: Path) -> str | None:
    """The first place where the sink files under ``plan`` differ from ``width1``'s.

    >>> import tempfile
    >>> a, b = Path(tempfile.mkdtemp()), Path(tempfile.mkdtemp())
    >>> _ = (a / "out.jsonl").write_text('{"k": 1}\\n{"k": 2}\\n'); _ = (b / "out.jsonl").write_text('{"k": 1}\\n{"k": 3}\\n')
    >>> first_difference(a, b)
    'sink \\'out\\' line 2: width 1 wrote {"k": 2}, the plan wrote {"k": 3}'
    """
    names = sorted({p.name for d in (width1, plan) for p in Path(d).glob("*.jsonl")})
    for name in names:
        want, got = (_lines(Path(d) / name) for d in (width1, plan))
        if want == got:
            continue
        sink = name.removesuffix(".jsonl")
        for i, (w, g) in enumerate(zip(want, got, strict=False), 1):
            if w != g:
                return f"sink '{sink}' line {i}: width 1 wrote {_clip(w)}, the plan wrote {_clip(g)}"
        shorter = "the plan" if len(got) < len(want) else "width 1"
        return (f"sink '{sink}': width 1 wrote {len(want):,} line(s), the plan {len(got):,} "
                f"({shorter} stops early)")
    return None


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _clip(line: str) -> str:
    return line if len(line) <= MAX_LINES_SHOWN else line[:MAX_LINES_SHOWN] + "..."
