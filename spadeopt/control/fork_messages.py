"""A node agent and its PE forker (``runtime.zygote``): a request to fork a PE, and the
forker's replies. They travel as one JSON line per ``SOCK_SEQPACKET`` message on a
socketpair private to the two processes (the PE's three descriptors ride along as
``SCM_RIGHTS``); they are read as every control message is, each field checked."""

from __future__ import annotations

from dataclasses import dataclass

from spadeopt.control.message import Record, register
from spadeopt.fieldcheck import INT, STR


@register
@dataclass(frozen=True)
class Fork(Record):
    """agent -> forker: fork a PE whose config is ``config`` (a ``PEConfig`` line, read
    and checked by the PE as its command line) and show ``title`` as its command line."""

    KIND = "fork"
    FIELDS = {"config": STR, "title": STR}
    config: str
    title: str


@register
@dataclass(frozen=True)
class Forked(Record):
    """forker -> agent, one per ``Fork`` in order: the PE's process id."""

    KIND = "forked"
    FIELDS = {"pid": INT}
    pid: int


@register
@dataclass(frozen=True)
class ForkFailed(Record):
    """forker -> agent, instead of ``Forked``: why the fork failed."""

    KIND = "fork-failed"
    FIELDS = {"error": STR}
    error: str


@register
@dataclass(frozen=True)
class ChildExit(Record):
    """forker -> agent: PE ``pid`` ended with ``code`` (``Popen.returncode``: negative
    for a signal), as the forker reaped it."""

    KIND = "child-exit"
    FIELDS = {"pid": INT, "code": INT}
    pid: int
    code: int


FROM_FORKER = (Forked, ForkFailed, ChildExit)
