"""The ``spadeopt`` command line: parse arguments, call one library function, print.

Exit codes: 0 success, 1 a job failed while running, 2 bad input (invalid app,
arguments, files), 130 interrupted (a run of an app with a live, unbounded source ends
on Ctrl-C / SIGTERM with 0: drained and flushed, its normal end).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from spadeopt.cli_services import SERVICE_PARSERS
from spadeopt.console import end_status, guarded, progress, show_result
from spadeopt.errors import UsageError
from spadeopt.optimize.strategies import STRATEGY_BY_NAME, fusion_help, selectable

if TYPE_CHECKING:
    from spadeopt.deploy.options import RunOptions


def _params(pairs: list[str] | None) -> dict[str, str]:
    out = {}
    for p in pairs or []:
        key, sep, value = p.partition("=")
        if not sep or not key:
            raise UsageError(f"-p expects KEY=VALUE, got '{p}'")
        out[key.strip()] = value.strip()
    return out


def _conf(pairs: list[str] | None) -> dict[str, str]:
    """``--conf KEY=VALUE`` pairs for Spark (as spark-submit takes them)."""
    out = {}
    for p in pairs or []:
        key, sep, value = p.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--conf expects KEY=VALUE (a Spark setting), got '{p}'")
        out[key.strip()] = value
    return out


def _options(args: argparse.Namespace) -> RunOptions:
    """The run options of ``run`` / ``profile`` / ``compare``, from their flags (one place)."""
    from spadeopt.deploy.options import RunOptions

    return RunOptions(master=getattr(args, "master", None), conf=_conf(getattr(args, "conf", None)),
                      out=getattr(args, "out", None) if args.command == "run" else None,
                      force=getattr(args, "force", False), progress=progress,
                      insecure_links=getattr(args, "insecure_links", False),
                      stall_timeout=getattr(args, "stall_timeout", None), duration=getattr(args, "duration", None),
                      max_batch_delay=_ms(getattr(args, "max_batch_delay", None)),
                      batch_size=getattr(args, "batch_size", None),
                      checkpoints=_checkpoints(args) if args.command == "run" else None,
                      verify_fission=getattr(args, "verify_fission", None),
                      metrics_port=None if args.command != "run" or args.no_metrics else args.metrics_port,
                      metrics_host=getattr(args, "metrics_host", "127.0.0.1"),
                      on_live=_live_view if getattr(args, "live", False) else None)


def _live_view(server) -> None:
    """``run --live``: ``spadeopt top`` of this run, on a thread, until the run ends."""
    import threading

    from spadeopt.live.top import watch

    threading.Thread(target=watch, args=(server.url,), kwargs={"token": server.token}, daemon=True,
                     name="live-view").start()


def checkpoint_args(p: argparse.ArgumentParser) -> None:
    """Issue 29: consistent checkpoints, automatic restarts, exactly-once file sinks."""
    p.add_argument("--checkpoint-interval", type=float, metavar="S",
                   help="take a consistent checkpoint every S seconds (builds the PEs with state hooks)")
    p.add_argument("--checkpoint-dir", type=Path, metavar="DIR", help="where checkpoints and committed sink "
                   "lines are kept (needed with --checkpoint-interval; must be new or empty)")
    p.add_argument("--checkpoints-kept", type=int, default=3, metavar="K", help="complete checkpoints kept (3)")
    p.add_argument("--restart-attempts", type=int, default=3, metavar="N",
                   help="with checkpoints: restart from the last complete one up to N times (3)")
    p.add_argument("--resume", type=Path, metavar="DIR", help="resume from the last complete checkpoint in DIR")


def _checkpoints(args: argparse.Namespace):
    from spadeopt.deploy.checkpointed_run import CheckpointOptions
    from spadeopt.errors import UsageError

    interval, resume = getattr(args, "checkpoint_interval", None), getattr(args, "resume", None)
    if interval is None and resume is None:
        return None
    directory = resume or getattr(args, "checkpoint_dir", None)
    if directory is None:
        raise UsageError("--checkpoint-interval needs --checkpoint-dir DIR (where checkpoints are kept)")
    if resume is not None and args.checkpoint_dir is not None and args.checkpoint_dir != resume:
        raise UsageError("--resume DIR is the checkpoint directory: drop --checkpoint-dir or give the same one")
    return CheckpointOptions(interval if interval is not None else 1.0, Path(directory), args.checkpoints_kept,
                             args.restart_attempts, resume is not None)


def _ms(value: float | None) -> float | None:
    return None if value is None else value / 1000.0


def parse_widths(pairs: list[str] | None) -> dict[str, int]:
    """``["REGION=K", ...]`` from the command line."""
    out: dict[str, int] = {}
    for pair in pairs or []:
        name, sep, value = pair.partition("=")
        try:
            if not sep:
                raise ValueError
            out[name.strip()] = int(value)
        except ValueError:
            raise UsageError(f"--width expects REGION=K with an integer K, got {pair!r}") from None
    return out


def cmd_run(args: argparse.Namespace) -> int:
    from spadeopt import api
    from spadeopt.output_paths import claim_file

    if args.json:
        claim_file(args.json, "result", "--json", args.force)
    if args.adaptive or args.adapt_after is not None or args.max_switches is not None:
        return _run_adaptive(args)
    result = api.run(args.app, args.fusion, _params(args.p), nodes=args.nodes, cores=args.cores,
                     build_dir=args.build_dir, widths=parse_widths(args.width), collapse=not args.no_collapse,
                     options=_options(args))
    end_status()
    show_result(result)
    if args.json:
        api.write_json(args.json, {"kind": "spadeopt-run-result", **result.to_json()})
    return 0


def _run_adaptive(args: argparse.Namespace) -> int:
    """``run --adaptive``: the logic is ``spadeopt.adaptive``'s; here only its flags."""
    from spadeopt import adaptive, api

    if not args.adaptive:
        raise UsageError("--adapt-after and --max-switches are --adaptive's settings: add --adaptive")
    fusion = args.fusion if args.fusion != args.fusion_default else None  # None: --fusion not given
    adapt = adaptive.options_from(args.app, fusion, parse_widths(args.width), args.resume, args.adapt_after,
                                  args.checkpoint_interval, args.checkpoint_dir, args.checkpoints_kept,
                                  args.restart_attempts, args.calibration, args.max_switches)
    options = _options(argparse.Namespace(**{**vars(args), "checkpoint_interval": None, "resume": None}))
    result, switch = adaptive.run_adaptive(args.app, _params(args.p), nodes=args.nodes, cores=args.cores,
                                           work=args.build_dir, options=options, adapt=adapt)
    end_status()
    show_result(result)
    print("\n" + "\n".join(adaptive.switch_lines(switch)))
    if args.json:
        api.write_json(args.json, {"kind": "spadeopt-run-result", **result.to_json(), "adaptive": switch.to_json()})
    return 0


