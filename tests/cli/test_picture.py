"""`spadeopt explain BUILD --png/--dot`: a picture of the plan (nodes, PEs, operators, links)."""

from __future__ import annotations

from pathlib import Path

from tests.cli.clitools import cli


def test_explain_draws_nodes_pes_and_links(tmp_path: Path) -> None:
    b = tmp_path / "b"
    assert cli("build", "apps/chain.py", "-p", "n=3", "--nodes", "2", "--cores", "1", "-o", str(b)).returncode == 0
    proc = cli("explain", str(b), "--png", str(tmp_path / "p.png"), "--dot", str(tmp_path / "p.dot"))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "p.png").read_bytes().startswith(b"\x89PNG")
    dot = (tmp_path / "p.dot").read_text()
    assert "cluster_node0" in dot and "cluster_node1" in dot
    for pe in ("pe0", "pe1", "pe2", "pe3", "pe4"):  # one PE per operator under NONE
        assert f'"{pe}" [label=' in dot
    assert '"pe0" -> "pe1" [label="1 stream"' in dot
    # drawing again replaces our own pictures; a user's file of the same name is refused
    assert cli("explain", str(b), "--png", str(tmp_path / "p.png")).returncode == 0
    mine = tmp_path / "mine.png"
    mine.write_bytes(b"\x89PNG not spadeopt's")
    proc = cli("explain", str(b), "--png", str(mine))
    assert proc.returncode == 2 and "--png" in proc.stderr and mine.read_bytes() == b"\x89PNG not spadeopt's"
