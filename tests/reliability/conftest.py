from collections.abc import Iterator

import pytest

from tests.reliability.services import OwnPostgres, OwnRedis


@pytest.fixture
def own_redis() -> Iterator[OwnRedis]:
    server = OwnRedis()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def own_postgres() -> Iterator[OwnPostgres]:
    server = OwnPostgres()
    try:
        server.init()
        server.start()
        yield server
    finally:
        server.destroy()