def cmd_profile(args: argparse.Namespace) -> int:
    from spadeopt import api

    result, run_dir = api.profile(args.app, args.o, args.fusion, _params(args.p), sample_rate=args.sample_rate,
                                  reservoir=args.reservoir, seed=args.seed, nodes=args.nodes, cores=args.cores,
                                  production_probe=not args.no_production_probe, options=_options(args))
    end_status()
    show_result(result)
    print(f"\nraw samples of {result.pes} PE(s) and manifest.json written to {run_dir}")
    return 0


def cmd_optimize(args: argparse.Namespace) -> int:
    from spadeopt import api
    from spadeopt.plan.explain import explain_text

    build, _ = api.optimize(args.app, args.profile, args.o, args.calibration, _params(args.p), args.max_frac,
                            args.min_util, args.nodes, args.cores, args.exact, args.rate,
                            not args.no_absorb, force=args.force, cpu_score=args.cpu_score,
                            widths=parse_widths(args.width), fission=not args.no_fission,
                            collapse=not args.no_collapse, checkpoints=args.checkpoints)
    print(explain_text(build.directory))
    given = _params(args.p)
    carried = ", ".join(f"{k}={v!r}" for k, v in sorted(build.deploy.params.items())) or "none"
    print(f"\nwrote {len(build.plan.pes)} PE module(s), plan.json, deploy.json and explain.json to "
          f"{build.directory}; run it with: spadeopt run {build.directory}")
    print(f"the build carries the app parameters {carried} ("
          + ("the profile's, with -p " + ", ".join(sorted(given)) if given else "the profile's: give -p KEY=VALUE "
             "to optimize for others") + ")")
    for note in build.notes:  # what its checkpoints guarantee short of a failure-free run's output
        print(f"checkpoints: {note}")
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    from spadeopt import api
    from spadeopt.plan.explain import explain_text

    print(explain_text(args.build, full=args.full))
    if args.png or args.dot:
        written = api.draw_plan(args.build, args.png, args.dot, args.force)
        print("\n".join(f"plan picture: {p}" for p in written))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from spadeopt.bench.compare import compare, table

    doc = compare(args.app, args.out, [s.strip() for s in args.strategies.split(",") if s.strip()],
                  _params(args.p), nodes=args.nodes, cores=args.cores, repeat=args.repeat, profile=args.profile,
                  calibration=args.calibration, sample_rate=args.sample_rate, profile_fusion=args.profile_fusion,
                  command=shlex.join(["spadeopt", *sys.argv[1:]]), no_fission=args.no_fission,
                  collapse=not args.no_collapse, options=_options(args))
    end_status()
    print(table(doc))
    print(f"\nfigures: {args.out / 'compare.json'}, plot: {args.out / 'compare.png'}")
    if doc.get("plan_pictures"):
        print("plan pictures: " + ", ".join(str(args.out / name) for name in doc["plan_pictures"].values()))
    return 0 if not doc["failed"] and doc["answers"]["identical"] is not False else 1


