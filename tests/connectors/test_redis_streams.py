"""Redis Streams source and sink against the real server (``make broker``)."""

from __future__ import annotations

import json

import msgpack
import pytest

from spadeopt.connectors import redis_sink, redis_source
from spadeopt.connectors.contract import ConnectorError
from spadeopt.connectors.redis_stream_sink import RedisStreamSink
from spadeopt.connectors.redis_streams import RedisStreamSource

SCHEMA = [["id", "int"], ["sym", "str"], ["px", "float"]]


def _source(spec, schema=SCHEMA, **over):
    args = {**dict(spec.args), **over}
    return RedisStreamSource(name="src", schema=schema, **args)


def _all(src, n=3):
    out = []
    src.open()
    try:
        while (batch := src.read(n)) is not None:
            assert batch != [] or src.until is None, "a bounded read past the end must end, not idle"
            if not batch:
                break
            out.extend(batch)
    finally:
        src.close()
    return out


def _add(client, key, objs, fmt="json"):
    ids = []
    for o in objs:
        value = json.dumps(o) if fmt == "json" else msgpack.packb(o) if fmt == "msgpack" else o
        ids.append(client.xadd(key, {"value": value}).decode())
    return ids


def test_bounded_read_from_the_beginning_keeps_each_keys_order(redis_client, keyspace):
    keys = [f"{keyspace}:{i}" for i in range(3)]
    for i, k in enumerate(keys):
        _add(redis_client, k, [{"id": 10 * i + j, "sym": f"s{i}", "px": j + 0.5} for j in range(5)])
    recs = _all(_source(redis_source(keys, until="end")))
    assert sorted(recs) == sorted((10 * i + j, f"s{i}", j + 0.5) for i in range(3) for j in range(5))
    for i in range(3):
        assert [r[0] for r in recs if r[1] == f"s{i}"] == [10 * i + j for j in range(5)]


def test_until_end_stops_at_the_end_seen_at_open(redis_client, keyspace):
    key = f"{keyspace}:a"
    _add(redis_client, key, [{"id": j, "sym": "a", "px": 1.0} for j in range(4)])
    src = _source(redis_source(key, until="end"))
    src.open()
    _add(redis_client, key, [{"id": 99, "sym": "late", "px": 1.0}])  # after open: not read
    got = []
    while (b := src.read(2)) is not None:
        got.extend(b)
    src.close()
    assert [r[0] for r in got] == [0, 1, 2, 3]


def test_a_live_source_reads_nothing_without_blocking_then_what_arrives(redis_client, keyspace):
    key = f"{keyspace}:live"
    src = _source(redis_source(key, start="end"))
    src.open()
    assert src.read(10) == []  # nothing yet: an idle read, not the end
    _add(redis_client, key, [{"id": 1, "sym": "x", "px": 2.0}])
    assert src.read(10) == [(1, "x", 2.0)]
    assert src.read(10) == []
    assert src.lag() == 0
    _add(redis_client, key, [{"id": 2, "sym": "x", "px": 2.0}, {"id": 3, "sym": "x", "px": 2.0}])
    assert src.lag() == 2
    pos = src.position()[key]
    src.close()
    # a new source resumes after a recorded entry ID
    assert _all(_source(redis_source(key, start=pos, count=5))) == [(2, "x", 2.0), (3, "x", 2.0)]


def test_count_bounds_the_read(redis_client, keyspace):
    key = f"{keyspace}:c"
    _add(redis_client, key, [{"id": j, "sym": "a", "px": 1.0} for j in range(10)])
    assert [r[0] for r in _all(_source(redis_source(key, count=7)), n=4)] == list(range(7))


@pytest.mark.parametrize("fmt", ["json", "csv", "msgpack", "fields"])
def test_every_value_format_round_trips_through_the_sink(redis_client, keyspace, fmt):
    key = f"{keyspace}:{fmt}"
    rows = [(1, "a,b", 1.25), (2, 'q"uote', -3.0), (3, "plain", 1e300)]
    sink = RedisStreamSink(name="out", names=["id", "sym", "px"], types=["int", "str", "float"],
                           **{**dict(redis_sink(key, format=fmt).args)})
    sink.open()
    sink.write(rows[:2])
    sink.write(rows[2:])
    assert sink.report()["written"] == 3
    sink.close()
    assert _all(_source(redis_source(key, format=fmt, until="end"))) == rows


def test_the_sink_caps_the_stream_length(redis_client, keyspace):
    key = f"{keyspace}:cap"
    sink = RedisStreamSink(name="out", names=["id"], types=["int"], **dict(redis_sink(key, maxlen=100).args))
    for i in range(10):
        sink.write([(i * 100 + j,) for j in range(100)])
    sink.close()
    assert redis_client.xlen(key) < 400  # approximate trimming (MAXLEN ~): whole nodes go


def test_a_malformed_value_names_the_stream_entry_and_value(redis_client, keyspace):
    key = f"{keyspace}:bad"
    ids = _add(redis_client, key, [{"id": 1, "sym": "a", "px": 1.0}, {"id": "seven", "sym": "a", "px": 1.0}])
    with pytest.raises(ValueError) as err:
        _all(_source(redis_source(key, until="end")))
    msg = str(err.value)
    assert f"stream '{key}' entry {ids[1]}" in msg and "attribute 'id'" in msg and "'seven'" in msg
    redis_client.xadd(key, {"other": "x"})
    with pytest.raises(ValueError, match="no field 'value'"):
        _all(_source(redis_source(key, start=ids[1], until="end")))


