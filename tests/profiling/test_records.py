"""The raw profile on disk: round trip, validation, run-directory checks."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from spadeopt.errors import ProfileError, UsageError
from spadeopt.profiling import PointKey, Profiler
from spadeopt.profiling.records import (
    SCHEMA_VERSION,
    Manifest,
    SampleRecord,
    check_run_dir,
    host_info,
    read_run,
    write_manifest,
    write_pe_samples,
)


def _profiler(pe: str, op: str) -> Profiler:
    prof = Profiler(pe, sample_rate=0.1, reservoir_size=8, seed=42)
    out = prof.point(PointKey(op, "out0", "out"), subscribers=(f"{op}2.in0", f"{op}3.in0"))
    inp = prof.point(PointKey(op, "in0", "in"))
    thr = prof.point(PointKey(op, "source", "thread"))
    cd_out, cd_in = out.countdown, inp.countdown
    thr.sample_thread(0)
    for i in range(200):
        batch = [(i, "t" * (i % 5))] * (1 + i % 7)
        cd_in -= len(batch)
        if cd_in <= 0:
            cd_in = inp.sample_process(cd_in, batch, 1234 * len(batch))
        cd_out -= len(batch)
        if cd_out <= 0:
            cd_out = out.sample_submit(cd_out, batch, 999 * i + 1, (333 * i, 1 + 3 * i))
            thr.sample_thread(1_000_003 * i)
    out.close(cd_out)
    inp.close(cd_in)
    return prof


def _manifest(pe_files: tuple[str, ...]) -> Manifest:
    host = host_info()
    return Manifest(
        app="wordcount",
        graph_fingerprint="sha256:abc",
        plan={"strategy": "none", "partitions": [["A"], ["B"]]},
        params={"duration": 2.5},
        host=host.host,
        cores=host.cores,
        cpu_model=host.cpu_model,
        duration=2.5,
        seed=42,
        sample_rate=0.1,
        reservoir_size=8,
        started=1_763_750_000.25,
        finished=1_763_750_002.75,
        pe_files=pe_files,
    )


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    root = check_run_dir(tmp_path / "run")
    files = []
    for pe, op in (("pe_1", "A"), ("pe_2", "B")):
        path = _profiler(pe, op).write(root)
        files.append(path.relative_to(root).as_posix())
    write_manifest(root, _manifest(tuple(files)))
    return root


def test_records_round_trip(run_dir: Path) -> None:
    run = read_run(run_dir)
    assert run.manifest == _manifest(("raw/pe_1.jsonl", "raw/pe_2.jsonl"))
    assert run.manifest.schema_version == SCHEMA_VERSION
    assert run.manifest.pe_ids() == ("pe_1", "pe_2")
    expected = _profiler("pe_1", "A").dump() + _profiler("pe_2", "B").dump()
    # Timestamps differ between runs; everything else is deterministic, values exact.
    strip = [r._replace(ts=0.0) for r in run.records]
    assert strip == [r._replace(ts=0.0) for r in expected]
    assert {r.metric for r in run.records} == {
        "count",
        "size",
        "submit_cpu",
        "process_cpu",
        "thread_cpu",
        "total",
    }
    assert all(isinstance(r, SampleRecord) for r in run.records)


def test_sample_lines_have_the_documented_shape(run_dir: Path) -> None:
    line = (run_dir / "raw/pe_1.jsonl").read_text().splitlines()[0]
    assert list(json.loads(line)) == ["pe", "op", "port", "dir", "sub", "metric", "ts", "value"]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["schema_version"] == 1
    assert manifest["pe_files"] == ["raw/pe_1.jsonl", "raw/pe_2.jsonl"]


def test_floats_survive_exactly(tmp_path: Path) -> None:
    rec = SampleRecord("pe_1", "A", "out0", "out", None, "submit_cpu", 1e9 + 1 / 3, 0.1 + 0.2)
    write_pe_samples(tmp_path, "pe_1", [rec])
    write_manifest(tmp_path, _manifest(("raw/pe_1.jsonl",)))
    assert read_run(tmp_path).records == (rec,)


def test_a_pe_without_samples_is_an_empty_file(tmp_path: Path) -> None:
    Profiler("pe_1").write(tmp_path)
    write_manifest(tmp_path, _manifest(("raw/pe_1.jsonl",)))
    assert (tmp_path / "raw/pe_1.jsonl").read_bytes() == b""
    assert read_run(tmp_path).records == ()


# --- corrupt, truncated, missing ---------------------------------------------------------


def _pe1(run_dir: Path) -> Path:
    return run_dir / "raw" / "pe_1.jsonl"


def _rewrite_line(path: Path, lineno: int, text: str) -> None:
    lines = path.read_text().splitlines()
    lines[lineno - 1] = text
    path.write_text("".join(line + "\n" for line in lines))


def test_missing_manifest(run_dir: Path) -> None:
    (run_dir / "manifest.json").unlink()
    with pytest.raises(ProfileError, match=r"manifest\.json is missing.*re-run"):
        read_run(run_dir)


def test_corrupt_manifest_names_file_and_line(run_dir: Path) -> None:
    path = run_dir / "manifest.json"
    path.write_text(path.read_text().replace('"app": "wordcount",', '"app": "wordcount"'))
    with pytest.raises(ProfileError, match=r"manifest\.json line 4: not valid JSON"):
        read_run(run_dir)


def test_truncated_manifest(run_dir: Path) -> None:
    path = run_dir / "manifest.json"
    path.write_text(path.read_text()[:100])
    with pytest.raises(ProfileError, match=r"manifest\.json line \d+: not valid JSON"):
        read_run(run_dir)


def test_unknown_schema_version(run_dir: Path) -> None:
    path = run_dir / "manifest.json"
    data = json.loads(path.read_text())
    data["schema_version"] = 2
    path.write_text(json.dumps(data))
    with pytest.raises(ProfileError, match=r"schema_version 2 is not supported"):
        read_run(run_dir)


def test_invalid_manifest_lists_every_problem(run_dir: Path) -> None:
    path = run_dir / "manifest.json"
    data = json.loads(path.read_text())
    del data["seed"]
    data["cores"] = 0
    data["pe_files"] = ["../elsewhere.jsonl"]
    path.write_text(json.dumps(data))
    with pytest.raises(ProfileError, match=r"3 problem") as err:
        read_run(run_dir)
    assert "'seed' is missing" in str(err.value)
    assert "'cores' must be an integer >= 1" in str(err.value)
    assert "pe_files" in str(err.value)


def test_missing_pe_file(run_dir: Path) -> None:
    _pe1(run_dir).unlink()
    with pytest.raises(ProfileError, match=r"pe_1\.jsonl is missing but listed in the manifest"):
        read_run(run_dir)


def test_corrupt_line_names_file_and_line(run_dir: Path) -> None:
    _rewrite_line(_pe1(run_dir), 3, '{"pe": "pe_1", "op": ')
    with pytest.raises(ProfileError, match=r"raw/pe_1\.jsonl line 3: not valid JSON"):
        read_run(run_dir)


def test_truncated_file_names_file_and_last_line(run_dir: Path) -> None:
    path = _pe1(run_dir)
    data = path.read_bytes()
    n_lines = data.count(b"\n")
    path.write_bytes(data[:-10])
    with pytest.raises(ProfileError, match=rf"pe_1\.jsonl line {n_lines}: truncated"):
        read_run(run_dir)


def test_binary_garbage_is_a_profile_error(run_dir: Path) -> None:
    _pe1(run_dir).write_bytes(b'{"pe": "\xff\xfe"}\n')
    with pytest.raises(ProfileError, match=r"pe_1\.jsonl line 1"):
        read_run(run_dir)


GOOD = {
    "pe": "pe_1",
    "op": "A",
    "port": "out0",
    "dir": "out",
    "sub": None,
    "metric": "count",
    "ts": 1.0,
    "value": 3,
}


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"pe": "pe_2"}, "'pe' is 'pe_2' in the file of PE 'pe_1'"),
        ({"dir": "up"}, "'dir' must be one of"),
        ({"metric": "thread_cpu"}, "metric 'thread_cpu' does not exist for dir 'out'"),
        ({"metric": "process_cpu"}, "'sub' must be a subscriber"),
        ({"sub": "C.in0"}, "'sub' must be null"),
        ({"value": "3"}, "'value' must be a finite number"),
        ({"ts": None}, "'ts' must be a finite number"),
        ({"value": float("nan")}, "'value' must be a finite number"),
        ({"op": ""}, "'op' must be a non-empty string"),
        ({"extra": 1}, "expected the keys"),
    ],
)
def test_malformed_records_are_rejected(
    run_dir: Path, change: dict[str, object], match: str
) -> None:
    _rewrite_line(_pe1(run_dir), 2, json.dumps({**GOOD, **change}))
    with pytest.raises(ProfileError, match=rf"pe_1\.jsonl line 2: {match}"):
        read_run(run_dir)


# --- writers -----------------------------------------------------------------------------


def test_failed_write_leaves_old_file_and_no_temp_file(tmp_path: Path) -> None:
    good = SampleRecord("pe_1", "A", "out0", "out", None, "count", 1.0, 1)
    path = write_pe_samples(tmp_path, "pe_1", [good])
    before = path.read_bytes()
    with pytest.raises(ProfileError, match="cannot be written as JSON"):
        write_pe_samples(tmp_path, "pe_1", [good, good._replace(value=float("inf"))])
    assert path.read_bytes() == before
    assert os.listdir(path.parent) == ["pe_1.jsonl"]


def test_writer_rejects_records_of_another_pe(tmp_path: Path) -> None:
    rec = SampleRecord("pe_2", "A", "out0", "out", None, "count", 1.0, 1)
    with pytest.raises(UsageError, match="PE 'pe_2' handed to the writer of PE 'pe_1'"):
        write_pe_samples(tmp_path, "pe_1", [rec])


def test_manifest_is_not_written_while_a_pe_file_is_missing(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match=r"raw/pe_1\.jsonl"):
        write_manifest(tmp_path, _manifest(("raw/pe_1.jsonl",)))
    assert not (tmp_path / "manifest.json").exists()


def test_manifest_with_non_json_plan_is_a_profile_error(tmp_path: Path) -> None:
    Profiler("pe_1").write(tmp_path)
    bad = dataclasses.replace(_manifest(("raw/pe_1.jsonl",)), plan={"x": object()})
    with pytest.raises(ProfileError, match="cannot be written as JSON"):
        write_manifest(tmp_path, bad)
    assert sorted(os.listdir(tmp_path)) == ["raw"]


# --- run directory checks ----------------------------------------------------------------


def test_check_run_dir_accepts_new_and_empty_dirs(tmp_path: Path) -> None:
    assert check_run_dir(tmp_path / "a" / "b") == tmp_path / "a" / "b"
    assert not (tmp_path / "a").exists()  # nothing written
    assert check_run_dir(tmp_path) == tmp_path


def test_check_run_dir_refuses_a_finished_run(run_dir: Path) -> None:
    with pytest.raises(UsageError, match="already holds a profiling run"):
        check_run_dir(run_dir)


def test_check_run_dir_refuses_an_unfinished_run(tmp_path: Path) -> None:
    Profiler("pe_1").write(tmp_path)
    with pytest.raises(UsageError, match="unfinished run"):
        check_run_dir(tmp_path)


def test_check_run_dir_refuses_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(UsageError, match="not a directory"):
        check_run_dir(tmp_path / "f")
    with pytest.raises(UsageError, match="cannot create run directory"):
        check_run_dir(tmp_path / "f" / "run")


def test_check_run_dir_refuses_unwritable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Tests may run as root, for whom chmod does not bite; simulate the permission check.
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    with pytest.raises(UsageError, match="is not writable"):
        check_run_dir(tmp_path)
    with pytest.raises(UsageError, match="cannot create run directory .* not writable"):
        check_run_dir(tmp_path / "new")
    assert os.listdir(tmp_path) == []
