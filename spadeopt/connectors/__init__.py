"""Connectors: how sources read and sinks write the outside world, on one contract
(``connectors.contract``; docs/connectors.md). An app declares one with the functions
below and hands it to ``App.source(..., connector=)`` / ``App.sink(..., connector=)``."""

from spadeopt.connectors.declared import (
    ConnectorSpec,
    folder_source,
    redis_sink,
    redis_source,
    tcp_source,
)

__all__ = ["ConnectorSpec", "folder_source", "redis_sink", "redis_source", "tcp_source"]
