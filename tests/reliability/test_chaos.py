"""The chaos suite: real workers killed, stopped past their lease, cut off from Redis and from
PostgreSQL mid-training, on a PostgreSQL cluster and Redis servers of the suite's own (never
the shared ones), with a lease of a few seconds. Each test ends by checking the state of every
run and counting the result rows: exactly one result set per training and per run."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from backend.api.app import create_app
from backend.db import migrate
from backend.db.models import Training
from backend.db.session import engine_for, session_scope
from backend.settings import Settings
from tests.conftest import embedded_server
from tests.reliability.chaos import (
    LEASE_SECONDS,
    Worker,
    all_runs_finished,
    assert_one_result_set_each,
    chaos_settings,
    child_pids,
    final_state,
    poll,
    training_under_way,
)
from tests.reliability.services import OwnPostgres, OwnRedis, running_postgres
from tests.reliability.test_postgres_restart import create_database

pytestmark = pytest.mark.slow  # starts workers, Redis, PostgreSQL and `orrery serve`

EPOCHS = 30
SPEC = {
    "name": "chaos",
    # One training (seconds on a quiet machine, minutes on a busy one) on two accelerators.
    "training": {"model": "lenet5", "dataset": "digits", "epochs": EPOCHS, "batch_size": 16},
    "techniques": [{"name": "baseline"}],
    "accelerators": ["edge", "eyeriss-like"],
}
TRAINING_TIMEOUT = 240


# One cluster for the whole suite (a database per test); the last test restarts it.
chaos_postgres = pytest.fixture(running_postgres, scope="module", name="chaos_postgres")


@pytest.fixture
def settings(
    chaos_postgres: OwnPostgres, own_redis: OwnRedis, tmp_path: Path
) -> Iterator[Settings]:
    url = create_database(chaos_postgres, f"chaos_{uuid.uuid4().hex[:8]}")
    migrate.upgrade(url)
    yield chaos_settings(url, own_redis.url, tmp_path)
    engine_for(url).dispose()


@pytest.fixture
def api(settings: Settings) -> Iterator[TestClient]:
    """The API, whose reconciler takes back expired leases every half second."""
    with TestClient(create_app(settings)) as client:
        yield client


def live_workers(api: TestClient) -> int:
    return api.get("/api/v1/health").json()["workers"]["live"]


def submit(api: TestClient, name: str = "chaos") -> int:
    response = api.post("/api/v1/experiments", json={**SPEC, "name": name})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def wait_until_under_way(url: str, workers: list[Worker]) -> Training:
    try:
        return poll(lambda: training_under_way(url), TRAINING_TIMEOUT, "a training under way")
    except AssertionError as timeout:
        logs = "\n".join(w.stop()[-3000:] for w in workers)
        raise AssertionError(f"workers said:\n{logs}") from timeout


def wait_until_finished(url: str, workers: list[Worker]) -> None:
    try:
        poll(lambda: all_runs_finished(url), TRAINING_TIMEOUT, "every run to finish")
    except AssertionError as timeout:
        logs = "\n".join(w.stop()[-3000:] for w in workers)
        raise AssertionError(f"{final_state(url)}\nworkers said:\n{logs}") from timeout


def test_whole_worker_sigkilled_mid_training(api: TestClient, settings: Settings) -> None:
    url = settings.effective_database_url
    first = Worker.start(settings, "first")
    workers = [first]
    try:
        poll(lambda: live_workers(api) == 1, 120, "the first worker's heartbeat")
        submit(api)
        victim = wait_until_under_way(url, workers)
        first.kill()  # pool process and main process: nobody is left to redeliver
        poll(lambda: live_workers(api) == 0, 3 * LEASE_SECONDS, "the dead worker to stop counting")
        second = Worker.start(settings, "second")
        workers.append(second)
        wait_until_finished(url, workers)
    finally:
        for worker in workers:
            worker.stop()
    state = final_state(url)
    assert_one_result_set_each(state, EPOCHS)
    assert state.attempts == {victim.id: 2}  # the killed delivery and the one after its lease


def test_worker_stopped_past_its_lease_then_resumed(api: TestClient, settings: Settings) -> None:
    url = settings.effective_database_url
    workers = [Worker.start(settings, "one"), Worker.start(settings, "two")]
    try:
        poll(lambda: live_workers(api) == 2, 120, "both workers' heartbeats")
        submit(api)
        leased = wait_until_under_way(url, workers)
        holder_pid = int(leased.leased_by.rsplit(":", 1)[1])
        [stopped] = [w for w in workers if holder_pid in child_pids(w.process.pid)]
        stopped.signal(signal.SIGSTOP)

        def taken_over() -> bool:
            with session_scope(url) as db:
                training = db.get(Training, leased.id)
                return training.attempts == 2 and training.status == "running"

        poll(taken_over, 60, "the other worker to claim the training after the lease")
        stopped.signal(signal.SIGCONT)  # it still trains attempt 1, and must not store it
        wait_until_finished(url, workers)
        # The resumed worker noticed it had lost the lease (or its commit was fenced off).
        poll(lambda: "lost its lease" in stopped.log.read_text(errors="replace")
             or "superseded" in stopped.log.read_text(errors="replace"),
             60, "the resumed worker to notice its lease is gone")  # fmt: skip
    finally:
        logs = [worker.stop() for worker in workers]
    state = final_state(url)
    assert_one_result_set_each(state, EPOCHS)
    assert state.attempts == {leased.id: 2}, logs


def test_redis_restarted_mid_submission_and_mid_training(
    api: TestClient, settings: Settings, own_redis: OwnRedis
) -> None:
    url = settings.effective_database_url
    worker = Worker.start(settings, "worker")
    try:
        poll(lambda: live_workers(api) == 1, 120, "the worker's heartbeat")
        before = submit(api, "before the outage")
        wait_until_under_way(url, [worker])

        own_redis.stop()  # mid-training; its messages die with it (no persistence)
        for attempt in range(3):
            refused = api.post("/api/v1/experiments", json={**SPEC, "name": f"during {attempt}"})
            assert refused.status_code == 503, refused.text
            assert "nothing was submitted" in refused.json()["detail"]
        own_redis.start()

        after = submit(api, "after the outage")
        wait_until_finished(url, [worker])
    finally:
        worker.stop()
    listed = api.get("/api/v1/experiments").json()["items"]
    assert sorted((e["id"], e["status"]) for e in listed) == [(before, "done"), (after, "done")]
    state = final_state(url)
    assert len(state.run_statuses) == 4
    assert_one_result_set_each(state, EPOCHS)


def test_postgres_restarted_mid_training(
    api: TestClient, settings: Settings, chaos_postgres: OwnPostgres
) -> None:
    url = settings.effective_database_url
    worker = Worker.start(settings, "worker")
    try:
        poll(lambda: live_workers(api) == 1, 120, "the worker's heartbeat")
        submit(api)
        leased = wait_until_under_way(url, [worker])
        chaos_postgres.restart()
        wait_until_finished(url, [worker])
    finally:
        worker.stop()
    state = final_state(url)
    assert_one_result_set_each(state, EPOCHS)
    # A restart longer than the lease lets the reconciler take the training back once.
    assert state.attempts[leased.id] in (1, 2)


def test_serve_restarts_its_killed_worker_and_the_lease_recovers_its_training(
    tmp_path: Path,
) -> None:
    """Embedded defaults (SQLite database and broker): the whole worker of `orrery serve` is
    SIGKILLed mid-training; serve starts a new one, the API's reconciler takes the training back
    once its lease expires, and the new worker finishes it."""
    data_dir = tmp_path / "data"
    lease = {"ORRERY_LEASE_SECONDS": str(LEASE_SECONDS), "ORRERY_RECONCILE_INTERVAL": "0.5"}
    with embedded_server(data_dir, **lease) as server:
        url = f"sqlite:///{data_dir / 'orrery.db'}"

        def health() -> dict:
            return httpx.get(f"{server.url}/api/v1/health", timeout=10).json()

        poll(lambda: health()["workers"]["live"] == 1, 120, "serve's worker to beat")
        [worker_pid] = child_pids(server.process.pid)
        submitted = httpx.post(f"{server.url}/api/v1/experiments", json=SPEC, timeout=30)
        assert submitted.status_code == 201, submitted.text
        victim = poll(lambda: training_under_way(url), TRAINING_TIMEOUT, "a training under way")
        for pid in [*child_pids(worker_pid), worker_pid]:
            os.kill(pid, signal.SIGKILL)

        restarted = poll(
            lambda: [p for p in child_pids(server.process.pid) if p != worker_pid],
            60,
            "serve to start a new worker",
        )
        assert len(restarted) == 1
        poll(lambda: all_runs_finished(url), TRAINING_TIMEOUT, "every run to finish")
        assert health()["workers"]["live"] == 1
    state = final_state(url)
    assert_one_result_set_each(state, EPOCHS)
    assert state.attempts == {victim.id: 2}
    assert "restarting" in server.output