def cmd_build(args: argparse.Namespace) -> int:
    from spadeopt import api

    b = api.build(args.app, args.fusion, _params(args.p), args.nodes, args.cores, args.o, force=args.force,
                  widths=parse_widths(args.width), collapse=not args.no_collapse, checkpoints=args.checkpoints)
    print(f"wrote {len(b.plan.pes)} PE module(s), plan.json and deploy.json to {b.directory}")
    for note in b.notes:  # what its checkpoints guarantee short of a failure-free run's output
        print(f"checkpoints: {note}")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from spadeopt.bench import registry

    if args.app and args.name not in ("scale", "adaptive"):
        raise UsageError(f"bench {args.name} takes no app (only bench scale and bench adaptive do)")
    args.params = _params(args.p)
    return registry.run(args.name, args.out, args)


def cmd_refine(args: argparse.Namespace) -> int:
    from spadeopt.refine.job import refine
    from spadeopt.refine.show import format_profile

    profile = refine(args.run_dirs, args.o, args.master, progress=progress, force=args.force,
                     conf=_conf(args.conf))
    print(format_profile(profile))
    print(f"\nprofile of {len(args.run_dirs)} run(s) written to {args.o}")
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from spadeopt.refine.calibrate import calibrate, summary

    doc = calibrate(args.o, args.quick, progress, force=args.force)
    end_status()
    print(summary(doc))
    print(f"calibration written to {args.o}")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from spadeopt.refine.profile import Profile
    from spadeopt.refine.show import format_profile

    if args.top is not None and args.top < 1:
        raise UsageError(f"--top must be a positive number of rows, got {args.top}")
    print(format_profile(Profile.load_file(args.profile), args.top))
    return 0


