"""Through the browser: a banner says so when no worker has beaten within the lease, and a
failed run shows why in the run table."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser
from sqlalchemy import insert

from backend.api.security import local_user
from backend.db.models import Experiment, Run
from backend.db.session import session_scope
from tests.browser.conftest import ConsoleLog, Server, serving
from tests.conftest import orrery_env
from tests.reliability.chaos import poll

pytestmark = pytest.mark.browser
REASON = "ValueError: idx-dir: no training images found under the data set path"


@pytest.fixture(scope="module")
def workerless(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """`orrery serve --no-with-worker` with a lease of two seconds."""
    data_dir = tmp_path_factory.mktemp("orrery-no-worker")
    env = orrery_env(ORRERY_DATA_DIR=str(data_dir), ORRERY_LEASE_SECONDS="2")
    with serving(data_dir, env, "--no-with-worker") as server:
        yield server


def seed_failed_run(server: Server) -> int:
    with session_scope(server.database_url) as db:
        experiment = Experiment(
            owner_id=local_user(db).id, name="broken", spec={"name": "broken"}, status="failed"
        )
        db.add(experiment)
        db.flush()
        db.execute(
            insert(Run),
            [
                {
                    "experiment_id": experiment.id,
                    "technique": "baseline",
                    "technique_params": [],
                    "model": "mlp",
                    "dataset": "idx-dir",
                    "training_config": {},
                    "accelerator_name": "edge",
                    "accelerator_config": {},
                    "params": {},
                    "status": "failed",
                    "error": REASON,
                    "is_baseline": True,
                }
            ],
        )
        return experiment.id


def test_banner_without_a_worker_and_the_failure_reason(
    workerless: Server, browser: Browser, screenshots: Path
) -> None:
    experiment_id = seed_failed_run(workerless)
    console = ConsoleLog()
    context = browser.new_context(viewport={"width": 1400, "height": 800})
    page = context.new_page()
    console.watch(page)
    page.goto(f"{workerless.url}/?experiment_id={experiment_id}")
    banner = page.locator("#worker-banner")
    banner.wait_for(state="visible")
    assert "No worker is running" in banner.inner_text()
    assert "2.0 s" in banner.inner_text() or "2 s" in banner.inner_text()
    reason = page.locator("#run-table tbody tr .run-reason")
    reason.wait_for()
    assert reason.inner_text() == REASON
    page.screenshot(path=screenshots / "12-no-worker-banner-and-failure-reason.png", full_page=True)
    page.goto(f"{workerless.url}/submit")
    page.locator("#worker-banner").wait_for(state="visible")
    assert console.errors == []
    context.close()


def test_no_banner_while_a_worker_beats(server: Server, browser: Browser) -> None:
    poll(
        lambda: httpx.get(f"{server.url}/api/v1/health", timeout=10).json()["workers"]["ok"],
        120,
        "the server's worker to beat",
    )
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{server.url}/")
    page.locator("#experiments").wait_for()
    page.wait_for_load_state("networkidle")
    assert page.locator("#worker-banner").is_hidden()
    context.close()
