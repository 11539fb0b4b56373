"""The connector tests talk to the project's real Redis broker (``make broker``): a test
that needs it and finds it not running fails, saying how to start it; never skips."""

from __future__ import annotations

import uuid

import pytest


@pytest.fixture(scope="session")
def broker():
    """The running project broker (``spadeopt.deploy.broker``), as a ``Broker`` record."""
    from spadeopt.deploy import broker as tooling

    b = tooling.status()
    if b is None:
        pytest.fail("the Redis broker is not running: start it with `make broker` (or `spadeopt broker "
                    "start`); `make test` does this itself", pytrace=False)
    return b


@pytest.fixture
def redis_client(broker):
    from spadeopt.connectors.redis_conn import connect

    client = connect(broker.address, "the tests")
    yield client
    client.close()


@pytest.fixture
def keyspace(redis_client):
    """A fresh prefix for this test's stream keys; every key under it is deleted after."""
    prefix = f"spadeopt-test:{uuid.uuid4().hex[:12]}"
    yield prefix
    for key in redis_client.scan_iter(match=f"{prefix}*"):
        redis_client.delete(key)
