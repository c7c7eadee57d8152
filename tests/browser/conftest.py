"""A real Orrery server (embedded SQLite, its own worker) and headless Debian Chromium."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from tests.conftest import ORRERY_BIN, ROOT, free_port, orrery_env, stop_process, wait_for_http

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = ROOT / "test-output" / "screenshots"


@dataclass
class Server:
    url: str
    process: subprocess.Popen
    log: Path
    data_dir: Path

    @property
    def database_url(self) -> str:
        return f"sqlite:///{self.data_dir / 'orrery.db'}"


@dataclass
class ConsoleLog:
    """Console errors and uncaught page errors of every page opened in a context."""

    errors: list[str] = field(default_factory=list)

    def watch(self, page: Page) -> None:
        page.on(
            "console",
            lambda message: (
                self.errors.append(f"console {message.type}: {message.text}")
                if message.type == "error"
                else None
            ),
        )
        page.on("pageerror", lambda error: self.errors.append(f"page error: {error}"))


@contextmanager
def serving(data_dir: Path, env: dict[str, str], *serve_args: str) -> Iterator[Server]:
    """`orrery serve` on a free port with this environment, once its health answers; stopped
    afterwards with everything it started."""
    port = free_port()
    log = data_dir / "serve.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [ORRERY_BIN, "serve", "--host", "127.0.0.1", "--port", str(port), *serve_args],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # serve and its worker in one process group of our own
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(f"{url}/api/v1/health", timeout=90, process=process)
        yield Server(url=url, process=process, log=log, data_dir=data_dir)
    finally:
        stop_serve(process)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """`orrery serve` on a free port: API, pages and one real worker on embedded defaults."""
    data_dir = tmp_path_factory.mktemp("orrery-data")
    with serving(
        data_dir, orrery_env(ORRERY_DATA_DIR=str(data_dir), ORRERY_WORKER_CONCURRENCY="1")
    ) as server:
        yield server


def stop_serve(process: subprocess.Popen) -> None:
    """Ctrl-C lets `orrery serve` stop its worker; then nothing of its group may outlive it."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=40)
        except subprocess.TimeoutExpired:
            stop_process(process, timeout=10)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)  # a worker left behind, if any


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (scripts/install.sh)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        yield browser
        browser.close()


@pytest.fixture
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS
