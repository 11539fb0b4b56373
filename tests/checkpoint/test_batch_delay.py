"""Issue 29 x issue 28: a checkpoint taken while a live source holds a partial batch.

A live source holds what it read for up to ``--max-batch-delay`` (``PERuntime._live_batches``)
before passing it on. A barrier injected at a turn boundary while records are held must
neither lose them (counted in the source's position, never seen by an operator: skipped
after a restore) nor duplicate them. The app is a watched folder (a real live connector)
fed one small file at a time, a functor in a PE of its own and a file sink in a third
(``--fusion none``: the barrier crosses two links), with a batch size no feed fills and a
long batch delay, so nearly every checkpoint is taken while the source holds records.

Checked on real PE processes, links and the driver's coordinator and store (no JVM):

* every complete checkpoint's source position equals the sink lines it committed (the
  pipeline is one record in, one record out);
* resuming from a checkpoint in the middle gives the failure-free output exactly.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import time
from pathlib import Path

import pytest

from spadeopt import App
from spadeopt.codegen.render import generate
from spadeopt.connectors import folder_source
from spadeopt.deploy.agent import run_node
from spadeopt.deploy.checkpoint_coordinator import Coordinator
from spadeopt.deploy.checkpoint_store import CheckpointStore, finish_sinks
from spadeopt.optimize.strategies import plan_for
from spadeopt.runtime.checkpoint_codec import decode_state
from spadeopt.runtime.sinks import commit, discard

FILES, PER_FILE = 80, 3
N = FILES * PER_FILE


def _app(folder: Path):
    a = App("heldck")
    s = a.source("feed", "i:int, v:int", connector=folder_source(str(folder), count=N, poll=0.005))
    f = a.functor("dbl", s, output={"i": "i", "w:int": "v * 2 + 1"})
    a.sink("out", f)
    return a.build()


def _feed(folder: Path, gap: float) -> None:
    for k in range(FILES):
        tmp = folder / f"f{k:05d}.jsonl.tmp"
        tmp.write_text("".join(json.dumps({"i": k * PER_FILE + j, "v": (k * 7 + j) % 11}) + "\n"
                               for j in range(PER_FILE)))
        os.rename(tmp, folder / f"f{k:05d}.jsonl")
        time.sleep(gap)


def _run(b, store: CheckpointStore, out: Path, logs: Path, restore=None, feed=None) -> Coordinator:
    coord = Coordinator(store, b.deploy, 0.1, restore)
    if feed is not None:  # once every PE is up (said hello): the feed trickles in while the run takes checkpoints
        def fed():
            while coord.t_running is None:
                time.sleep(0.01)
            feed()
        threading.Thread(target=fed, daemon=True).start()
    deploy = b.deploy.with_settings(checkpoint=coord.channel(), batch_size=100_000, max_batch_delay=0.35)
    discard(out)
    run_node(0, deploy, str(b.directory), str(out), str(logs))
    commit(out)
    finish_sinks(store, out, coord.finish())
    return coord


def _committed_lines(store: CheckpointStore, n: int) -> int:
    manifest = json.loads((store.root / f"chk-{n:08d}" / "MANIFEST.json").read_text())
    length = manifest["sinks"].get("out", 0)
    return (store.sinks / "out.jsonl").read_bytes()[:length].count(b"\n")


def _position(store: CheckpointStore, n: int) -> int:
    parts = [decode_state(p.read_bytes()) for p in (store.root / f"chk-{n:08d}").glob("*.part")]
    return sum(p["sources"].get("feed", 0) for p in parts)


@pytest.mark.slow
def test_checkpoints_while_a_live_source_holds_a_partial_batch(tmp_path):
    folder = tmp_path / "feed"
    folder.mkdir()
    g = _app(folder)
    b = generate(g, dataclasses.replace(plan_for(g, "none"), checkpoints=True), tmp_path / "build", "")
    assert len(b.deploy.pes) == 3
    store = CheckpointStore(tmp_path / "chk", keep=1000)
    out = tmp_path / "out"
    coord = _run(b, store, out, tmp_path / "logs", feed=lambda: _feed(folder, 0.015))
    want = [json.dumps({"i": i, "w": ((i // PER_FILE) * 7 + i % PER_FILE) % 11 * 2 + 1}) for i in range(N)]
    lines = (out / "out.jsonl").read_text().splitlines()
    assert [json.loads(x) for x in lines] == [json.loads(x) for x in want]

    ids = [n for n in store.ids() if (store.root / f"chk-{n:08d}" / "MANIFEST.json").exists()]
    assert len(ids) >= 5, (ids, coord.completed)
    pairs = {n: (_position(store, n), _committed_lines(store, n)) for n in ids}
    # one record in, one out: a checkpoint's position is exactly what its barrier closed
    assert all(p == c for p, c in pairs.values()), pairs
    # the feed trickles, the batch never fills, the delay is long: most barriers find
    # records held; the positions then fall between whole files' reads
    middle = [n for n, (p, _) in pairs.items() if 0 < p < N]
    assert middle, pairs

    # resume from a checkpoint in the middle: the failure-free output, no line twice
    chk = next(c for c in (store._read(n) for n in middle[len(middle) // 2:]) if c is not None)
    store.rewind_sinks(chk)
    out2 = tmp_path / "out2"
    _run(b, store, out2, tmp_path / "logs2", restore=chk)
    assert (out2 / "out.jsonl").read_text().splitlines() == lines