USER_HELP = "Compile a Python stream app into fused processes (PEs) and run it on Spark."
USER_EPILOG = """\
first run:    spadeopt run APP.py --fusion all --out out/APP
two stages:   spadeopt profile APP.py -o runs/APP
              spadeopt refine runs/APP -o profiles/APP.json
              spadeopt optimize APP.py --profile profiles/APP.json -o build/APP
              spadeopt explain build/APP --png plan.png
              spadeopt run build/APP --out out/APP-fatm
side by side: spadeopt compare APP.py --out out/compare

`spadeopt COMMAND --help` for a command's options. Guide: docs/guide.md; builder
methods and expressions: docs/api.md. Exit codes: 0 ok, 1 the job failed while running,
2 bad input (nothing written), 130 interrupted."""


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="spadeopt", description=USER_HELP, epilog=USER_EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    for add in (_run_parser, _profile_parser, _optimize_parser, _compare_parser, _explain_parser, _build_parser,
                _bench_parser, _refine_parser, _calibrate_parser, _show_parser, *SERVICE_PARSERS):
        add(sub)
    return ap


FORCE_HELP = ("replace an output path that holds something spadeopt did not write there "
              "(it is moved aside to NAME.spadeopt-backup-TIME, never deleted)")
CHECKPOINTS_HELP = ("generate the PEs with state hooks, so the build can run with --checkpoint-interval "
                    "(an operator whose state cannot be checkpointed is refused now)")
NO_COLLAPSE_HELP = ("keep operator boundaries inside static-rate functor runs instead of compiling each "
                    "run into one loop (the ablation; recorded in plan.json and deploy.json)")


def _app_args(p: argparse.ArgumentParser, fusion: str = "none", why: str = "") -> None:
    p.add_argument("--fusion", default=fusion,
                   help=f"{fusion_help()} or a plan.json (default: {fusion}{why})")
    p.add_argument("-p", action="append", metavar="KEY=VALUE", help="app parameter (repeatable)")
    p.add_argument("--nodes", type=int, default=1, help="nodes to place PEs on (default 1)")
    p.add_argument("--cores", type=int, default=2, help="cores per node (default 2)")


def _link_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stall-timeout", type=float, metavar="S", help="fail a run whose PEs make no progress "
                   "for S seconds, naming them (default 300)")
    p.add_argument("--insecure-links", action="store_true", help="links between PEs WITHOUT CURVE "
                   "authentication and encryption: for measurements only, never on a shared cluster")
    p.add_argument("--max-batch-delay", type=float, metavar="MS", help="longest a live source's partial "
                   "batch waits for more records before it is sent on (default 5 ms; 0: at once)")
    p.add_argument("--batch-size", type=int, metavar="N", help="tuples a source hands on per batch, and so "
                   "at most per message between PEs (default: the build's: 512, or what FATM chose from "
                   "the profile, 512-2048)")


def _width_arg(p: argparse.ArgumentParser) -> None:
    declared = " or ".join(n for n, s in STRATEGY_BY_NAME.items() if s.declared_widths)
    p.add_argument("--width", action="append", metavar="REGION=K",
                   help="run the app's parallel region REGION as K channels (repeatable; default: "
                        f"the app's width under --fusion {declared}, else 1)")


def _conf_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--conf", action="append", metavar="KEY=VALUE",
                   help="Spark setting, as spark-submit takes it (repeatable; overrides spadeopt's)")


