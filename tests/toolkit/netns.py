"""A second host for tests that need a peer outside loopback: a network namespace made here.

``peer_namespace()`` makes a network namespace joined to this one by a veth pair on a
private /30 of its own (nothing else is on it, no route leaves it) and yields the
address on this side (where a server binds) and a function that runs a command inside
the namespace (the peer). Removed on exit. Needs root and ``ip``; ``available()`` says
whether this machine can, so a test skips with that reason rather than passes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator


def _ip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20)


def available() -> str | None:
    """None when namespaces can be made here, else why not."""
    if os.geteuid() != 0 or not shutil.which("ip"):
        return "a network namespace needs root and iproute2's ip"
    name = f"spo-probe-{os.getpid()}"
    made = _ip("netns", "add", name)
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip()}"
    _ip("netns", "del", name)
    return None


@contextlib.contextmanager
def peer_namespace() -> Iterator[tuple[str, Callable[..., subprocess.CompletedProcess]]]:
    """``(host_address, run_in_peer)``: bind a server on ``host_address``; ``run_in_peer(*cmd)``
    runs ``cmd`` in the namespace, whose address (the peer's) is the /30's other one."""
    tag = f"{os.getpid() % 10000}"
    ns, host_if, peer_if = f"spo-peer-{tag}", f"spo-h{tag}", f"spo-p{tag}"
    used = _ip("-4", "addr").stdout
    start = os.getpid() % 60  # a /30 of 10.231.77.0/24 per test process: the first free one from here
    octet = next(4 * (start + i) % 240 for i in range(60) if f"10.231.77.{4 * (start + i) % 240 + 1}/" not in used)
    host, peer = f"10.231.77.{octet + 1}", f"10.231.77.{octet + 2}"
    steps = [("netns", "add", ns), ("link", "add", host_if, "type", "veth", "peer", "name", peer_if),
             ("link", "set", peer_if, "netns", ns), ("addr", "add", f"{host}/30", "dev", host_if),
             ("link", "set", host_if, "up"), ("-n", ns, "addr", "add", f"{peer}/30", "dev", peer_if),
             ("-n", ns, "link", "set", peer_if, "up"), ("-n", ns, "link", "set", "lo", "up")]
    try:
        for step in steps:
            done = _ip(*step)
            if done.returncode != 0:
                raise RuntimeError(f"ip {' '.join(step)}: {done.stderr.strip()}")

        def run_in_peer(*cmd: str, timeout: float = 30) -> subprocess.CompletedProcess:
            return subprocess.run(["ip", "netns", "exec", ns, *cmd], capture_output=True, text=True, timeout=timeout)
        yield host, run_in_peer
    finally:
        _ip("link", "del", host_if)
        _ip("netns", "del", ns)
