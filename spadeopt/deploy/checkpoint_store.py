"""Where checkpoints are kept: ``CheckpointStore`` and what a resume checks.

``DIR/chk-<id>/<pe>.part`` (msgpack, see ``runtime.checkpoint_codec``) and
``MANIFEST.json`` written last (atomically): app, graph fingerprint, plan fingerprint
and the plan's operators, each part's size and SHA-256, the committed length of every file sink. File sinks'
committed lines are in ``DIR/sinks/<sink>.jsonl``: each checkpoint appends the lines
its barrier closed, so a replay after recovery never writes a line twice (exactly
once); at the end of a successful run the sink's output file is the committed lines,
then the lines after the last checkpoint (``finish_sinks``). The last ``keep`` complete
checkpoints are kept. ``DIR/LINEAGE`` names the directory's checkpoints in a
transactional sink's markers. A corrupt or partial checkpoint is skipped for the
previous complete one, loudly; another plan's of the same operators is regrouped by
operator (``checkpoint_regroup``); another app's, graph's or set of operators' is
refused naming the difference (``CheckpointMismatch``).

Nothing read from a checkpoint is unpickled or executed: the manifest is JSON checked
field by field, parts are checked against their SHA-256 here and decoded by the PE
with ``runtime.checkpoint_codec.decode_state`` (msgpack, known types only).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spadeopt.atomic import write_atomic, write_bytes_atomic
from spadeopt.deploy.checkpoint_regroup import plan_operators, regroup, regroup_problem
from spadeopt.deploy.checkpoint_rescale import RescaleRefused, rescale_plan
from spadeopt.errors import UsageError
from spadeopt.plan.deployment import Deployment

SCHEMA_VERSION = 1
MANIFEST = "MANIFEST.json"
LINEAGE = "LINEAGE"
_CHK = re.compile(r"chk-(\d{8})")
_SINK = re.compile(r"[A-Za-z_][A-Za-z0-9_@]*")


class CheckpointMismatch(UsageError):
    """A checkpoint of another app, graph or plan."""


def plan_fingerprint(deploy: Deployment) -> str:
    """The plan's identity for a resume: which PEs hold which operators, on which links."""
    doc = {"strategy": deploy.strategy, "pes": sorted([p.pe, list(p.operators)] for p in deploy.pes),
           "links": sorted([ln.src_pe, ln.src, ln.dst_pe, ln.dst] for ln in deploy.links)}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class Checkpoint:
    id: int
    path: Path
    manifest: dict[str, Any]
    parts: dict[str, bytes]