def _run_parser(sub) -> None:
    r = sub.add_parser("run", help="build an app (or take a build directory) and run it on Spark")
    r.add_argument("app", help="apps/bargain.py, apps.bargain:app, or a build directory")
    _app_args(r)
    r.set_defaults(fusion_default=r.get_default("fusion"))  # --adaptive refuses a --fusion given
    _width_arg(r)
    r.add_argument("--master", help="Spark master (default local[nodes*cores]; local-cluster[n,c,mem] works)")
    r.add_argument("--out", type=Path, help="write each sink's output to OUT/<sink>.jsonl")
    r.add_argument("--json", type=Path, help="write the result as JSON to this file")
    r.add_argument("--build-dir", type=Path, help="where to generate the PEs (default build/<app>/<fusion>)")
    r.add_argument("--force", action="store_true", help=FORCE_HELP)
    r.add_argument("--duration", type=float, metavar="S", help="end the sources after S seconds, then drain "
                   "and flush (default: run until the sources end; a live source: until Ctrl-C / SIGTERM)")
    _link_args(r)
    _conf_arg(r)
    r.add_argument("--no-collapse", action="store_true", help=NO_COLLAPSE_HELP)
    r.add_argument("--verify-fission", type=int, metavar="N", help="first run the first N records of every "
                   "source at width 1 and under the plan, and stop (exit 1) if any sink differs: for custom "
                   "operators whose declared state kind might be wrong")
    checkpoint_args(r)
    r.add_argument("--adaptive", action="store_true", help="start under FALL (or --fusion none|manual, or a "
                   "BUILD's own plan), instrumented; after --adapt-after seconds (with a live source: once its lag "
                   "keeps growing or a PE stays above MaxFrac) re-plan with FATM from what was measured and switch at a checkpoint (sinks as a run that never switched); a live run keeps "
                   "watching and switches again, up when the lag grows, down when its PEs idle")
    r.add_argument("--adapt-after", type=float, metavar="S", help="with --adaptive: seconds each phase measures "
                   "before it may switch (default 5; the switch waits for the next checkpoint after them)")
    r.add_argument("--max-switches", type=int, metavar="N", help="with --adaptive and a live source: switch at "
                   "most N times (default 8; a bounded run switches once)")
    r.add_argument("--calibration", type=Path, help="with --adaptive: the calibration FATM plans with "
                   "(default: this host's, else the newest in profiles/calibration/)")
    _metrics_args(r)
    r.set_defaults(func=cmd_run)


def _metrics_args(p: argparse.ArgumentParser) -> None:
    """Issue 38: live metrics, the job's page, the terminal view."""
    p.add_argument("--metrics-port", type=int, default=0, metavar="N", help="serve the running job's Prometheus "
                   "metrics (/metrics) and its page (/) on port N (default 0: a free port; the run prints the URL)")
    p.add_argument("--metrics-host", default="127.0.0.1", metavar="HOST", help="address to serve them on "
                   "(default 127.0.0.1; any other requires the token the run prints)")
    p.add_argument("--no-metrics", action="store_true", help="no live metrics, no page")
    p.add_argument("--live", action="store_true", help="show the running job in this terminal (spadeopt top), "
                   "refreshed every second")


def _profile_parser(sub) -> None:
    from spadeopt.api import PROFILE_FUSION, PROFILE_SAMPLE_RATE

    pr = sub.add_parser("profile", help="stage 1: run an instrumented build and collect port metrics")
    pr.add_argument("app")
    _app_args(pr, PROFILE_FUSION, ": one PE measures operators without process contention, and an operator's "
             "profile does not depend on its fusion")
    pr.add_argument("--sample-rate", type=float, default=PROFILE_SAMPLE_RATE,
                    help=f"stride sampling fraction s in (0, 1] (default {PROFILE_SAMPLE_RATE}: enough samples "
                         "of rare links in short runs, at a few per cent of overhead)")
    pr.add_argument("--reservoir", type=int, default=5000, help="reservoir size S: sampled tuples kept per point (default 5000)")
    pr.add_argument("--duration", type=float, help="stop the sources after this many seconds (default: run to the end)")
    pr.add_argument("--seed", type=int, default=0, help="seed of the reservoir samplers (recorded; default 0)")
    pr.add_argument("--master", help="Spark master (default local[nodes*cores])")
    pr.add_argument("-o", type=Path, required=True, help="run directory (new or empty)")
    pr.add_argument("--no-production-probe", action="store_true",
                    help="skip the runs of the production FALL build after profiling (FATM then cannot "
                         "fit what collapsing saves or the instrumentation overhead, and uses its constants)")
    _link_args(pr)
    _conf_arg(pr)
    pr.set_defaults(func=cmd_profile)


