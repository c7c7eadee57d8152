"""The two test tiers, and the guard that keeps a test from landing in the wrong one.

The rule: a test is `slow` when it needs PostgreSQL or Redis (the shared servers or a private
instance) or starts a process that stays up: an Orrery server (`orrery serve`, uvicorn), a Celery
worker, a browser. Every other test is in the fast tier (`make test-fast`, `pytest -m "not slow"`):
the simulator, training, specs, techniques, the API on embedded SQLite through the test client,
and commands that run and exit.

Most slow tests are known by the fixtures they use (`SERVICE_FIXTURES`, marked at collection);
a test that starts a server or a worker by itself carries `@pytest.mark.slow`. While a test
without the mark runs, `FastTierGuard` fails it the moment it connects to the PostgreSQL or Redis
port or starts such a process, so forgetting the mark fails the suite instead of slowing the fast
tier. PostgreSQL connections are made by libpq, below Python's sockets, so the guard cannot see
them; the suite's one way to a PostgreSQL database is the `postgres_url` fixture, which checks the
mark itself (`require_slow`).
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from itertools import pairwise
from pathlib import Path

import pytest

# Fixtures that reach PostgreSQL or Redis, start a private instance of one, or start a server
# with a browser; a test using any of them, directly or through other fixtures, is slow.
SERVICE_FIXTURES = frozenset(
    {"postgres_url", "redis_db_url", "own_postgres", "own_redis", "server", "browser"}
)

# Programs that stay up once started: servers, workers, databases, the browser (Playwright's
# driver), and the Orrery subcommands that serve or work.
LONG_LIVED_PROGRAMS = frozenset(
    {
        "celery",
        "uvicorn",
        "redis-server",
        "postgres",
        "pg_ctl",
        "pg_ctlcluster",
        "initdb",
        "chromium",
        "run-driver",
    }
)
ORRERY_LONG_LIVED_COMMANDS = frozenset({"serve", "worker"})

MARK_IT = "mark it @pytest.mark.slow (the rule is in tests/tiers.py)"


def is_slow(item: pytest.Item) -> bool:
    return item.get_closest_marker("slow") is not None


def mark_slow_tests(items: Sequence[pytest.Item]) -> None:
    """Mark slow every test that uses a service fixture or a browser."""
    for item in items:
        uses_a_service = SERVICE_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        if uses_a_service or item.get_closest_marker("browser") is not None:
            item.add_marker(pytest.mark.slow)


def require_slow(item: pytest.Item, what: str) -> None:
    if not is_slow(item):
        pytest.fail(f"{item.nodeid} uses {what}, so it is slow: {MARK_IT}", pytrace=False)


def starts_a_long_lived_process(command: str | bytes | os.PathLike | Sequence[object]) -> bool:
    """Whether this command line starts a server, a worker, a database or a browser."""
    if isinstance(command, str | bytes | os.PathLike):
        words = shlex.split(os.fsdecode(command))
    else:
        words = [os.fsdecode(word) if isinstance(word, bytes) else str(word) for word in command]
    names = [Path(word).name for word in words]
    if LONG_LIVED_PROGRAMS.intersection(names):
        return True
    return any(
        name == "orrery" and following in ORRERY_LONG_LIVED_COMMANDS
        for name, following in pairwise(names)
    )


class FastTierGuard:
    """An audit hook that, while a test not marked slow runs, refuses a connection to a service
    port and the start of a long-lived process, and remembers what it refused (a test may catch
    the error; the refusal still fails it)."""

    def __init__(self, service_ports: Collection[int]) -> None:
        self.service_ports = frozenset(service_ports)
        self.watching = False
        self.refused: list[str] = []
        sys.addaudithook(self._audit)  # for the life of the process: watching turns it on and off

    def _audit(self, event: str, args: tuple[object, ...]) -> None:
        if not self.watching:
            return
        if event == "socket.connect":
            address = args[1]
            if (
                isinstance(address, tuple)
                and len(address) >= 2
                and address[1] in self.service_ports
            ):
                self._refuse(f"connected to {address[0]}:{address[1]}")
        elif event == "subprocess.Popen":
            command = args[1]
            if command is not None and starts_a_long_lived_process(command):  # type: ignore[arg-type]
                self._refuse(f"started {command!r}")

    def _refuse(self, what: str) -> None:
        self.refused.append(what)
        self.watching = False  # the error below may run code that connects or starts again
        raise RuntimeError(f"a test not marked slow {what}: {MARK_IT}")

    @contextmanager
    def watch(self, item: pytest.Item) -> Iterator[None]:
        """Guard one phase (setup, call, teardown) of an unmarked test; fail it if refused."""
        if is_slow(item):
            yield
            return
        self.refused.clear()
        self.watching = True
        try:
            yield
        finally:
            self.watching = False
            if self.refused:
                pytest.fail(f"{item.nodeid} {'; '.join(self.refused)}: {MARK_IT}", pytrace=False)
