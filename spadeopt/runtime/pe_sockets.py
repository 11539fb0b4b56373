"""A PE's sockets: bind its input ports, connect its output links, close them all.

``PESockets`` is a mixin of ``runtime.pe.PERuntime``: CURVE servers on the input
ports (a ``Guard`` admitting only the upstream links' keys), CURVE clients on the
output links (``runtime.security``, ``runtime.transport``).
"""

from __future__ import annotations

from typing import Any

from spadeopt import wire
from spadeopt.protocol import SEQ as FISSION_SEQ
from spadeopt.runtime import transport
from spadeopt.runtime.security import Guard, keypair, make_client, make_server


class PESockets:
    """Sockets of a ``PERuntime`` (see the module doc)."""

    def bind(self, ipc_dir: str | None, host: str | None,
             schemas: dict[str, list | None] | None = None) -> dict[str, dict[str, str]]:
        """Bind a PULL socket per exposed input port (a CURVE server when secure);
        returns its endpoints. ``schemas``: port ref -> ``[[name, type], ...]``."""
        endpoints = {}
        if self.secure and self.inputs:
            self.guard = Guard(self.ctx, self.pe_id)  # before bind: no connection unasked
            self.server_key = keypair()
        for ref, port in sorted(self.inputs.items()):
            schema = (schemas or {}).get(ref)
            port.types = wire.wire_types(schema)
            port.pulsed = bool(schema) and schema[-1][0] == FISSION_SEQ  # batches may end with a pulse
            s = transport.pull_socket(self.ctx, self.hwm, self.max_frame)
            if self.guard is not None:
                make_server(s, *self.server_key, domain=ref)
                self.guard.watch(s, ref)
            eps = {}
            if ipc_dir:
                eps["ipc"] = f"ipc://{ipc_dir}/{self.pe_id}-{ref}"
                s.bind(eps["ipc"])
            if host:
                port_no = s.bind_to_random_port(f"tcp://{host}")
                eps["tcp"] = f"tcp://{host}:{port_no}"
            port.socket = s
            endpoints[ref] = eps
        if self.guard is not None:
            self.guard.start_monitor()
        return endpoints

    def public_keys(self, out_links: list[str]) -> dict[str, Any]:
        """Make a client keypair per outgoing link; return every public key of this PE."""
        if not self.secure:
            return {}
        self.link_keys = {link: keypair() for link in sorted(out_links)}
        return {"server": self.server_key[0] if self.server_key else None,
                "links": {link: pub for link, (pub, _) in self.link_keys.items()}}

    def connect(self, links: dict[str, list[dict[str, str]]],
                upstream: dict[str, dict[str, dict[str, str]]] | None = None) -> None:
        """``links``: exposed output port -> ``[{link, endpoint, server_key}]`` of its
        downstream input ports; ``upstream``: input port -> link id -> ``{key, from}``,
        the only peers this PE's input ports admit."""
        upstream = upstream or {}
        for ref, port in self.inputs.items():
            port.upstream = {link: v["from"] for link, v in upstream.get(ref, {}).items()}
        if self.guard is not None:
            self.guard.allow({ref: {v["key"]: link for link, v in ups.items()} for ref, ups in upstream.items()})
        for ref, outs in links.items():
            sender = self.senders[ref]
            for out in outs:
                s = transport.push_socket(self.ctx, self.hwm)
                if self.secure:
                    make_client(s, *self.link_keys[out["link"]], server_public=out["server_key"])
                s.connect(out["endpoint"])
                sender.sockets.append(s)
                sender.links.append(out["link"])

    def close(self) -> None:
        if self.guard is not None:
            self.guard.close()
        for s in self.senders.values():
            for sock in s.sockets:
                sock.close(linger=0)  # everything was delivered: all PEs are done
        for p in self.inputs.values():
            if p.socket is not None:
                p.socket.close(linger=0)
        self.ctx.term()
