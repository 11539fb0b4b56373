"""The TCP line source and the watched-folder source: non-blocking reads, the documented
rules for a client that disconnects mid-line and for files still being written."""

from __future__ import annotations

import json
import os
import socket
import time

import pytest

from spadeopt.connectors import folder_source, tcp_source
from spadeopt.connectors.contract import ConnectorError
from spadeopt.connectors.folder import FolderSource
from spadeopt.connectors.tcp import TcpLineSource

SCHEMA = [["id", "int"], ["name", "str"]]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _drain(src, until_none=True, deadline=5.0):
    out, end = [], time.time() + deadline
    while time.time() < end:
        b = src.read(100)
        if b is None:
            return out
        out.extend(b)
        if not b and not until_none:
            return out
        if not b:
            time.sleep(0.005)
    raise AssertionError(f"the source did not end within {deadline} s; read {out}")


def _tcp(**kw) -> TcpLineSource:
    return TcpLineSource(name="tcp", schema=SCHEMA, **dict(tcp_source(**kw).args))


def test_tcp_reads_complete_lines_and_drops_a_disconnected_clients_partial_line(capfd):
    port = _free_port()
    src = _tcp(port=port, until="disconnect")
    src.open()
    assert src.read(10) == []  # no client yet: an idle read, not the end
    with socket.create_connection(("127.0.0.1", port)) as a, socket.create_connection(("127.0.0.1", port)) as b:
        a.sendall(b'{"id": 1, "name": "a"}\n{"id": 2, "na')
        b.sendall(b'{"id": 10, "name": "b"}\n\n')
        time.sleep(0.1)
        first = src.read(10)
        a.sendall(b'me": "a2"}\n{"id": 3, "name": "cut')  # the last line never ends
    got = first + _drain(src)
    src.close()
    assert sorted(got) == [(1, "a"), (2, "a2"), (10, "b")]
    assert src.report()["partial_lines"] == 1
    assert "disconnected mid-line" in capfd.readouterr().err


def test_tcp_csv_lines_count_bound_and_a_bad_line_named():
    port = _free_port()
    src = _tcp(port=port, format="csv", count=2)
    src.open()
    with socket.create_connection(("127.0.0.1", port)) as c:
        c.sendall(b'1,"x, y"\n2,z\n3,w\n')
        time.sleep(0.1)
        assert _drain(src) == [(1, "x, y"), (2, "z")]
    src.close()
    src = _tcp(port=port, format="json", until="disconnect")
    src.open()
    with socket.create_connection(("127.0.0.1", port)) as c:
        c.sendall(b'{"id": "one", "name": "x"}\n')
        time.sleep(0.1)
        with pytest.raises(ValueError, match=r"tcp 127.0.0.1:\d+ client 127.0.0.1:\d+ line 1: attribute 'id': "
                                             r"cannot read 'one' as int"):
            src.read(10)
    src.close()


def test_tcp_port_in_use_is_a_clear_error():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        src = _tcp(port=busy.getsockname()[1])
        with pytest.raises(ConnectorError, match="cannot listen on 127.0.0.1"):
            src.open()


def _folder(path, **kw) -> FolderSource:
    return FolderSource(name="dir", schema=SCHEMA, **dict(folder_source(str(path), **kw).args))


def _write(path, rows):
    path.write_text("".join(json.dumps({"id": i, "name": n}) + "\n" for i, n in rows))


def test_folder_reads_ready_files_once_in_name_order_and_skips_unfinished_ones(tmp_path):
    _write(tmp_path / "b.jsonl", [(3, "b")])
    _write(tmp_path / "a.jsonl", [(1, "a"), (2, "a")])
    _write(tmp_path / "c.jsonl.tmp", [(99, "tmp")])  # still being written
    _write(tmp_path / ".d.jsonl", [(98, "hidden")])
    _write(tmp_path / "_e.jsonl", [(97, "underscore")])
    src = _folder(tmp_path, poll=0.01)
    src.open()
    got = _drain(src, until_none=False)
    assert got == [(1, "a"), (2, "a"), (3, "b")]
    os.replace(tmp_path / "c.jsonl.tmp", tmp_path / "c.jsonl")  # ready by rename
    _write(tmp_path / "a.jsonl", [(50, "rewritten")])  # already read: never again
    time.sleep(0.02)
    assert _drain(src, until_none=False) == [(99, "tmp")]
    assert src.position()["files_done"] == 3
    src.close()


def test_folder_bounded_modes_and_existing_files(tmp_path):
    _write(tmp_path / "1.jsonl", [(1, "x")])
    assert _drain(_folder(tmp_path, until="empty")) == [(1, "x")]
    src = _folder(tmp_path, existing=False, until="empty")
    src.open()
    assert _drain(src) == []
    _write(tmp_path / "2.jsonl", [(2, "y"), (3, "z")])
    assert _drain(src) == [(2, "y"), (3, "z")]
    assert _drain(_folder(tmp_path, until="empty", count=2)) == [(1, "x"), (2, "y")]
    with pytest.raises(ConnectorError, match="does not exist"):
        _folder(tmp_path / "missing").open()


def test_folder_csv_and_a_bad_file_named(tmp_path):
    (tmp_path / "2.csv").write_text("id,name\n5,five\n6,six\n")
    assert _drain(_folder(tmp_path, format="csv", until="empty")) == [(5, "five"), (6, "six")]
    (tmp_path / "3.csv").write_text("id,name\nseven,x\n")
    with pytest.raises(ValueError, match=r"3.csv:2: attribute 'id': cannot read 'seven' as int"):
        _drain(_folder(tmp_path, format="csv", until="empty"))
