"""A PE's sources share one thread (``PERuntime.drive_sources``), one batch per turn.

Real builds, run through ``spadeopt.api`` on local Spark: the sources of a FALL build
take turns, a crash names the source and operator it came from, and a profile still
gives each source the CPU of its own turns, not of the thread they share.
"""

from __future__ import annotations

import json

import pytest

from spadeopt import api
from spadeopt.deploy.options import RunOptions
from spadeopt.refine.job import refine

pytestmark = pytest.mark.spark


def test_two_sources_of_one_pe_take_turns_and_write_what_none_writes(tmp_path):
    params = {"tuples": "3000", "a_ns": "0", "b_ns": "0"}
    api.run("tests/apps/twosrc.py", "none", params, build_dir=tmp_path / "bn", options=RunOptions(out=tmp_path / "none"))
    api.run("tests/apps/twosrc.py", "all", params, build_dir=tmp_path / "ba", options=RunOptions(out=tmp_path / "all"))
    for sink in ("a_sink", "b_sink"):
        assert (tmp_path / "all" / f"{sink}.jsonl").read_bytes() == (tmp_path / "none" / f"{sink}.jsonl").read_bytes()
    module = (tmp_path / "ba" / "pe0.py").read_text()
    assert module.count("yield  # one batch per turn") == 2 and "_lock" not in module


def test_a_crash_on_the_second_source_names_its_operator_and_source(tmp_path):
    with pytest.raises(Exception) as exc:
        api.run("tests/apps/twosrc.py", "all", {"tuples": "5000", "a_ns": "0", "b_ns": "0", "crash_at": "2500"},
                build_dir=tmp_path / "b", options=RunOptions(out=tmp_path / "o"))
    msg = str(exc.value)
    assert "operator 'b_boom'" in msg and "PE pe0" in msg and "ValueError: bad tuple 2500" in msg, msg


def test_each_source_of_a_shared_thread_is_profiled_with_its_own_cpu(tmp_path):
    """a burns 20 us per tuple, b 60 us: with one thread clock for both, each would get
    the sum (80 us); each must get its own within 15 %."""
    params = {"tuples": "15000", "a_ns": "20000", "b_ns": "60000"}
    _, run_dir = api.profile("tests/apps/twosrc.py", tmp_path / "run", "all", params, sample_rate=0.01,
                             production_probe=False)
    p = refine([run_dir], tmp_path / "p.json")
    for op, ns in (("a", 20_000), ("b", 60_000)):
        rate = sum(p.outputs[x].rate for x in p.operators[op].outputs)
        truth = ns * 1e-9 * rate
        assert abs(p.operators[op].u - truth) <= 0.15 * truth, (op, p.operators[op].u, truth, p.warnings)
    pes = json.loads((run_dir / "manifest.json").read_text())["plan"]["pes"]
    assert len(pes) == 1 and {"a", "b"} <= set(pes[0]["operators"]), "both sources must share the PE"
