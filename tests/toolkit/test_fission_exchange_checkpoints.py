"""Key exchanges survive kill -9 with checkpoints (issue 29's recovery, issue 27 item 4):
``tests/apps/exchange.py`` with its two regions at 2 x 2 (senders and receivers hold
state: the sender's last number and index, the receiver's queues and floors), on real
PEs through the real node agent, coordinator and store (``tests/checkpoint``'s restart
loop, no JVM): a PE killed three times, each after a new checkpoint, and the sink is
byte-identical to a run without failures."""

from __future__ import annotations

import dataclasses

import pytest

from spadeopt.codegen.render import generate
from spadeopt.optimize.strategies import plan_for
from spadeopt.orchestrate.build_local import build_and_run
from tests.apps.exchange import exchange
from tests.checkpoint.test_recovery import run_with_kills

REF = "tests/apps/exchange.py"


@pytest.mark.slow
@pytest.mark.parametrize("case", ["keyed", "source"])
def test_kill_three_times_through_an_exchange_gives_the_failure_free_answer(tmp_path, case):
    params = {"case": case, "tuples": 60_000, "split": 50, "wprep": 2, "wdesk": 2}
    g = exchange.build(params)
    ref = build_and_run(g, plan_for(g, "all"), workdir=tmp_path / "ref", app_ref=REF).dir / "out"
    slow = exchange.build({**params, "spin_us": 4000})
    plan = dataclasses.replace(plan_for(slow, "manual"), checkpoints=True)
    assert {r.name: r.fed for r in plan.regions}["desk"] == "exchange"
    b = generate(slow, plan, tmp_path / "build", REF)
    victims = [pe.pe for pe in b.deploy.pes if any("xmerge" in o or "xsplit" in o for o in pe.operators)]
    assert victims
    out, restarts, _ = run_with_kills(tmp_path / "ck", b, 3, 0.5, victims=victims)
    assert len(restarts) == 3 and all(r is not None for r in restarts), restarts
    assert (out / "sink.jsonl").read_bytes() == (ref / "sink.jsonl").read_bytes()


@pytest.mark.slow
def test_kill_three_times_through_an_exchange_into_an_event_time_window_gives_the_failure_free_answer(tmp_path):
    """Case ``timed`` (issue 36): a key exchange into region ``desk``, where a filter is
    before a tumbling event-time window (a window exchange: senders hold their clock,
    receivers their queues of tuples and watermark frames); trades out of order, some
    late. Killed three times, each after a new checkpoint, among the PEs holding exchange
    senders or receivers; the sink is byte-identical to a width-1 run without failures."""
    params = {"case": "timed", "tuples": 60_000, "split": 50, "wprep": 2, "wdesk": 2}
    g = exchange.build({**params, "wprep": 1, "wdesk": 1})
    ref = build_and_run(g, plan_for(g, "manual"), workdir=tmp_path / "ref", app_ref=REF).dir / "out"
    slow = exchange.build({**params, "spin_us": 4000})
    plan = dataclasses.replace(plan_for(slow, "manual"), checkpoints=True)
    assert {r.name: r.fed for r in plan.regions}["desk"] == "exchange"
    b = generate(slow, plan, tmp_path / "build", REF)
    victims = [pe.pe for pe in b.deploy.pes if any("xmerge" in o or "wsplit" in o or "wmerge" in o
                                                   for o in pe.operators)]
    assert victims
    out, restarts, _ = run_with_kills(tmp_path / "ck", b, 3, 0.5, victims=victims)
    assert len(restarts) == 3 and all(r is not None for r in restarts), restarts
    assert (out / "sink.jsonl").read_bytes() == (ref / "sink.jsonl").read_bytes()


@pytest.mark.slow
def test_kill_three_times_around_a_flushed_join_sides_exchange_gives_the_failure_free_answer(tmp_path):
    """``tests/apps/flush_join.py`` at width 2 (its join's left side behind a side
    exchange, decision 067: the join's checkpoint holds each side's high-water mark): the
    PEs of the exchange and the join killed in turn, the sink as without failures."""
    from tests.apps.flush_join import flush_join

    ref_app = "tests/apps/flush_join.py"
    params = {"tuples": 4000, "sensors": 30}
    g = flush_join.build(params)
    ref = build_and_run(g, plan_for(g, "all"), workdir=tmp_path / "ref", app_ref=ref_app).dir / "out"
    slow = flush_join.build({**params, "spin_us": 1500})
    plan = dataclasses.replace(plan_for(slow, "manual"), checkpoints=True)
    b = generate(slow, plan, tmp_path / "build", ref_app)
    victims = [pe.pe for pe in b.deploy.pes if any("__j__left__w" in o or o.startswith("j__") for o in pe.operators)]
    assert victims
    out, restarts, _ = run_with_kills(tmp_path / "ck", b, 3, 0.5, victims=victims)
    assert len(restarts) == 3 and all(r is not None for r in restarts), restarts
    assert (out / "matches.jsonl").read_bytes() == (ref / "matches.jsonl").read_bytes()
