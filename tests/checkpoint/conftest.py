"""The broker fixtures of the connector tests (``tests/connectors/conftest.py``): the
exactly-once tests talk to the project's real Redis broker (``make broker``)."""

from tests.connectors.conftest import broker, keyspace, redis_client  # noqa: F401 - fixtures
