"""The broker fixtures of the connector tests (``tests/connectors/conftest.py``): the
adaptive run of a live feed talks to the project's real Redis broker (``make broker``)."""

from tests.connectors.conftest import broker, keyspace, redis_client  # noqa: F401 - fixtures
