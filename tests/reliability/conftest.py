from collections.abc import Iterator

import pytest

from tests.reliability.services import OwnRedis, running_postgres


@pytest.fixture
def own_redis() -> Iterator[OwnRedis]:
    server = OwnRedis()
    server.start()
    try:
        yield server
    finally:
        server.stop()


own_postgres = pytest.fixture(running_postgres, name="own_postgres")