def _optimize_parser(sub) -> None:
    op = sub.add_parser("optimize", help="stage 2: GreedyFuse + placement from a refined profile")
    op.add_argument("app")
    op.add_argument("--profile", type=Path, required=True, help="PROFILE.json from `spadeopt refine`")
    op.add_argument("--calibration", type=Path, help="comm-cost calibration (default: this host's, "
                    "else the newest in profiles/calibration/)")
    op.add_argument("-p", action="append", metavar="KEY=VALUE", help="app parameter (default: the profile's)")
    op.add_argument("--max-frac", type=float, default=0.5, help="MaxFrac: most CPU a PE may need (default 0.5)")
    op.add_argument("--min-util", type=float, default=0.95, help="MinUtil: stop merging PEs at this "
                    "effective utilisation (default 0.95)")
    op.add_argument("--nodes", type=int, default=1)
    op.add_argument("--cores", type=int, default=2)
    op.add_argument("--rate", default="max", help="source rate to plan for, tuples/s: 'max' (default: the "
                    "highest this cluster sustains), 'profiled' (as measured) or a number")
    op.add_argument("--no-absorb", action="store_true", help="stop after GreedyFuse: do not merge the "
                    "underutilized PEs it leaves into a neighbour (the paper's algorithm alone)")
    op.add_argument("--exact", action="store_true", help="also solve exactly (small graphs) and report the gap")
    op.add_argument("--no-fission", action="store_true", help="keep every parallel region at width 1 "
                    "(default: FATM chooses each region's width from the profile)")
    op.add_argument("--width", action="append", metavar="REGION=K",
                    help="pin a parallel region's width (repeatable); FATM chooses the others")
    op.add_argument("--no-collapse", action="store_true", help=NO_COLLAPSE_HELP)
    op.add_argument("--checkpoints", action="store_true", help=CHECKPOINTS_HELP)
    op.add_argument("--cpu-score", type=float, help="this host's CPU score for rescaling a calibration made "
                    "on another CPU (default: measured once per host and kept in ~/.cache/spadeopt)")
    op.add_argument("-o", type=Path, required=True, help="build directory to write (new, empty, or a previous build)")
    op.add_argument("--force", action="store_true", help=FORCE_HELP)
    op.set_defaults(func=cmd_optimize)


def _compare_parser(sub) -> None:
    from spadeopt.api import PROFILE_FUSION
    cp = sub.add_parser("compare", help="run NONE, FALL, FMAN and FATM side by side; table and plot")
    cp.add_argument("app")
    made = [n for n, st in STRATEGY_BY_NAME.items() if st.makes_plans]
    cp.add_argument("--strategies", default=",".join(made), help=f"comma-separated from {', '.join(made)}, "
                    f"auto1 (FATM without fission) (default: {','.join(made)})")
    cp.add_argument("--no-fission", action="store_true", help="also run the ablation FATM-w1 (auto1): FATM "
                    "from the same profile with every parallel region at width 1")
    cp.add_argument("-p", action="append", metavar="KEY=VALUE", help="app parameter (repeatable)")
    cp.add_argument("--nodes", type=int, default=1)
    cp.add_argument("--cores", type=int, default=2)
    cp.add_argument("--master", help="Spark master (default local[nodes*cores])")
    cp.add_argument("--repeat", type=int, default=3, help="runs per strategy, interleaved (default 3)")
    cp.add_argument("--profile", type=Path, help="refined profile for FATM (default: profile and refine first)")
    cp.add_argument("--calibration", type=Path, help="comm-cost calibration (default: this host's)")
    cp.add_argument("--profile-fusion", default=PROFILE_FUSION, choices=selectable(),
                    help="fusion to profile under for FATM (default all: profiling is fusion-transparent, "
                         "and one PE measures operators without process contention)")
    cp.add_argument("--sample-rate", type=float, default=0.01, help="stride sampling s when profiling (default 0.01)")
    cp.add_argument("--duration", type=float, metavar="S", help="end every run's sources after S seconds (required "
                    "for an app with live, unbounded sources: each run reads the feed for S seconds)")
    cp.add_argument("--out", type=Path, required=True, help="directory for compare.json and compare.png")
    cp.add_argument("--force", action="store_true", help=FORCE_HELP)
    _conf_arg(cp)
    cp.add_argument("--no-collapse", action="store_true", help=NO_COLLAPSE_HELP)
    cp.set_defaults(func=cmd_compare)


