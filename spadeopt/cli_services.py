"""The ``spadeopt`` commands that look after services rather than apps: ``cluster`` (a
local Spark standalone cluster), ``broker`` (the project's Redis server) and ``top`` (a
running job's live view). Each parses its arguments and calls one library function, as
``spadeopt.cli`` does for the app commands; ``cli.parser`` adds :data:`SERVICE_PARSERS`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def cmd_cluster(args: argparse.Namespace) -> int:
    from spadeopt.deploy import cluster

    if args.action == "start":
        c = cluster.start(args.state_dir, args.workers, args.cores, args.memory, args.port, host=args.host)
        print(f"Spark standalone master {c.master_url} with {args.workers} worker(s) x {args.cores} core(s) "
              f"on {args.host}; logs and pids in {c.state_dir}")
        print(f"its secret (mode 0600; jobs without it are refused): {c.secret_file}")
        print(_cluster_recipe(c.master_url, c.secret_file, args.workers, args.cores, args.state_dir))
    elif args.action == "status":
        return _cluster_status(args.state_dir)
    else:
        stopped = cluster.stop(args.state_dir)
        print(f"stopped {', '.join(stopped) or 'nothing (no recorded process was still running)'}")
    return 0


def _cluster_recipe(master: str, secret_file: str | None, workers: int, cores: int | None, state_dir: Path) -> str:
    """How to run an app on a cluster ``spadeopt cluster start`` made: every line needed."""
    from spadeopt.deploy.sparkauth import SECRET_ENV

    return "\n".join([
        "run an app on it (PYSPARK_PYTHON: the executors' Python, which must have spadeopt installed;",
        "this one has):",
        f"  export {SECRET_ENV}={secret_file}",
        f"  export PYSPARK_PYTHON={sys.executable}",
        f"  spadeopt run apps/chain.py --nodes {workers} --cores {cores or 1} --master {master} --out out/chain",
        f"check it: spadeopt cluster status --state-dir {state_dir}",
        f"stop it:  spadeopt cluster stop --state-dir {state_dir}"])


def _cluster_status(state_dir: Path) -> int:
    from spadeopt.deploy import cluster

    found = cluster.status(state_dir)
    if found is None:
        print(f"no cluster recorded in {state_dir}: start one with `spadeopt cluster start`")
        return 1
    c, alive = found
    up = all(alive.values()) and bool(alive)
    workers = sum(1 for r in alive if r.startswith("worker"))
    print(f"{'running' if up else 'NOT fully running'}: master {c.master_url}, {workers} worker(s) x "
          f"{cluster.worker_cores(c) or '?'} core(s); state in {c.state_dir}")
    for role, ok in alive.items():
        print(f"  {role:10} {'up' if ok else 'gone'}")
    if up:
        print(_cluster_recipe(c.master_url, c.secret_file, workers, cluster.worker_cores(c), state_dir))
    else:
        print(f"stop what is left and start again: spadeopt cluster stop --state-dir {state_dir}")
    return 0 if up else 1


def cmd_broker(args: argparse.Namespace) -> int:
    from spadeopt.deploy import broker

    if args.action == "start":
        b = broker.start()
        print(f"{'reusing the' if b.reused else 'started a'} Redis broker at redis://{b.host}:{b.port} "
              f"(pid {b.pid}); password in {b.password_file} (mode 0600); state in {b.dir}")
    elif args.action == "stop":
        print("stopped the project's broker" if broker.stop() else "no broker started by spadeopt was running")
    else:
        b = broker.status()
        print(f"running at redis://{b.host}:{b.port} (pid {b.pid}); password in {b.password_file}" if b
              else "not running: start it with `make broker` (or `spadeopt broker start`)")
        return 0 if b else 1
    return 0


def _cluster_parser(sub) -> None:
    cl = sub.add_parser("cluster", help="start, check or stop a local Spark standalone cluster (master + workers "
                        "on 127.0.0.1, from the pip PySpark), authenticated by a secret only you can read")
    cl.add_argument("action", choices=("start", "status", "stop"))
    cl.add_argument("--workers", type=int, default=2, help="workers to start (default 2)")
    cl.add_argument("--cores", type=int, default=1, help="cores per worker (default 1)")
    cl.add_argument("--memory", default="1g", help="memory per worker (default 1g)")
    cl.add_argument("--port", type=int, help="master port (default: a free one)")
    cl.add_argument("--host", default="127.0.0.1", help="address the master and workers bind to "
                    "(default 127.0.0.1: only this host can reach them)")
    cl.add_argument("--state-dir", type=Path, default=Path(".spadeopt-cluster"),
                    help="where pids, ports and logs are kept (default .spadeopt-cluster)")
    cl.set_defaults(func=cmd_cluster)


def _broker_parser(sub) -> None:
    bk = sub.add_parser("broker", help="start, stop or check the project's Redis broker (127.0.0.1, a "
                        "password only you can read; state in .spadeopt-broker)")
    bk.add_argument("action", choices=("start", "stop", "status"))
    bk.set_defaults(func=cmd_broker)


def cmd_top(args: argparse.Namespace) -> int:
    from spadeopt.live.top import watch

    return watch(args.url, token=args.token, once=args.once)


def _top_parser(sub) -> None:
    tp = sub.add_parser("top", help="watch a running job in the terminal: its PEs, sources, latency and "
                        "checkpoints, redrawn every second (from the job's live server)")
    tp.add_argument("url", help="the job's live server, e.g. http://127.0.0.1:43117/")
    tp.add_argument("--token", help="the server's token (needed from another machine)")
    tp.add_argument("--once", action="store_true", help="print one screen and end")
    tp.set_defaults(func=cmd_top)


SERVICE_PARSERS = (_cluster_parser, _broker_parser, _top_parser)