def test_malformed_values_go_to_the_dead_letter_stream_when_asked(redis_client, keyspace):
    key, dead = f"{keyspace}:in", f"{keyspace}:dead"
    _add(redis_client, key, [{"id": 1, "sym": "a", "px": 1.0}])
    redis_client.xadd(key, {"value": "{not json"})
    _add(redis_client, key, [{"id": 3, "sym": "a", "px": 1.0}])
    assert [r[0] for r in _all(_source(redis_source(key, until="end", dead_letter=dead)))] == [1, 3]
    (entry_id, fields), = redis_client.xrange(dead)
    assert fields[b"stream"].decode() == key and b"not a JSON object" in fields[b"error"]
    assert fields[b"value"] == b"{not json"


def test_event_time_from_the_entry_id(redis_client, keyspace):
    key = f"{keyspace}:t"
    redis_client.xadd(key, {"value": json.dumps({"id": 1})}, id="1700000000123-0")
    redis_client.xadd(key, {"value": json.dumps({"id": 2})}, id="1700000000456-3")
    ms = _all(_source(redis_source(key, until="end", time_from_id="ts"), schema=[["id", "int"], ["ts", "int"]]))
    assert ms == [(1, 1700000000123), (2, 1700000000456)]
    sec = _all(_source(redis_source(key, until="end", time_from_id="ts"), schema=[["ts", "float"], ["id", "int"]]))
    assert sec == [(1700000000.123, 1), (1700000000.456, 2)]
    later = _all(_source(redis_source(key, until="end", start_time=1700000000.2, time_from_id="ts"),
                         schema=[["id", "int"], ["ts", "int"]]))
    assert later == [(2, 1700000000456)]


def test_a_consumer_group_shares_the_entries_and_acknowledges_them(redis_client, keyspace):
    key = f"{keyspace}:g"
    _add(redis_client, key, [{"id": j, "sym": "a", "px": 1.0} for j in range(6)])
    a = _source(redis_source(key, group="g", consumer="a", until="end"))
    b = _source(redis_source(key, group="g", consumer="b", until="end"))
    a.open()
    b.open()
    first = a.read(4)
    rest = b.read(10)
    assert [r[0] for r in first + rest] == list(range(6))
    assert a.read(10) is None and b.read(10) is None
    a.close()
    b.close()
    assert redis_client.xpending(key, "g")["pending"] == 0


def test_channels_split_the_stream_keys(redis_client, keyspace):
    keys = [f"{keyspace}:{i}" for i in range(4)]
    for i, k in enumerate(keys):
        _add(redis_client, k, [{"id": i, "sym": "a", "px": 1.0}])
    spec = redis_source(keys, until="end")
    got = [sorted(r[0] for r in _all(_source(spec, part=p, parts=2))) for p in range(2)]
    assert got == [[0, 2], [1, 3]]


def test_an_unreachable_broker_is_a_clear_error(keyspace):
    src = _source(redis_source("k", until="end", broker="redis://127.0.0.1:1"))
    with pytest.raises(ConnectorError, match="source 'src': cannot reach the Redis broker at redis://127.0.0.1:1"):
        src.open()


def test_a_wrong_password_is_refused_by_the_server(broker, tmp_path):
    bad = tmp_path / "pw"
    bad.write_text("not-the-password\n")
    bad.chmod(0o600)
    src = _source(redis_source("k", until="end", password_file=str(bad)))
    with pytest.raises(ConnectorError, match="refused the password"):
        src.open()
    bad.chmod(0o644)
    with pytest.raises(ConnectorError, match="readable by others"):
        _source(redis_source("k", until="end", password_file=str(bad))).open()


def test_bad_connector_arguments_are_all_reported():
    spec = redis_source([], format="yaml", start="middle", group="g", until="forever", count=0,
                        broker="redis://user:pw@host:1")
    text = "\n".join(spec.problems)
    for part in ("keys must be", "format 'yaml'", "start must be", "group= and consumer=", "until must be",
                 "count must be", "carries credentials"):
        assert part in text


def test_reads_sent_ahead_on_a_backlog_give_every_entry_once_in_order(redis_client, keyspace):
    """A full reply sends the next XREAD at once (``_xread``); a read that asks for other
    positions (a count limit cut the batch, a key ended) drops that reply and asks again;
    closing with a reply owed leaves a connection nobody reuses."""
    key = f"{keyspace}:ahead"
    pipe = redis_client.pipeline(transaction=False)
    for j in range(2000):
        pipe.xadd(key, {"value": json.dumps({"id": j, "sym": "s", "px": j + 0.5})})
    ids = [i.decode() for i in pipe.execute()]
    assert _all(_source(redis_source(key, until="end")), n=512) == [(j, "s", j + 0.5) for j in range(2000)]
    src = _source(redis_source(key, count=1000))
    src.open()
    got = src.read(512)
    assert src._ahead is not None  # a full reply: the next batch was asked for
    got += src.read(512)  # the limit cuts it to 488: other positions, the reply sent ahead is dropped
    assert src.read(512) is None and got == [(j, "s", j + 0.5) for j in range(1000)]
    assert src.position() == {key: ids[999]}
    src.close()
    src = _source(redis_source(key, until="end"))
    src.open()
    assert len(src.read(512)) == 512 and src._ahead is not None
    src.close()  # a reply still owed
    again = _source(redis_source(key, until="end"))
    assert len(_all(again, n=512)) == 2000