def _explain_parser(sub) -> None:
    ex = sub.add_parser("explain", help="why an optimized build looks as it does")
    ex.add_argument("build", type=Path)
    ex.add_argument("--png", type=Path, help="draw the plan (nodes, PEs, operators, planned link rates) to a PNG")
    ex.add_argument("--dot", type=Path, help="write the same picture as Graphviz DOT text")
    ex.add_argument("--full", action="store_true", help="list every region, boundary and refused merge "
                    "(default: blocks alike, e.g. 22 identical groups of operators, are shown once with a count)")
    ex.add_argument("--force", action="store_true", help=FORCE_HELP)
    ex.set_defaults(func=cmd_explain)


def _build_parser(sub) -> None:
    b = sub.add_parser("build", help="only generate the PE modules, plan.json and deploy.json")
    b.add_argument("app")
    _app_args(b)
    _width_arg(b)
    b.add_argument("-o", type=Path, required=True, help="build directory to write (new, empty, or a previous build)")
    b.add_argument("--force", action="store_true", help=FORCE_HELP)
    b.add_argument("--no-collapse", action="store_true", help=NO_COLLAPSE_HELP)
    b.add_argument("--checkpoints", action="store_true", help=CHECKPOINTS_HELP)
    b.set_defaults(func=cmd_build)


def _bench_parser(sub) -> None:
    from spadeopt.bench.registry import BENCHMARKS

    be = sub.add_parser("bench", help="run a benchmark and write its figures to files")
    be.add_argument("name", help=" | ".join(sorted(BENCHMARKS)))
    be.add_argument("--out", type=Path, default=Path("out/bench"), help="directory for the figures")
    be.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    be.add_argument("app", nargs="?", help="bench scale and bench adaptive: the app (path or module:attr)")
    be.add_argument("--cores", help="bench scale: plan FATM for 1 x N cores (N, or a list 2,4,16; default 16); "
                                    "bench adaptive and adaptive-live: the run's cores (default 2)")
    be.add_argument("-p", action="append", metavar="KEY=VALUE",
                    help="bench scale and bench adaptive: app parameter (repeatable)")
    be.add_argument("--profile", type=Path, help="bench scale: a refined profile (default: profile FALL first)")
    be.add_argument("--calibration", type=Path, help="bench scale: comm-cost calibration (default: this host's)")
    be.add_argument("--force", action="store_true", help=FORCE_HELP)
    be.set_defaults(func=cmd_bench)


def _refine_parser(sub) -> None:
    rf = sub.add_parser("refine", help="Spark job: raw samples of profiling runs -> profile.json (u, rates, links)")
    rf.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR", help="profiling run(s) of one app graph")
    rf.add_argument("--master", help="Spark master (default local[2])")
    rf.add_argument("-o", type=Path, required=True, help="profile to write (JSON)")
    rf.add_argument("--force", action="store_true", help=FORCE_HELP)
    _conf_arg(rf)
    rf.set_defaults(func=cmd_refine)


def _calibrate_parser(sub) -> None:
    ca = sub.add_parser("calibrate", help="measure the comm-cost mapping v(rate, size) of this machine")
    ca.add_argument("-o", type=Path, required=True, help="calibration file, e.g. profiles/calibration/HOST.json")
    ca.add_argument("--quick", action="store_true", help="a small grid (~30 s), for tests")
    ca.add_argument("--force", action="store_true", help=FORCE_HELP)
    ca.set_defaults(func=cmd_calibrate)


def _show_parser(sub) -> None:
    sh = sub.add_parser("show", help="print a profile: operators by CPU fraction, links by rate")
    sh.add_argument("profile", type=Path)
    sh.add_argument("--top", type=int, help="only the N heaviest operators and busiest links")
    sh.set_defaults(func=cmd_show)


def _terminate(_signum, _frame) -> None:
    raise KeyboardInterrupt  # SIGTERM ends the run the way Ctrl-C does: Spark stops, PEs end


def main(argv: list[str] | None = None) -> int:
    import signal

    args = parser().parse_args(argv)
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminate)
    return guarded(lambda: args.func(args))


if __name__ == "__main__":
    sys.exit(main())
