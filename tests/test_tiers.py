"""The fast tier's guard: what it takes for a server or a worker, and what it refuses."""

from __future__ import annotations

import socket
import sys

import pytest

from tests.conftest import ORRERY_BIN, free_port
from tests.tiers import FastTierGuard, starts_a_long_lived_process


@pytest.mark.parametrize(
    "command",
    [
        [ORRERY_BIN, "serve", "--port", "8000"],
        [ORRERY_BIN, "worker"],
        [sys.executable, "-m", "celery", "-A", "worker.app", "worker"],
        [sys.executable, "-m", "uvicorn", "backend.api.app:create_app", "--factory"],
        ["redis-server", "--port", "7000"],
        ["runuser", "-u", "postgres", "--", "/usr/lib/postgresql/15/bin/initdb", "-D", "x"],
        "/usr/bin/chromium --headless",
    ],
)
def test_servers_workers_databases_and_browsers_are_long_lived(command: object) -> None:
    assert starts_a_long_lived_process(command)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "command",
    [
        [ORRERY_BIN, "reconcile", "--grace", "5"],
        [ORRERY_BIN, "submit", "spec.yaml", "--wait"],
        [sys.executable, "-m", "backend.sim", "report", "edge"],
        [sys.executable, "-c", "import backend.sim"],
        "git status",
    ],
)
def test_commands_that_run_and_exit_are_not(command: object) -> None:
    assert not starts_a_long_lived_process(command)  # type: ignore[arg-type]


def test_the_guard_refuses_a_service_port_even_when_the_error_is_caught() -> None:
    port = free_port()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", port))
        listener.listen()
        guard = FastTierGuard(service_ports={port})
        guard.watching = True
        try:
            with pytest.raises(RuntimeError, match="not marked slow connected to"):
                socket.create_connection(("127.0.0.1", port), timeout=5).close()
        finally:
            guard.watching = False
        assert guard.refused == [f"connected to 127.0.0.1:{port}"]
        socket.create_connection(("127.0.0.1", port), timeout=5).close()  # not watching: allowed
