"""Fixtures that give tests real services: a fresh PostgreSQL database, a Redis db, free ports.

Also the session's housekeeping: the test tiers (tests/tiers.py) are marked and guarded here, and
the caches numba and Hypothesis would write into the checkout go to a temporary folder instead.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from backend.settings import Settings
from tests.tiers import FastTierGuard, mark_slow_tests, require_slow

ROOT = Path(__file__).resolve().parents[1]
POSTGRES_ADMIN_URL = os.environ.get(
    "ORRERY_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("ORRERY_TEST_REDIS_URL", "redis://127.0.0.1:6379")
ORRERY_BIN = str(Path(sys.executable).parent / "orrery")
FAST_TIER_GUARD = FastTierGuard(
    service_ports={make_url(POSTGRES_ADMIN_URL).port or 5432, make_url(REDIS_URL).port or 6379}
)


def pytest_configure(config: pytest.Config) -> None:
    """Send numba's compiled-code cache and Hypothesis's example database and caches to a folder
    of this session, for the test process and (through the environment) every process it starts.
    numba reads NUMBA_CACHE_DIR when first imported, which no module imported so far has done."""
    scratch = Path(tempfile.mkdtemp(prefix="orrery-tests-"))
    config.add_cleanup(lambda: shutil.rmtree(scratch, ignore_errors=True))
    os.environ.setdefault("NUMBA_CACHE_DIR", str(scratch / "numba"))
    os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", str(scratch / "hypothesis"))


@pytest.hookimpl(tryfirst=True)  # before -m selects by the marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_slow_tests(items)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    with FAST_TIER_GUARD.watch(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    with FAST_TIER_GUARD.watch(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    with FAST_TIER_GUARD.watch(item):
        return (yield)


@pytest.fixture
def postgres_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A brand-new, empty PostgreSQL database, dropped afterwards."""
    require_slow(request.node, "PostgreSQL")
    name = f"orrery_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(POSTGRES_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    try:
        yield url
    finally:
        from backend.db.session import engine_for

        engine_for(url).dispose()
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture
def redis_db_url() -> Iterator[str]:
    """A Redis database index of its own, emptied before and after.

    Indexes are claimed with a lock key in db 0, so test processes running side by side never
    share a queue (a worker of one would otherwise take the other's tasks).
    """
    import redis

    registry = redis.Redis.from_url(f"{REDIS_URL}/0")
    deadline = time.monotonic() + 120
    index = None
    while index is None:
        # Start after the index the previous test took, so a worker still shutting down from
        # that test is never listening on this test's queue.
        start = int(registry.incr("orrery-test-db:next"))
        candidates = [1 + (start + i) % 15 for i in range(15)]
        index = next(
            (
                i
                for i in candidates
                if registry.set(f"orrery-test-db:{i}", os.getpid(), nx=True, ex=900)
            ),
            None,
        )
        if index is None:
            assert time.monotonic() < deadline, "no free Redis database index for this test"
            time.sleep(0.5)
    url = f"{REDIS_URL}/{index}"
    client = redis.Redis.from_url(url)
    client.flushdb()
    try:
        yield url
    finally:
        client.flushdb()
        client.close()
        registry.delete(f"orrery-test-db:{index}")
        registry.close()


def service_settings(
    postgres_url: str, redis_db_url: str, data_dir: Path, **overrides: object
) -> Settings:
    """Settings for the real services (PostgreSQL, Redis), with the schema migrated."""
    from backend.db import migrate

    settings = Settings(
        data_dir=data_dir,
        database_url=postgres_url,
        broker_url=redis_db_url,
        result_backend=redis_db_url,
        **overrides,  # type: ignore[arg-type]
    )
    migrate.upgrade(postgres_url)
    return settings


def accounts_service_settings(
    postgres_url: str, redis_db_url: str, data_dir: Path, **overrides: object
) -> Settings:
    """`service_settings` with accounts on (several users) and no reconciler loop."""
    return service_settings(
        postgres_url,
        redis_db_url,
        data_dir,
        single_user=False,
        secret_key="test-secret-key",
        reconcile_interval=0,
        **overrides,
    )


@pytest.fixture
def embedded_settings(tmp_path: Path) -> Settings:
    settings = Settings(data_dir=tmp_path / "data")
    settings.ensure_data_dir()
    return settings


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_http(
    url: str, timeout: float = 60.0, process: subprocess.Popen | None = None
) -> httpx.Response:
    """Poll a URL until it answers 200; fail early if the process serving it has died."""
    deadline = time.monotonic() + timeout
    last_error = "no answer"
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise AssertionError(f"server exited with {process.returncode} before answering")
        try:
            response = httpx.get(url, timeout=5)
            if response.status_code == 200:
                return response
            last_error = f"HTTP {response.status_code}: {response.text[:200]}"
        except httpx.HTTPError as exc:
            last_error = repr(exc)
        time.sleep(0.3)
    raise AssertionError(f"{url} did not answer 200 within {timeout}s: {last_error}")


def repo_pythonpath() -> str:
    """PYTHONPATH for a child process that must import this checkout's modules, tests included."""
    return os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))


def orrery_env(**overrides: str) -> dict[str, str]:
    """The test process's environment without any ORRERY_ setting, plus the given ones.

    A child process imports this checkout (its PYTHONPATH starts here), not whatever tree the
    environment's editable install points at, so a suite run from another checkout tests that
    checkout's code."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORRERY_")}
    env["PYTHONPATH"] = repo_pythonpath()
    env.update(overrides)
    return env


@dataclass
class ServerHandle:
    url: str
    process: subprocess.Popen
    env: dict[str, str]
    output: str = ""  # what the server printed, once it has stopped


@contextmanager
def embedded_server(data_dir: Path, *serve_args: str, **env: str) -> Iterator[ServerHandle]:
    """`orrery serve` on embedded defaults and a free port, once health answers; stopped
    (with its worker) afterwards, its output kept in the handle."""
    port = free_port()
    server_env = orrery_env(ORRERY_DATA_DIR=str(data_dir), ORRERY_API_PORT=str(port), **env)
    process = subprocess.Popen(
        [ORRERY_BIN, "serve", *serve_args],
        cwd=data_dir.parent,
        env=server_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    handle = ServerHandle(f"http://127.0.0.1:{port}", process, server_env)
    try:
        wait_for_http(f"{handle.url}/api/v1/health", process=process)
        yield handle
    finally:
        handle.output = stop_process(process)


def start_worker(env: dict[str, str], cwd: Path) -> subprocess.Popen:
    """A real Celery worker process running Orrery's tasks."""
    from backend.cli.launcher import worker_command

    return subprocess.Popen(
        worker_command(concurrency=1, loglevel="INFO"),
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def stop_process(process: subprocess.Popen, timeout: float = 20) -> str:
    """Terminate a process politely, then firmly; return what it printed."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.stdout.read() if process.stdout else ""
