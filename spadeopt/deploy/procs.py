"""What /proc says about a process of this host: does it still run, and when did it start."""

from __future__ import annotations


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (state first), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def running(pid: int) -> bool:
    """Does ``pid`` exist and is it not a zombie (which counts as dead)?"""
    fields = _stat(pid)
    return bool(fields) and fields[0] != "Z"


def start_time(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot, field 22), or None if it is gone."""
    fields = _stat(pid)
    try:
        return int(fields[19]) if fields else None
    except (ValueError, IndexError):
        return None
