"""File replay sources (CSV, JSON lines, Parquet) with typed casting; sinks write bytes
as hex."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spadeopt import App
from spadeopt.runtime.sinks import Sink, commit
from spadeopt.toolkit import sources
from tests.toolkit.gens import replay
from tests.toolkit.harness import run_fusions, same_under_fusions

SCHEMA = "id:int, price:float, name:str, ok:bool, raw:bytes"
WANT = [
    {"id": 1, "price": 2.0, "name": "a b", "ok": True, "raw": "00ff"},
    {"id": -2, "price": 0.25, "name": "", "ok": False, "raw": ""},
    {"id": 30, "price": -1e-3, "name": "Ωx,\"q\"", "ok": True, "raw": "7a"},
    {"id": 4, "price": 5.0, "name": "4", "ok": False, "raw": "0102"},
]


def _app(name: str, path, fmt: str | None = None) -> App:
    a = App(name)
    s = a.source("src", SCHEMA, file=str(path), format=fmt)
    a.sink("rows", a.functor("fwd", s))
    return a


def test_csv_replay_casts_by_schema(tmp_path):
    p = tmp_path / "in.csv"
    # columns in another order, one extra column, booleans spelled several ways
    p.write_text('extra,raw,name,ok,price,id\n'
                 'x,00ff,a b,true,2,1\n'
                 'y,,,False,0.25,-2\n'
                 'z,7a,"Ωx,""q""",YES,-1e-3,30\n'
                 'w,0102,4,0,5.0,4\n', encoding="utf-8")
    got = same_under_fusions(_app("csvs", p), tmp_path, fusions=("none", "all"))
    assert got["rows"] == WANT


def test_jsonl_replay_casts_by_schema(tmp_path):
    p = tmp_path / "in.jsonl"
    objs = [{"id": 1, "price": 2, "name": "a b", "ok": True, "raw": "00ff"},
            {"id": -2, "price": 0.25, "name": "", "ok": False, "raw": "", "more": [1]},
            {"raw": "7a", "id": 30, "price": -1e-3, "name": "Ωx,\"q\"", "ok": "true"},
            {"id": 4, "price": 5.0, "name": 4, "ok": 0, "raw": "0102"}]
    p.write_text("\n".join(json.dumps(o) for o in objs[:2]) + "\n\n"
                 + "\n".join(json.dumps(o) for o in objs[2:]) + "\n", encoding="utf-8")
    got = same_under_fusions(_app("jsonls", p, "jsonl"), tmp_path, fusions=("none", "all"))
    assert got["rows"] == WANT
    assert [type(v) for v in got["rows"][0].values()] == [int, float, str, bool, str]


def test_parquet_replay_casts_by_schema(tmp_path):
    p = tmp_path / "in.parquet"
    table = pa.table({
        "name": pa.array(["a b", "", "Ωx,\"q\"", "4"]),
        "id": pa.array([1, -2, 30, 4], type=pa.int32()),
        "price": pa.array([2, 0, -1, 5], type=pa.int64()),  # int column, float attribute
        "ok": pa.array([True, False, True, False]),
        "raw": pa.array([b"\x00\xff", b"", b"z", b"\x01\x02"], type=pa.binary()),
        "unused": pa.array([1.5, 2.5, 3.5, 4.5]),
    })
    pq.write_table(table, p, row_group_size=3)  # two row groups
    got = same_under_fusions(_app("pqs", p), tmp_path, fusions=("none", "all"))
    want = [dict(r, price=float(pr)) for r, pr in zip(WANT, [2, 0, -1, 5], strict=True)]
    assert got["rows"] == want
    assert [type(v) for v in got["rows"][0].values()] == [int, float, str, bool, str]


def test_parquet_reader_converts_columns_and_refuses_nulls(tmp_path):
    p = tmp_path / "conv.parquet"
    pq.write_table(pa.table({"i": pa.array([1.0, 2.0]), "s": pa.array([b"ab", b"c"]),
                             "b": pa.array(["true", "no"]), "x": pa.array(["0aff", ""]),
                             "n": pa.array([0, 3], type=pa.uint8())}), p)
    schema = [["i", "int"], ["s", "str"], ["b", "bool"], ["x", "bytes"], ["n", "bool"]]
    assert list(sources.read_parquet(str(p), schema)) == [(1, "ab", True, b"\x0a\xff", False),
                                                        (2, "c", False, b"", True)]
    pq.write_table(pa.table({"i": pa.array([1, None])}), p)
    with pytest.raises(ValueError, match="column 'i' is null in row 1"):
        list(sources.read_parquet(str(p), [["i", "int"]]))


