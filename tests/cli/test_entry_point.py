"""`python -m spadeopt` itself, in a child process: every other CLI test calls
``spadeopt.cli.main`` in-process (tests/cli/clitools.py), so this is the one that checks
the entry point hands main's exit code and output to the shell."""

from __future__ import annotations

from pathlib import Path

from tests.cli.clitools import cli, cli_subprocess


def test_python_m_spadeopt_exits_with_mains_code_and_prints_what_main_prints(tmp_path: Path) -> None:
    usage = cli_subprocess("--help", timeout=120)
    assert usage.returncode == 0 and "usage: spadeopt" in usage.stdout and "explain" in usage.stdout, usage.stderr
    b = tmp_path / "b"
    built = cli_subprocess("build", "apps/chain.py", "-p", "n=2", "-o", b, timeout=120)
    assert built.returncode == 0, built.stderr
    assert (b / "deploy.json").is_file() and (b / "plan.json").is_file()
    refused = cli_subprocess("build", "apps/chain.py", "-o", b / "deploy.json", timeout=120)
    in_process = cli("build", "apps/chain.py", "-o", b / "deploy.json")
    assert refused.returncode == in_process.returncode == 2
    assert refused.stderr == in_process.stderr and "Traceback" not in refused.stderr
