"""Throwaway Redis and PostgreSQL servers of a test's own, on free ports of 127.0.0.1, so
faults injected into them disturb nothing else."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.conftest import free_port

REDIS_SERVER = ["redis-server", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]


class OwnRedis:
    def __init__(self) -> None:
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [*REDIS_SERVER, "--port", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                client.ping()
                return
            except redis.ConnectionError:
                time.sleep(0.1)
        raise AssertionError("own redis-server did not start")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=20)
        self.process = None


def _pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}")) or [shutil.which(name) or ""]
    if not found[-1]:
        pytest.skip(f"PostgreSQL's {name} is not installed")
    return found[-1]


class OwnPostgres:
    """A PostgreSQL cluster in a temporary directory (as the postgres user when run as root)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.directory = Path(tempfile.mkdtemp(prefix="orrery-pg-"))
        self.data = self.directory / "data"
        self._as: list[str] = []
        if os.geteuid() == 0:  # initdb refuses to run as root
            shutil.chown(self.directory, "postgres", "postgres")
            self._as = ["runuser", "-u", "postgres", "--"]

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, *command: str) -> None:
        subprocess.run([*self._as, *command], check=True, capture_output=True, timeout=120)

    def init(self) -> None:
        self._run(_pg_bin("initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust")

    def _ctl(self, action: str) -> None:
        options = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            _pg_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.directory / "log"),
            "-o", options, "-m", "fast", "-w", "-t", "60", action,
        )  # fmt: skip

    def start(self) -> None:
        self._ctl("start")

    def stop(self) -> None:
        self._ctl("stop")

    def restart(self) -> None:
        self._ctl("restart")

    def destroy(self) -> None:
        subprocess.run(
            [*self._as, _pg_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(self.directory, ignore_errors=True)


def running_postgres() -> Iterator[OwnPostgres]:
    """A started cluster of one's own, destroyed afterwards (a fixture's body)."""
    server = OwnPostgres()
    try:
        server.init()
        server.start()
        yield server
    finally:
        server.destroy()