def test_sink_writes_bytes_as_hex(tmp_path):
    data = [(i, bytes(range(i)), "t") for i in range(5)]
    a = App("hexs")
    s = a.source("src", "seq:int, blob:bytes, tag:str", generator=replay, args={"rows": data})
    f = a.functor("grow", s, output={"seq": "seq", "blob": "blob", "more:bytes": "blob + b'\\x10'",
                                     "tag": "tag"})
    a.sink("hex", f)
    got = same_under_fusions(a, tmp_path)
    assert got["hex"] == [{"seq": i, "blob": bytes(range(i)).hex(), "more": (bytes(range(i)) + b"\x10").hex(),
                           "tag": "t"} for i in range(5)]


def test_sink_class_hex_and_count(tmp_path):
    s = Sink("k", "file", ["a", "b"], ["bytes", "str"], str(tmp_path))
    s.write([(b"\x01", "x"), (b"", "y")])
    s.close()
    assert not (tmp_path / "k.jsonl").exists(), "a sink is committed by the driver, not on close"
    assert commit(tmp_path) == [tmp_path / "k.jsonl"]
    assert (tmp_path / "k.jsonl").read_text().splitlines() == ['{"a": "01", "b": "x"}', '{"a": "", "b": "y"}']
    c = Sink("c", "count", ["a"], ["int"], str(tmp_path))
    c.write([(1,), (2,)])
    c.close()
    assert c.count == 2 and not (tmp_path / "c.jsonl").exists()


@pytest.mark.parametrize("fmt,text,match", [
    ("csv", "id,ok\n1,true\n", r"in\.csv: no column 'price', 'name', 'raw' in the CSV header \(id, ok\)"),
    ("csv", "id,price,name,ok,raw\n1,2,a,true,00\n2,x,b,true,00\n",
     r"in\.csv:3: attribute 'price': cannot read 'x' as float"),
    ("csv", "id,price,name,ok,raw\n1,2,a,maybe,00\n", r"in\.csv:2: attribute 'ok': cannot read 'maybe' as bool"),
    ("jsonl", '{"id": 1}\n', r"in\.jsonl:1: no attribute 'price', 'name', 'ok', 'raw' \(the line has: id\)"),
    ("jsonl", '\n{"id": 1.5, "price": 1, "name": "a", "ok": 1, "raw": ""}\n',
     r"in\.jsonl:2: attribute 'id': cannot read 1\.5 as int \(not a whole number\)"),
    ("jsonl", '{"id": 1, "price": 1, "name": null, "ok": 1, "raw": ""}\n',
     r"in\.jsonl:1: attribute 'name': cannot read None as str"),
    ("jsonl", '{"id": 1, "price": 1, "name": "a", "ok": 1, "raw": "zz"}\n',
     r"in\.jsonl:1: attribute 'raw': cannot read 'zz' as bytes"),
    ("jsonl", '[1, 2]\n', r"in\.jsonl:1: no attribute 'id', 'price', 'name', 'ok', 'raw' \(the line has: list\)"),
    ("jsonl", '{"id": \n', r"in\.jsonl:1: not a JSON object"),
])
def test_file_replay_errors_name_file_line_attribute_and_value(tmp_path, fmt, text, match):
    p = tmp_path / f"in.{fmt}"
    p.write_text(text, encoding="utf-8")
    reader = sources.read_csv if fmt == "csv" else sources.read_jsonl
    schema = [[n.split(":")[0].strip(), n.split(":")[1]] for n in SCHEMA.split(",")]
    with pytest.raises(ValueError, match=match):
        list(reader(str(p), schema))


def test_bool_spellings():
    for v in ("1", "true", "True", " yes", "Y", "t", "on", True, 1):
        assert sources.CASTS["bool"](v) is True
    for v in ("0", "false", "FALSE", "no", "n", "f", "off", False, 0):
        assert sources.CASTS["bool"](v) is False
    with pytest.raises(ValueError):
        sources.CASTS["bool"]("")


def test_relative_file_paths_resolve_where_the_app_is_declared(tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "in.csv").write_text("id,v\n1,2\n")
    monkeypatch.chdir(tmp_path / "data")
    a = App("relp")
    a.sink("rows", a.source("src", "id:int, v:int", file="in.csv"))
    graph = a.build()
    monkeypatch.chdir(tmp_path)
    got = run_fusions(graph, tmp_path, fusions=("all",))
    assert got["all"]["rows"] == [{"id": 1, "v": 2}]
