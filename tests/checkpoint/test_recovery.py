"""Issue 29: checkpoints, recovery after kill -9, exactly-once file sinks, bad input.

The recovery tests run real PE processes and ZeroMQ links through the real node agent
(``deploy.agent.run_node``) and the driver's real coordinator and store, with the
restart loop of ``deploy.checkpointed_run.run`` done by hand (no JVM): a PE is killed with
SIGKILL three times, each time after a new checkpoint completed, and the sinks must be
byte-identical to a run without failures.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import threading
import time
from collections import deque
from pathlib import Path

import msgpack
import pytest

from spadeopt.codegen.render import generate
from spadeopt.deploy.agent import PEFailed, run_node
from spadeopt.deploy.checkpoint_coordinator import Coordinator
from spadeopt.deploy.checkpoint_store import CheckpointMismatch, CheckpointStore, finish_sinks
from spadeopt.errors import CodegenError
from spadeopt.optimize.strategies import plan_for
from spadeopt.orchestrate.build_local import build_and_run
from spadeopt.runtime import metrics
from spadeopt.runtime.checkpoint_codec import CheckpointError, decode_state, encode_state
from spadeopt.runtime.sinks import commit, discard
from tests.apps.ckpt import cklate, ckpt

REF = "tests/apps/ckpt.py"
SINKS = ("means", "counts", "runs")


def test_state_codec_keeps_types():
    state = {("k1", 2): [deque([(1, 2.5, "x", b"\x00", None, True)], maxlen=4), 2**80, -(2**70)],
             "plain": {"a": [1, (2, (3,))]}}
    back = decode_state(encode_state(state))
    assert back == state
    assert type(back[("k1", 2)][0]) is deque and back[("k1", 2)][0].maxlen == 4
    assert type(back["plain"]["a"][1]) is tuple and type(back["plain"]["a"][1][1]) is tuple


def _shape(x):
    """Every container's type (and a deque's maxlen) all the way down, and every leaf's type."""
    if type(x) is dict:
        return ("dict", {k: (type(k).__name__, _shape(v)) for k, v in x.items()})
    if type(x) in (list, tuple, deque):
        return (type(x).__name__, getattr(x, "maxlen", None), [_shape(v) for v in x])
    return type(x).__name__


def test_state_codec_fast_path_keeps_types():
    """Collections of flat rows (a window's groups) are packed in one call; what comes back
    is what the slow path gives: lists stay lists, rows tuples, keys as they were. Rows
    that are not flat (a tuple or list inside, an int past 64 bits) take the slow path."""
    from spadeopt.runtime import checkpoint_codec as ck

    state = {"groups": {"k1": [("k1", 0.5, 3), ("k1", 0.75, 4)], "k2": [], "k3": [("k3", 1.0, True, None, b"\x01")]},
             "by_two": {("a", 1): [("a", 1, 2.0)], ("b", 2): [("b", 2, 3.0)]},
             "rows": [(1, "x"), (2, "y")], "window": deque([(1, 2.5), (2, 3.5)], maxlen=25),
             "sliding": {"k": [deque([("k", 1)], maxlen=3), 7]},
             "nested": {"k": [("k", (1, 2)), ("k", [3])]}, "big": {"k": [("k", 2**70)]}, "mixed": [(1,), [2], 3],
             "empty": ([], {}, deque())}
    assert type(ck._fast(state["groups"])) is msgpack.ExtType and type(ck._fast(state["rows"])) is msgpack.ExtType
    assert type(ck._fast(state["nested"])) is dict and type(ck._fast(state["big"])) is dict
    back = decode_state(encode_state(state))
    assert back == state and _shape(back) == _shape(state)
    with pytest.raises(CheckpointError):  # an extension inside flat rows is refused, never built
        decode_state(msgpack.packb(msgpack.ExtType(ck._ROWS, msgpack.packb([[msgpack.ExtType(2, b"\x90")]]))))
    with pytest.raises(CheckpointError):  # groups whose values are not lists of rows
        decode_state(msgpack.packb(msgpack.ExtType(ck._GROUPS, msgpack.packb({"k": 1}))))


def test_state_codec_refuses_objects_and_garbage():
    with pytest.raises(CheckpointError, match="cannot be checkpointed"):
        encode_state({"x": object()})
    with pytest.raises(CheckpointError, match="not a spadeopt snapshot"):
        decode_state(b"\xc1\xc1garbage")
    import msgpack
    with pytest.raises(CheckpointError):  # an unknown extension type is refused, never built
        decode_state(msgpack.packb(msgpack.ExtType(42, b"os.system")))


