"""Fair dispatch on PostgreSQL and Redis: one user's long queue does not hold up another's
training. The broker holds a short backlog; the rest wait in the table and are sent fewest in
flight per owner first, then oldest (backend/delivery/dispatch.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import redis
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from backend.api.app import create_app
from backend.cli.launcher import worker_command
from backend.db.models import DesignSearchRow, Experiment, SearchChunk, Training
from backend.db.session import session_scope
from backend.delivery.claims import claim_training
from backend.delivery.dispatch import dispatch, next_messages
from backend.delivery.queue import QUEUE, TaskName
from backend.settings import Settings
from tests.conftest import accounts_service_settings, orrery_env, stop_process
from tests.pipeline.conftest import TINY_TRAINING
from tests.reliability.chaos import poll
from tests.security.conftest import BASE_URL, Person, make_person
from worker.jobs import run_training_job

AHEAD = 2
SEARCHABLE: dict[str, object] = {
    "name": "searchable",
    "training": TINY_TRAINING,
    "techniques": [{"name": "sparsetrain", "prune_rate": 0.9}],
    "accelerators": ["edge"],
}
# 100 designs in chunks of 10: ten chunks per search.
SMALL_SEARCH: dict[str, object] = {
    "base": "edge",
    "mode": "random",
    "parameters": {"rows": {"low": 4, "high": 64}, "dram_bandwidth": {"low": 1, "high": 16}},
    "samples": 100,
    "sample_size": 20,
    "chunk_size": 10,
}


def many(name: str, seeds: int) -> dict[str, object]:
    """One baseline training per seed."""
    return {
        "name": name,
        "training": TINY_TRAINING,
        "techniques": [{"name": "baseline"}],
        "accelerators": ["edge"],
        "seeds": list(range(seeds)),
    }


def fair_settings(
    postgres_url: str, redis_db_url: str, tmp_path: Path, **overrides: object
) -> Settings:
    return accounts_service_settings(
        postgres_url, redis_db_url, tmp_path, dispatch_ahead=AHEAD, **overrides
    )


def trainings_of(settings: Settings, person: Person) -> list[Training]:
    with session_scope(settings.effective_database_url) as db:
        query = (
            select(Training)
            .join(Experiment, Experiment.id == Training.experiment_id)
            .where(Experiment.owner_id == person.id)
            .order_by(Training.id)
        )
        trainings = list(db.scalars(query))
        db.expunge_all()
        return trainings


def submit(client: TestClient, person: Person, spec: dict[str, object]) -> None:
    response = client.post("/api/v1/experiments", json=spec, headers=person.auth)
    assert response.status_code == 201, response.text


def test_the_next_training_sent_is_the_other_users(
    postgres_url: str, redis_db_url: str, tmp_path: Path
) -> None:
    settings = fair_settings(postgres_url, redis_db_url, tmp_path)
    url = settings.effective_database_url
    alice, bob = make_person(settings, "alice"), make_person(settings, "bob")
    broker = redis.Redis.from_url(redis_db_url)
    with TestClient(create_app(settings), base_url=BASE_URL) as client:
        submit(client, alice, many("alice's", 6))
        submit(client, bob, many("bob's", 1))
        # Only the backlog went to the broker: alice's first two. Bob's waits in the table.
        sent = [t.id for t in trainings_of(settings, alice) if t.sent_at is not None]
        assert sent == [t.id for t in trainings_of(settings, alice)][:AHEAD]
        assert broker.llen(QUEUE) == AHEAD
        [bobs] = trainings_of(settings, bob)
        assert bobs.sent_at is None and bobs.task_id is None

        # A worker claims alice's first: alice has two in flight, bob none, so bob's is next
        # although alice's third is older.
        with session_scope(url) as db:
            assert claim_training(db, sent[0], "worker") == 1
        with session_scope(url) as db:
            assert dispatch(db, client.app.state.celery, AHEAD) == [(TaskName.TRAIN, bobs.id)]
            assert dispatch(db, client.app.state.celery, AHEAD) == []  # backlog full again
        assert broker.llen(QUEUE) == AHEAD + 1

        # Then round-robin between owners, oldest first within each: carol's two trainings
        # and alice's remaining ones interleave.
        carol = make_person(settings, "carol")
        submit(client, carol, many("carol's", 2))
        alices = [t.id for t in trainings_of(settings, alice)]
        carols = [t.id for t in trainings_of(settings, carol)]
        with session_scope(url) as db:
            # In flight: alice 2 (one running, one sent), bob 1, carol 0.
            assert next_messages(db, 4) == [
                (TaskName.TRAIN, i) for i in (carols[0], carols[1], alices[2], alices[3])
            ]
    broker.close()


def start_fair_worker(
    settings: Settings, redis_db_url: str, tmp_path: Path
) -> tuple[subprocess.Popen, Path]:
    """A real worker of concurrency 1 on these settings' database and Redis, dispatching at
    most AHEAD ahead; its output goes to the returned log file."""
    log = tmp_path / "worker.log"
    env = orrery_env(
        ORRERY_DATA_DIR=str(tmp_path),
        ORRERY_DATABASE_URL=settings.effective_database_url,
        ORRERY_BROKER_URL=redis_db_url,
        ORRERY_RESULT_BACKEND=redis_db_url,
        ORRERY_DISPATCH_AHEAD=str(AHEAD),
    )
    command = [*worker_command(concurrency=1, loglevel="INFO"), "--without-mingle"]
    with log.open("wb") as out:
        worker = subprocess.Popen(
            [*command, "--without-gossip"], cwd=tmp_path, env=env, stdout=out, stderr=out
        )
    return worker, log


def test_with_a_real_worker_bobs_training_runs_before_alices_queue_drains(
    postgres_url: str, redis_db_url: str, tmp_path: Path
) -> None:
    """A worker of concurrency 1 on Redis: alice's six trainings were accepted first, bob's
    one is trained third, not seventh as first-in-first-out would have it."""
    settings = fair_settings(postgres_url, redis_db_url, tmp_path)
    alice, bob = make_person(settings, "alice"), make_person(settings, "bob")
    with TestClient(create_app(settings), base_url=BASE_URL) as client:
        submit(client, alice, many("alice's", 6))
        submit(client, bob, many("bob's", 1))
    worker, log = start_fair_worker(settings, redis_db_url, tmp_path)
    try:
        poll(
            lambda: {t.status for t in trainings_of(settings, bob)} == {"done"},
            120,
            "bob's training",
        )
    finally:
        stop_process(worker)
    [bobs] = trainings_of(settings, bob)
    alices = trainings_of(settings, alice)
    started_before = [
        t for t in alices if t.started_at is not None and t.started_at < bobs.started_at
    ]
    assert len(started_before) <= AHEAD, log.read_text()[-3000:]
    # Read from the recorded start times, not the queue when the poll looked: under load the
    # worker may drain alice's queue before the poll notices bob's training done.
    started_after = [t for t in alices if t.started_at is None or t.started_at > bobs.started_at]
    assert started_after, "alice's queue drained before bob's ran"


SEARCH_CAP = 3


def trained_experiment(client: TestClient, settings: Settings, person: Person) -> int:
    """An experiment of `person` whose trainings are done (trained here, no worker), ready to
    be searched at once."""
    response = client.post("/api/v1/experiments", json=SEARCHABLE, headers=person.auth)
    assert response.status_code == 201, response.text
    url = settings.effective_database_url
    for training in trainings_of(settings, person):
        assert run_training_job(url, training.id, task_id="here") == "done"
    return int(response.json()["id"])


def start_search(client: TestClient, person: Person, experiment_id: int) -> dict[str, object]:
    response = client.post(
        f"/api/v1/experiments/{experiment_id}/searches", json=SMALL_SEARCH, headers=person.auth
    )
    assert response.status_code == 201, response.text
    return response.json()


def chunks_of(settings: Settings, person: Person) -> list[SearchChunk]:
    with session_scope(settings.effective_database_url) as db:
        query = (
            select(SearchChunk)
            .join(DesignSearchRow, DesignSearchRow.id == SearchChunk.search_id)
            .where(DesignSearchRow.created_by == person.id)
            .order_by(SearchChunk.id)
        )
        chunks = list(db.scalars(query))
        db.expunge_all()
        return chunks


def test_searches_per_user_are_capped_with_what_is_ahead(
    postgres_url: str, redis_db_url: str, tmp_path: Path
) -> None:
    settings = fair_settings(
        postgres_url, redis_db_url, tmp_path, max_active_searches_per_user=SEARCH_CAP
    )
    url = settings.effective_database_url
    alice, bob = make_person(settings, "alice"), make_person(settings, "bob")
    with TestClient(create_app(settings), base_url=BASE_URL) as client:
        experiment_id = trained_experiment(client, settings, alice)
        searches = [start_search(client, alice, experiment_id) for _ in range(SEARCH_CAP)]
        assert {s["status"] for s in searches} == {"running"}
        with session_scope(url) as db:
            stored = db.scalar(select(func.count()).select_from(DesignSearchRow))
        over = client.post(
            f"/api/v1/experiments/{experiment_id}/searches",
            json=SMALL_SEARCH,
            headers=alice.auth,
        )
        assert over.status_code == 429, over.text
        detail = over.json()["detail"]
        chunks = SEARCH_CAP * 10
        assert f"you have {SEARCH_CAP} waiting or running design searches" in detail
        assert f"the limit of {SEARCH_CAP} per user" in detail
        assert f"{SEARCH_CAP} searches (all users') are waiting or running" in detail
        assert f"with {chunks} chunks not yet evaluated" in detail
        # An experiment with a search section is refused whole too: nothing stored.
        experiments = client.get("/api/v1/experiments", headers=alice.auth).json()["total"]
        refused = client.post(
            "/api/v1/experiments", json={**SEARCHABLE, "search": SMALL_SEARCH}, headers=alice.auth
        )
        assert refused.status_code == 429, refused.text
        assert client.get("/api/v1/experiments", headers=alice.auth).json()["total"] == experiments
        with session_scope(url) as db:
            assert db.scalar(select(func.count()).select_from(DesignSearchRow)) == stored
        # Another user is not held by alice's searches; a cancelled search frees a place.
        bobs = trained_experiment(client, settings, bob)
        assert start_search(client, bob, bobs)["status"] == "running"
        cancel = client.post(f"/api/v1/searches/{searches[0]['id']}/cancel", headers=alice.auth)
        assert cancel.status_code == 200, cancel.text
        assert start_search(client, alice, experiment_id)["status"] == "running"


def test_with_a_real_worker_bobs_training_starts_within_one_chunk_of_alices_searches(
    postgres_url: str, redis_db_url: str, tmp_path: Path
) -> None:
    """Alice's running searches have many chunks waiting; bob's one training, submitted after
    them, is sent as soon as a worker claims a message: the worker (concurrency 1) evaluates at
    most the backlog of alice's chunks before it, not every chunk sent before it (first in,
    first out: a window per search)."""
    settings = fair_settings(postgres_url, redis_db_url, tmp_path)
    alice, bob = make_person(settings, "alice"), make_person(settings, "bob")
    broker = redis.Redis.from_url(redis_db_url)
    with TestClient(create_app(settings), base_url=BASE_URL) as client:
        experiment_id = trained_experiment(client, settings, alice)
        broker.delete(QUEUE)  # the messages of the trainings trained here: no-ops, dropped
        for _ in range(3):
            start_search(client, alice, experiment_id)
        submit(client, bob, many("bob's", 1))
        # The broker holds the backlog only: alice's first chunks; bob's training waits its
        # turn in the table, as do the other chunks.
        assert broker.llen(QUEUE) == AHEAD
        assert sum(c.sent_at is not None for c in chunks_of(settings, alice)) == AHEAD
        [bobs] = trainings_of(settings, bob)
        assert bobs.sent_at is None
    worker, log = start_fair_worker(settings, redis_db_url, tmp_path)
    try:
        poll(
            lambda: {t.status for t in trainings_of(settings, bob)} == {"done"},
            180,
            "bob's training",
        )
    finally:
        stop_process(worker)
        broker.close()
    [bobs] = trainings_of(settings, bob)
    chunks = chunks_of(settings, alice)
    assert bobs.started_at is not None
    before = [c for c in chunks if c.finished_at is not None and c.finished_at < bobs.started_at]
    assert len(before) <= AHEAD, log.read_text()[-3000:]
    # Alice's searches went on after bob's training started: it did not wait for them to end.
    assert any(c.finished_at is None or c.finished_at > bobs.started_at for c in chunks)
