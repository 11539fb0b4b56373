"""A parallel region led by a Redis Streams source of several keys (issue 28 Deliver 3,
issue 27 "broker partitions"): channel c reads stream keys c, c + width, ... (no split),
the merge interleaves the channels by arrival, and every customer (the declared
``partitioned_by``) gets exactly the width-1 rows, and a file replay's, in the same
order, at widths 2 and 4 on real PEs against the real broker (``make broker``); a region
the rules refuse stops the build with exit 2 naming the operator and the rule."""

from __future__ import annotations

import json
import random
import zlib
from collections import defaultdict

import pytest

from spadeopt.optimize.strategies import plan_for
from spadeopt.orchestrate.build_local import build_and_run
from tests.cli.clitools import cli, refused
from tests.connectors.partitioned_app import porders

APP = "tests/connectors/partitioned_app.py"
KEYS = 4


def _orders(n: int, seed: int = 5) -> list[dict]:
    rng = random.Random(seed)
    return [{"order_id": i, "customer": f"c{rng.randrange(30):02d}", "region": rng.choice("NESW"),
             "amount": round(rng.uniform(-20, 200), 2)} for i in range(n)]


def _feed(client, prefix: str, records: list[dict]) -> None:
    """Each customer's orders on one stream key (a stable CRC-32 of the customer), in order."""
    pipe = client.pipeline(transaction=False)
    for r in records:
        pipe.xadd(f"{prefix}:{zlib.crc32(r['customer'].encode()) % KEYS}", {"value": json.dumps(r)})
    pipe.execute()


def _by_customer(rows: list[dict]) -> dict[str, list[dict]]:
    out = defaultdict(list)
    for r in rows:
        out[r["customer"]].append(r)
    return dict(out)


def test_each_customer_gets_the_width_1_rows_in_order_at_widths_2_and_4(redis_client, keyspace, tmp_path):
    records = _orders(1500)
    _feed(redis_client, keyspace, records)
    assert all(redis_client.xlen(f"{keyspace}:{k}") for k in range(KEYS))
    replay = tmp_path / "orders.jsonl"
    replay.write_text("".join(json.dumps(r) + "\n" for r in records))

    ref = porders.build({"input": str(replay)})
    want = build_and_run(ref, "all", app_ref=APP, workdir=tmp_path / "ref").sinks["out"]
    assert len(want) > 200
    want = _by_customer(want)
    for width in (1, 2, 4):
        g = porders.build({"prefix": keyspace, "width": width})
        plan = plan_for(g, "manual")
        assert [(r.width, r.ordering) for r in plan.regions] == [(width, "arrival")]
        got = build_and_run(g, plan, app_ref=APP, workdir=tmp_path / f"w{width}").sinks["out"]
        assert _by_customer(got) == want, width


@pytest.mark.parametrize(("params", "needles"), [
    (["by="], ["operator 'orders' is a connector source of 4 stream keys that does not declare",
               "partitioned_by=[attributes]"]),
    (["keys=1"], ["operator 'orders' is a connector source reading one stream key"]),
    (["key=region"], ["operator 'totals' is partitioned on ['region'], which does not include 'customer' of "
                      "source 'orders''s partitioned_by ['customer']"]),
    (["width=5"], ["region 'live': width 5 is more than the 4 stream keys source 'orders' reads"]),
    (["by=customer,nope"], ["partitioned_by names 'nope', not attribute(s) of the schema"]),
])
def test_a_region_the_rules_refuse_stops_the_build_naming_operator_and_rule(tmp_path, params, needles):
    res = cli("build", APP, *[x for p in params for x in ("-p", p)], "--fusion", "manual", "-o", tmp_path / "b")
    refused(res, *needles)
    assert not (tmp_path / "b").exists()