def test_custom_operator_without_snapshot_is_refused_at_build_time(tmp_path):
    g = ckpt.build({"nosnap": 1})
    p = dataclasses.replace(plan_for(g, "all"), checkpoints=True)
    with pytest.raises(CodegenError, match=r"custom operator 'run' .* has no snapshot\(\) or restore\(\)"):
        generate(g, p, tmp_path / "b", REF)
    generate(g, plan_for(g, "all"), tmp_path / "b2", REF)  # without checkpoints it builds


def _attempts(tmp_path: Path, fusion: str, kills: int, n: int, spin_us: int, width: int = 1) -> tuple[Path, list]:
    """Run with checkpoints every 0.5 s; after each new checkpoint kill -9 one PE (in
    turn) and restart from the last complete checkpoint; returns (out dir, restarts)."""
    g = ckpt.build({"n": n, "spin_us": spin_us, "width": width})
    b = generate(g, dataclasses.replace(plan_for(g, fusion), checkpoints=True), tmp_path / "build", REF)
    out, restarts, _ = run_with_kills(tmp_path, b, kills, 0.5)
    return out, restarts


def run_with_kills(tmp_path: Path, b, kills: int, interval: float, settings: dict | None = None,
                   killed_hook=None, victims: list[str] | None = None,
                   reports: list | None = None) -> tuple[Path, list, list[dict]]:
    """Run build ``b`` on one node with checkpoints every ``interval`` s (the restart loop
    of ``deploy.checkpointed_run.run`` by hand, no JVM): after each new checkpoint kill -9 one
    PE (in turn: ``victims``, or every PE in name order) and restart from the last
    complete checkpoint, ``kills`` times. Returns (out dir, the checkpoint each restart
    restored, each restart's times: ``killed``, ``running`` (every PE said hello again),
    ``output`` (a sink took a tuple again), in seconds since the epoch).
    ``killed_hook(k)`` is called after the k-th kill; ``reports`` gets the node's report of
    the attempt that finished (its PEs' stats)."""
    store = CheckpointStore(tmp_path / "chk", keep=2)
    out, progress = tmp_path / "out", tmp_path / "progress"
    restarts, times, restore, killed = [], [], None, 0
    pes = list(victims) if victims else sorted(p.pe for p in b.deploy.pes)
    while True:
        coord = Coordinator(store, b.deploy, interval, restore)
        deploy = b.deploy.with_settings(checkpoint=coord.channel(), **(settings or {}))
        discard(out)
        shutil.rmtree(progress, ignore_errors=True)  # the killed attempt's pids
        stop = threading.Event()
        if times:
            times[-1]["coordinator"] = coord

        seen = max(store.ids(), default=0)
        victim = pes[killed % len(pes)] if killed < kills else None

        def killer(seen=seen, victim=victim, stop=stop, progress=progress):
            while victim and not stop.wait(0.05):
                done = [i for i in store.ids() if i > seen and (store.root / f"chk-{i:08d}" / "MANIFEST.json").exists()]
                f = progress / f"{victim}.json"
                if done and f.exists():
                    try:
                        os.kill(json.loads(f.read_text())["pid"], signal.SIGKILL)
                    except (ProcessLookupError, ValueError):
                        continue
                    times.append({"victim": victim, "killed": time.time()})
                    if killed_hook is not None:
                        killed_hook(len(times))
                    return

        k = threading.Thread(target=killer, daemon=True)
        k.start()
        try:
            report = run_node(0, deploy, str(b.directory), str(out), str(tmp_path / "logs"),
                              progress_dir=str(progress))
        except PEFailed as exc:
            stop.set()
            coord.close()
            killed += 1
            assert killed <= kills, f"failed without a kill: {exc}"
            restore = store.latest(b.deploy)
            store.rewind_sinks(restore)
            restarts.append(restore.id if restore else None)
            continue
        stop.set()
        if reports is not None:
            reports.append(report)
        commit(out)
        finish_sinks(store, out, coord.finish())
        for t in times:  # the attempt after each kill: when it was running, when it output again
            c = t.pop("coordinator", None)
            t["running"] = c.t_running if c is not None else None
            t["output"] = c.t_output if c is not None else None
        return out, restarts, times


