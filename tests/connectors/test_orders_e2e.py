"""apps/orders.py on a real local Spark against the real broker (``make broker``): orders
written to 4 stream keys come out of the totals stream complete and correct, the same
rows as a file replay of the same orders, under NONE, FALL, FMAN and FATM; a broker that
does not answer is refused before any PE starts; the password is in no build file."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.cli.clitools import ROOT, cli
from tests.rows import by_customer


def _orders_module():
    """apps/orders.py by path (``apps`` may name tests/apps on this sys.path)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_orders_app", ROOT / "apps" / "orders.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

N_ORDERS = 3000


def _totals(client, key: str) -> list[dict]:
    return [json.loads(f[b"value"]) for _, f in client.xrange(key)]


@pytest.mark.spark
@pytest.mark.slow
def test_orders_from_four_stream_keys_match_a_file_replay_under_every_fusion(redis_client, broker, tmp_path):
    prefix = f"spadeopt-test:{uuid.uuid4().hex[:12]}:orders"
    orders = _orders_module()
    records = orders.make_orders(N_ORDERS, customers=40, seed=7)
    orders.feed(redis_client, records, keys=4, prefix=prefix)
    assert all(redis_client.xlen(f"{prefix}:{k}") > 0 for k in range(4))
    replay = tmp_path / "orders.jsonl"
    replay.write_text("".join(json.dumps(r) + "\n" for r in records))
    params = ["-p", f"prefix={prefix}"]
    try:
        ref = cli("run", "apps/orders.py", "--fusion", "all", "-p", f"input={replay}", "-p", "output=file",
                  "--out", tmp_path / "ref", "--build-dir", tmp_path / "build-ref")
        assert ref.returncode == 0, ref.stderr
        expected = [json.loads(line) for line in (tmp_path / "ref" / "out.jsonl").read_text().splitlines()]
        assert len(expected) > N_ORDERS // 10

        prof = cli("profile", "apps/orders.py", "--fusion", "all", *params, "--no-production-probe",
                   "-o", tmp_path / "prof-run")
        assert prof.returncode == 0, prof.stderr
        assert cli("refine", tmp_path / "prof-run", "-o", tmp_path / "profile.json").returncode == 0
        opt = cli("optimize", "apps/orders.py", "--profile", tmp_path / "profile.json", *params,
                  "-o", tmp_path / "build-auto")
        assert opt.returncode == 0, opt.stderr

        for fusion in ("none", "all", "manual", "auto"):
            redis_client.delete(f"{prefix}:totals")
            target = ["apps/orders.py", "--fusion", fusion, *params] if fusion != "auto" else [tmp_path / "build-auto"]
            res = cli("run", *target, "--build-dir", tmp_path / f"build-{fusion}") if fusion != "auto" \
                else cli("run", *target)
            assert res.returncode == 0, (fusion, res.stderr)
            got = _totals(redis_client, f"{prefix}:totals")
            assert len(got) == len(expected), fusion
            assert by_customer(got) == by_customer(expected), fusion

        password = (broker.address.password_file and open(broker.address.password_file).read().strip())
        for build in [tmp_path / f"build-{f}" for f in ("none", "all", "manual")] + [tmp_path / "build-auto"]:
            for f in build.rglob("*"):
                if f.is_file():
                    assert password.encode() not in f.read_bytes(), f
    finally:
        for key in redis_client.scan_iter(match=f"{prefix}*"):
            redis_client.delete(key)


def test_an_unreachable_broker_stops_the_run_before_anything_starts(tmp_path):
    app = tmp_path / "lost.py"
    app.write_text(
        "from spadeopt import App, app\n"
        "from spadeopt.connectors import redis_source\n"
        "@app\n"
        "def lost() -> App:\n"
        "    a = App('lost')\n"
        "    s = a.source('src', 'x:int', connector=redis_source('k', until='end', broker='redis://127.0.0.1:1'))\n"
        "    a.sink('out', s)\n"
        "    return a\n")
    res = cli("run", app, "--build-dir", tmp_path / "build", "--out", tmp_path / "out")
    assert res.returncode == 2
    assert "source 'src': cannot reach the Redis broker at redis://127.0.0.1:1" in res.stderr
    assert not (tmp_path / "build").exists() and not (tmp_path / "out").exists()


def test_connector_mistakes_are_reported_with_the_apps_other_problems(tmp_path):
    app = tmp_path / "bad.py"
    app.write_text(
        "from spadeopt import App, app\n"
        "from spadeopt.connectors import redis_sink, redis_source, tcp_source\n"
        "@app\n"
        "def bad() -> App:\n"
        "    a = App('bad')\n"
        "    s = a.source('src', 'x:int, ts:str', connector=redis_source('k', format='xml', time_from_id='ts'))\n"
        "    t = a.source('tcp', 'x:int', connector=redis_sink('out'))\n"
        "    a.sink('out', s, connector=tcp_source(1))\n"
        "    a.sink('out2', t)\n"
        "    return a\n")
    res = cli("build", app, "-o", tmp_path / "build")
    assert res.returncode == 2
    for part in ("source 'src' (Redis stream(s) k at redis://127.0.0.1:", "format 'xml'",
                 "time_from_id 'ts' must be an int", "source 'tcp': connector= takes a source connector",
                 "sink 'out': connector= takes a sink connector"):
        assert part in res.stderr, part


def test_a_prebuilt_build_whose_broker_does_not_answer_is_refused_before_anything_starts(tmp_path):
    """``spadeopt run BUILD_DIR`` loads the build's app (app_ref, params) for the same checks."""
    app = tmp_path / "lost2.py"
    app.write_text(
        "from spadeopt import App, app\n"
        "from spadeopt.connectors import redis_source\n"
        "@app\n"
        "def lost2(port: int = 16379) -> App:\n"
        "    a = App('lost2')\n"
        "    s = a.source('src', 'x:int', connector=redis_source('k', until='end', broker=f'redis://127.0.0.1:{port}'))\n"
        "    a.sink('out', s)\n"
        "    return a\n")
    assert cli("build", app, "-p", "port=1", "-o", tmp_path / "build").returncode == 0
    res = cli("run", tmp_path / "build", "--out", tmp_path / "out")
    assert res.returncode == 2, res.stderr
    assert "source 'src': cannot reach the Redis broker at redis://127.0.0.1:1" in res.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "build" / "logs").exists()
