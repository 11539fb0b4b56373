"""The README starts a stranger: its quick-start app runs exactly as written, and it
points only at files that exist in the repository."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from tests.cli.clitools import cli

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def blocks(text: str, section: str) -> list[tuple[str, str]]:
    """The fenced code blocks (language, code) of the README section titled ``section``."""
    part = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```(\w*)\n(.*?)```", part, flags=re.S)


def test_readme_names_no_internal_reference_and_links_only_files_it_has():
    text = README.read_text()
    assert not re.search(r"\b(issue|paper)s? \d", text, flags=re.I), "no internal issue or paper numbers"
    assert "../" not in text, "no links outside the repository"
    for path in set(re.findall(r"`((?:docs/|apps/|SECURITY)[\w./-]*\.(?:md|py))`", text)):
        assert (ROOT / path).exists(), f"README names {path}, which is not in the repository"
    assert "`docs/benchmarks.md`" in text and "| " not in text, "benchmark tables live in docs/benchmarks.md"
    assert len(text.splitlines()) < 200


def test_benchmark_tables_are_well_formed():
    """Every row of a table has its header's number of cells."""
    header = None
    for line in (ROOT / "docs" / "benchmarks.md").read_text().splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = line.strip().count("|") - 1
        header = cells if header is None else header
        assert cells == header, f"{cells} cells, the header has {header}: {line[:100]}"


def test_quick_start_commands_use_only_options_that_exist():
    """Every `spadeopt ...` line of the README parses (a renamed option fails here first)."""
    from spadeopt.cli import parser

    text = README.read_text()
    for _, code in re.findall(r"```(sh)\n(.*?)```", text, flags=re.S):
        for line in code.splitlines():
            words = shlex.split(line, comments=True)
            if words[:1] == ["spadeopt"] and "--help" not in words:
                parser().parse_args(words[1:])


@pytest.mark.spark
def test_readme_quick_start_app_runs_as_written(tmp_path):
    (lang, code), (sh, commands) = blocks(README.read_text(), "Your first app (3 minutes)")[:2]
    assert lang == "python" and sh == "sh"
    (tmp_path / "first.py").write_text(code)  # "Save this as `first.py`, anywhere"
    ran = 0
    for line in commands.splitlines():
        words = shlex.split(line, comments=True)
        if words[:1] == ["spadeopt"]:
            proc = cli(*words[1:], cwd=tmp_path)
            assert proc.returncode == 0, proc.stderr
            assert "throughput" in proc.stdout
            ran += 1
        elif words[:1] == ["head"]:
            rows = [json.loads(r) for r in (tmp_path / words[-1]).read_text().splitlines()]
            assert rows and set(rows[0]) == {"user", "start", "clicks", "dwell"}
    assert ran == 2
    one = (tmp_path / "out/first/totals.jsonl").read_text().splitlines()
    assert len(one) == 5 * 10, "5 users, 10 windows of 1000 s over 10,000 s of clicks"
    assert all(json.loads(r)["clicks"] > 0 for r in one)