@pytest.mark.slow
@pytest.mark.parametrize("fusion,width", [("all", 1), ("none", 1), ("manual", 1), ("all", 2), ("manual", 2)])
def test_kill_three_times_gives_the_failure_free_answer(tmp_path, fusion, width):
    n, spin = (60_000, 2000) if fusion == "all" else (60_000, 3000)  # long enough for three kills on an idle machine
    g = ckpt.build({"n": n, "width": width})
    ref = build_and_run(g, plan_for(g, "all"), workdir=tmp_path / "ref", app_ref=REF).dir / "out"
    out, restarts = _attempts(tmp_path / "ck", fusion, 3, n, spin, width)
    assert len(restarts) == 3 and all(r is not None for r in restarts), restarts
    assert restarts == sorted(restarts)
    for name in SINKS:
        assert (out / f"{name}.jsonl").read_bytes() == (ref / f"{name}.jsonl").read_bytes(), name


@pytest.mark.slow
def test_kill_three_times_counts_each_late_tuple_once(tmp_path):
    """Issue 40: the late counters are window state. Killed three times (a window with
    an allowed lateness at width 2, a window with a late port), the run's sinks, late
    sink included, and its late counts are a failure-free run's: nothing counted twice."""
    g = cklate.build({"n": 60_000, "spin_us": 3000, "width": 2})
    ref = build_and_run(g, plan_for(g, "all"), workdir=tmp_path / "ref", app_ref=REF)
    want = metrics.merge(st["metrics"] for st in ref.report["pes"])[0]
    assert want["win"]["late"] > 0 and want["cnt"]["late"] == len(ref.sinks["late"]) > 0, want
    b = generate(g, dataclasses.replace(plan_for(g, "none"), checkpoints=True), tmp_path / "build", REF)
    reports: list = []
    out, restarts, _ = run_with_kills(tmp_path / "ck", b, 3, 0.5, reports=reports)
    assert len(restarts) == 3 and all(r is not None for r in restarts), restarts
    for name in ("means", "counts", "late"):
        assert (out / f"{name}.jsonl").read_bytes() == (ref.dir / "out" / f"{name}.jsonl").read_bytes(), name
    assert metrics.merge(st["metrics"] for st in reports[-1]["pes"])[0] == want


def _store_with_one(tmp_path: Path):
    g = ckpt.build({"n": 20_000, "spin_us": 2000})
    b = generate(g, dataclasses.replace(plan_for(g, "all"), checkpoints=True), tmp_path / "build", REF)
    store = CheckpointStore(tmp_path / "chk", keep=3)
    coord = Coordinator(store, b.deploy, 0.2, None)
    run_node(0, b.deploy.with_settings(checkpoint=coord.channel()), str(b.directory), str(tmp_path / "out"),
             str(tmp_path / "logs"))
    coord.finish()
    assert len(coord.completed) >= 2, coord.completed
    return store, b


@pytest.mark.slow
def test_corrupt_or_partial_checkpoints_are_skipped_loudly_and_foreign_ones_refused(tmp_path, capsys):
    store, b = _store_with_one(tmp_path)
    ids = store.ids()
    newest, older = ids[-1], ids[-2]
    part = next((store.root / f"chk-{newest:08d}").glob("*.part"))
    part.write_bytes(part.read_bytes()[:-3] + b"xyz")  # corrupt the newest
    (store.root / f"chk-{newest + 1:08d}").mkdir()  # and a partial one after it
    assert store.latest(b.deploy).id == older
    err = capsys.readouterr().err
    assert f"checkpoint {newest + 1}" in err and "partial" in err
    assert f"checkpoint {newest}" in err and "SHA-256" in err
    # another plan of the same operators: regrouped by operator (tests/checkpoint/test_replan_resume.py)
    g = ckpt.build({"n": 20_000, "spin_us": 2000})
    other = generate(g, dataclasses.replace(plan_for(g, "none"), checkpoints=True), tmp_path / "b2", REF)
    regrouped = store.latest(other.deploy)
    assert regrouped.id == older and set(regrouped.parts) == {p.pe for p in other.deploy.pes}
    assert "regrouped by operator" in capsys.readouterr().err
    # another app's parameters (graph fingerprint)
    g3 = ckpt.build({"n": 20_000, "spin_us": 2000, "keys": 3})
    third = generate(g3, dataclasses.replace(plan_for(g3, "all"), checkpoints=True), tmp_path / "b3", REF)
    with pytest.raises(CheckpointMismatch, match="graph differs"):
        store.latest(third.deploy)
    renamed = dataclasses.replace(b.deploy, app="other")
    with pytest.raises(CheckpointMismatch, match="app 'ckpt'"):
        store.latest(renamed)