class CheckpointStore:
    """Complete checkpoints of one app under ``root`` (see the module doc)."""

    def __init__(self, root: Path, keep: int = 3, say=None) -> None:
        import secrets

        self.root = Path(root)
        self.keep = keep
        self.say = say or (lambda line: None)
        self.sinks = self.root / "sinks"
        self.run_id = secrets.token_hex(8)  # this run's (all its restarts'): a resume is another run

    def lineage(self) -> str:
        """The identity of the checkpoints in this directory (``LINEAGE``, made by the
        first run, kept by every resume): a transactional sink's marker of another lineage
        (an earlier, unrelated run into the same stream) does not hold back this one's."""
        import secrets

        path = self.root / LINEAGE
        try:
            text = path.read_text().strip()
        except FileNotFoundError:
            text = ""
        if not re.fullmatch(r"[0-9a-f]{32}", text):
            self.root.mkdir(parents=True, exist_ok=True)
            text = secrets.token_hex(16)
            write_atomic(path, text + "\n")
        return text

    def ids(self) -> list[int]:
        if not self.root.is_dir():
            return []
        return sorted(int(m.group(1)) for p in self.root.iterdir() if (m := _CHK.fullmatch(p.name)))

    def _dir(self, n: int) -> Path:
        return self.root / f"chk-{n:08d}"

    def write(self, n: int, deploy: Deployment, parts: dict[str, bytes], sinks: dict[str, bytes]) -> Checkpoint:
        """Store checkpoint ``n``: parts, then the sinks' lines, then the manifest (last,
        atomically: a checkpoint without one is partial and never read)."""
        d = self._dir(n)
        d.mkdir(parents=True, exist_ok=True)
        for pe, data in parts.items():
            write_bytes_atomic(d / f"{pe}.part", data)
        lengths = self.commit_sinks(sinks)
        manifest = {"schema_version": SCHEMA_VERSION, "id": n, "time": time.time(), "app": deploy.app,
                    "fingerprint": deploy.fingerprint, "plan": plan_fingerprint(deploy),
                    "strategy": deploy.strategy, "operators": plan_operators(deploy),
                    "parts": {pe: {"bytes": len(b), "sha256": hashlib.sha256(b).hexdigest()}
                              for pe, b in sorted(parts.items())},
                    "sinks": lengths}
        write_atomic(d / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        self._prune()
        return Checkpoint(n, d, manifest, parts)

    def commit_sinks(self, sinks: dict[str, bytes]) -> dict[str, int]:
        """Append each sink's lines to its committed file (flushed to disk); every
        committed file's length after it."""
        self.sinks.mkdir(parents=True, exist_ok=True)
        for name, data in sorted(sinks.items()):
            if not _SINK.fullmatch(name):
                raise ValueError(f"bad sink name {name!r}")
            if data:
                with open(self.sinks / f"{name}.jsonl", "ab") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
        return {p.stem: p.stat().st_size for p in sorted(self.sinks.glob("*.jsonl"))}

    def _prune(self) -> None:
        complete = [n for n in self.ids() if (self._dir(n) / MANIFEST).is_file()]
        for n in complete[:-self.keep]:
            shutil.rmtree(self._dir(n), ignore_errors=True)
        newest = complete[-1] if complete else 0
        for n in self.ids():  # partial ones older than the newest complete one
            if n < newest and not (self._dir(n) / MANIFEST).is_file():
                shutil.rmtree(self._dir(n), ignore_errors=True)

    def latest(self, deploy: Deployment, facts: dict[str, Any] | None = None) -> Checkpoint | None:
        """The newest complete checkpoint that fits ``deploy``: corrupt or partial ones are
        skipped (said loudly); one of another app, graph or plan is refused. ``facts``:
        the build's ``rescale.json`` (``checkpoint_rescale.load_facts``), with which one
        taken under other region widths is rescaled."""
        for n in reversed(self.ids()):
            try:
                chk = self._read(n)
            except ValueError as exc:
                self._loud(f"WARNING: checkpoint {n} in {self.root} is unusable ({exc}): skipped for the "
                           f"previous complete one")
                continue
            return self.fit(chk, deploy, facts)
        return None

    def _loud(self, line: str) -> None:
        print(f"spadeopt: {line}", file=sys.stderr, flush=True)
        self.say(line)

    def _read(self, n: int) -> Checkpoint:
        d = self._dir(n)
        path = d / MANIFEST
        if not path.is_file():
            raise ValueError("partial: no manifest (the run stopped before every PE's part was stored)")
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"manifest unreadable: {exc}") from None
        want = {"schema_version": int, "id": int, "app": str, "fingerprint": str, "plan": str,
                "strategy": str, "parts": dict, "sinks": dict}
        bad = [k for k, t in want.items() if type(doc.get(k) if type(doc) is dict else None) is not t]
        if bad:
            raise ValueError(f"manifest fields {', '.join(bad)} missing or of the wrong type")
        if doc["schema_version"] != SCHEMA_VERSION or doc["id"] != n:
            raise ValueError(f"manifest of version {doc['schema_version']} / id {doc['id']}")
        parts = {}
        for pe, meta in doc["parts"].items():
            if not _SINK.fullmatch(pe) or type(meta) is not dict:
                raise ValueError(f"bad part entry {pe!r}")
            try:
                data = (d / f"{pe}.part").read_bytes()
            except OSError as exc:
                raise ValueError(f"part of PE {pe} unreadable: {exc.strerror}") from None
            if len(data) != meta.get("bytes") or hashlib.sha256(data).hexdigest() != meta.get("sha256"):
                raise ValueError(f"part of PE {pe} does not match its manifest (size or SHA-256)")
            parts[pe] = data
        for name, length in doc["sinks"].items():
            if not _SINK.fullmatch(name) or type(length) is not int or length < 0:
                raise ValueError(f"bad sink entry {name!r}")
            have = (self.sinks / f"{name}.jsonl")
            if (have.stat().st_size if have.exists() else 0) < length:
                raise ValueError(f"committed output of sink '{name}' is shorter than the checkpoint says")
        return Checkpoint(n, d, doc, parts)

    def fit(self, chk: Checkpoint, deploy: Deployment, facts: dict[str, Any] | None = None) -> Checkpoint:
        """``chk`` as ``deploy``'s PEs restore it: as written for the plan that wrote it;
        for another plan of the same operators, its state regrouped by operator
        (``checkpoint_regroup``, said); for the same operators at other region widths
        (``facts``), its regions' state moved by key first (``checkpoint_rescale``, said);
        another app, graph or set of operators is refused."""
        m = chk.manifest
        diffs = []
        if m["app"] != deploy.app:
            diffs.append(f"it is app '{m['app']}''s, this is app '{deploy.app}'")
        elif m["fingerprint"] != deploy.fingerprint:
            diffs.append(f"the app's graph differs (fingerprint {m['fingerprint'][:12]} there, "
                         f"{deploy.fingerprint[:12]} here: the app's code or parameters changed)")
        same_plan = m["plan"] == plan_fingerprint(deploy) and set(m["parts"]) == {p.pe for p in deploy.pes}
        why = None if same_plan or diffs else regroup_problem(m, deploy)
        rescale = None
        if why is not None and isinstance(m.get("operators"), list):
            try:
                rescale = rescale_plan(m["operators"], plan_operators(deploy), facts)
            except RescaleRefused as exc:
                why = str(exc)
            if rescale is not None:
                why = None
        if why is not None:
            diffs.append(f"the plan differs (strategy '{m['strategy']}' with PEs {', '.join(sorted(m['parts']))} "
                         f"there; '{deploy.strategy}' with PEs {', '.join(sorted(p.pe for p in deploy.pes))} "
                         f"here) and {why}")
        if diffs:
            raise self._mismatch(chk, diffs)
        if same_plan:
            return chk
        self._loud(f"checkpoint {chk.id} was written under plan '{m['strategy']}' ({len(m['parts'])} PE(s)); "
                   f"its state is {'rescaled (' + rescale.said() + ') and ' if rescale else ''}regrouped by "
                   f"operator into this plan '{deploy.strategy}' ({len(deploy.pes)} PE(s))")
        try:
            return Checkpoint(chk.id, chk.path, m, regroup(chk.parts, deploy, chk.id, rescale))
        except RescaleRefused as exc:
            raise self._mismatch(chk, [f"its state cannot move to this plan's widths: {exc}"]) from None

    @staticmethod
    def _mismatch(chk: Checkpoint, diffs: list[str]) -> CheckpointMismatch:
        return CheckpointMismatch(f"cannot resume from checkpoint {chk.id} in {chk.path.parent}: "
                                  + "; ".join(diffs) + ". Resume with a build of the same app and parallel "
                                  "widths (any fusion), or start afresh with another --checkpoint-dir")

    def rewind_sinks(self, chk: Checkpoint | None) -> None:
        """Cut every committed sink file back to what ``chk`` committed (nothing: none)."""
        lengths = chk.manifest["sinks"] if chk else {}
        if not self.sinks.is_dir():
            return
        for p in self.sinks.glob("*.jsonl"):
            with open(p, "r+b") as f:
                f.truncate(lengths.get(p.stem, 0))


def finish_sinks(store: CheckpointStore, out: Path, tails: dict[str, bytes]) -> None:
    """Each file sink's output: its committed lines, the lines of checkpoints that
    never completed, then what the run wrote after its last barrier (already in
    ``out/<sink>.jsonl``: the launcher committed the run's part files)."""
    store.commit_sinks(tails)
    if not store.sinks.is_dir():
        return
    for p in sorted(store.sinks.glob("*.jsonl")):
        target = out / p.name
        tail = target.read_bytes() if target.exists() else b""
        write_bytes_atomic(target, p.read_bytes() + tail)
