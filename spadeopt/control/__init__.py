"""The control protocol: every message of the control plane, as a frozen, versioned record.

``wire`` is the data plane (batches, finals, barriers, markers between PEs); this module
is the control plane, one home for what the driver, the node agents, the PEs and the
checkpoint coordinator say to each other:

* the driver's job spec for a node agent (``JobSpec``; what a caller of
  ``deploy.launcher.run_build`` changes of a run's settings is ``deploy.options.SettingsChange``,
  never on a wire);
* a PE's config (``PEConfig``, on its command line), the agent's commands to a PE
  (``Connect``, ``Start``, ``Exit``) and the PE's events (``Bound``, ``Ready``, ``Beat``,
  ``Done``, ``Failed``; ``Exited`` is the agent's own note that the process ended) and
  its live metrics to the driver (``PEMetrics``);
* the checkpoint messages between a PE and the coordinator (``Hello``, ``Restore``,
  ``Trigger``, ``Part``, ``Ack``, ``Complete``, ``FirstOutput``);
* a node agent's failure and result to the driver (``NodeFailure``, ``NodeReport``)
  and the driver's answers to a node agent on the rendezvous (``RestartInPlace``,
  ``Refusal``, ``StopRequest``);
* a node agent and its PE forker (``Fork``; ``Forked``, ``ForkFailed``, ``ChildExit``).

The records live in ``records`` (the ground: ``Record``, the registry, reading),
``node_messages``, ``pe_messages``, ``checkpoint_messages`` and ``fork_messages`` (a node
agent and its PE forker); callers import ``spadeopt.control`` only.

Every record has ``to_bytes`` / ``from_bytes`` (msgpack, for ZeroMQ) and ``to_line`` /
``from_line`` (one JSON line, for the agent's pipes and a PE's command line): a map with
the protocol version ``v``, the message type ``t`` and the record's fields. Reading
checks everything before anything is built: a message that is not a map, of another
version, of an unknown or unexpected type, with a field missing, unknown or of the wrong
type is refused with ``ControlError`` naming the field. Nothing received is executed;
the links that carry these messages are authenticated (CURVE, the run's token) as
before. This package imports only msgpack and the standard library: PEs, agents and the
driver all import it.
"""

from __future__ import annotations

from spadeopt.control.checkpoint_messages import (  # noqa: F401 - the protocol's one name
    FROM_PE,
    TO_PE,
    Ack,
    Complete,
    FirstOutput,
    Hello,
    Part,
    Restore,
    Trigger,
)
from spadeopt.control.fork_messages import (  # noqa: F401 - the protocol's one name
    FROM_FORKER,
    ChildExit,
    Fork,
    Forked,
    ForkFailed,
)
from spadeopt.control.message import (  # noqa: F401 - the protocol's one name
    CHANNEL,
    CHANNEL_ENDPOINT,
    KINDS,
    LIVE,
    MAX_DELAY_S,
    MAX_GEN,
    TOKEN,
    VERSION,
    Z85_KEY,
    ControlError,
    Record,
    check,
    decode,
    decode_line,
    register,
)
from spadeopt.control.node_messages import (  # noqa: F401 - the protocol's one name
    MAX_ROUND,
    TO_AGENT,
    Gathered,
    JobSpec,
    Meet,
    NodeFailure,
    NodeReport,
    Refusal,
    RestartInPlace,
    StopRequest,
)
from spadeopt.control.pe_messages import (  # noqa: F401 - the protocol's one name
    PE_COMMANDS,
    PE_EVENTS,
    PROFILE,
    SCHEMA,
    Beat,
    Bound,
    Connect,
    Done,
    Exit,
    Exited,
    Failed,
    PEConfig,
    PEMetrics,
    Ready,
    Start,
)
