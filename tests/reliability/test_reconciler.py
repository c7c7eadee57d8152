"""The reconciler re-sends a queued training from what the trainings table records of its sends
(`sent_at`, `sends`), never from the broker's storage: a training never sent is dispatched in
its turn by the pass, one whose message the broker lost is sent again once its last send is
older than the interval, a training sent
recently is left to its message, the wait doubles with each re-send of one wait up to the cap,
and the extra messages a real worker then receives train nothing twice."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis
from fastapi.testclient import TestClient
from sqlalchemy import func, select, update

from backend.api.app import create_app
from backend.db import migrate
from backend.db.models import EpochMetric, LayerResult, Run, Training
from backend.db.session import session_scope
from backend.delivery.claims import claim_training
from backend.delivery.queue import QUEUE, declare_queue, make_celery
from backend.delivery.reconcile import reconcile_once, resend_wait
from backend.experiments.expand import expand
from backend.experiments.service import record_experiment
from backend.settings import Settings
from backend.specs.experiment import ExperimentSpec
from backend.specs.techniques import parse_techniques
from backend.specs.training import TrainingConfig
from backend.training import run_training
from tests.conftest import ORRERY_BIN, orrery_env, service_settings
from tests.pipeline.conftest import TINY_TRAINING
from tests.reliability.chaos import Worker, poll
from worker.jobs import run_training_job
from worker.storage import store_results

SPEC = {
    "name": "never sent",
    "training": TINY_TRAINING,
    "techniques": [{"name": "mercury"}, {"name": "sparsetrain"}],
    "accelerators": ["edge"],
}
ONE_TRAINING = {**SPEC, "name": "sent", "techniques": [{"name": "baseline"}]}
GRACE = 60.0


def reconcile(data_dir: Path, grace: float) -> str:
    done = subprocess.run(
        [ORRERY_BIN, "reconcile", "--grace", f"{grace:g}"],
        env=orrery_env(ORRERY_DATA_DIR=str(data_dir)),
        cwd=data_dir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def age(url: str, seconds: float, column: str = "sent_at") -> None:
    """Move every training's last send (or creation) `seconds` into the past."""
    with session_scope(url) as db:
        db.execute(
            update(Training).values({column: datetime.now(UTC) - timedelta(seconds=seconds)})
        )
        db.commit()


def sends(url: str) -> dict[int, int]:
    with session_scope(url) as db:
        return {row.id: row.sends for row in db.execute(select(Training.id, Training.sends))}


def counts(url: str) -> tuple[int, int]:
    with session_scope(url) as db:
        return (
            db.scalar(select(func.count()).select_from(EpochMetric)) or 0,
            db.scalar(select(func.count()).select_from(LayerResult)) or 0,
        )


def test_the_wait_before_a_re_send_doubles_up_to_the_cap() -> None:
    assert [resend_wait(n, 60, 3600) for n in (0, 1, 2, 3, 4)] == [60, 60, 120, 240, 480]
    assert resend_wait(7, 60, 3600) == 3600
    assert resend_wait(10_000, 60, 3600) == 3600  # no overflow however many sends
    assert resend_wait(1, 60, 10) == 60  # a cap below the interval does not shorten it


@pytest.mark.slow  # starts a worker
def test_a_training_never_sent_is_dispatched_by_a_pass_and_then_trains_once(
    tmp_path: Path,
) -> None:
    """Embedded defaults (SQLite database and broker), through `orrery reconcile`: the API
    committed the trainings and lost the broker before sending them (or they waited for their
    turn): the pass dispatches them (backend/delivery/dispatch.py)."""
    settings = Settings(data_dir=tmp_path)
    url = settings.effective_database_url
    migrate.upgrade(url)
    spec = ExperimentSpec.model_validate(SPEC)
    with session_scope(url) as db:
        experiment_id = record_experiment(db, spec, expand(spec, 100), owner_id=None).id
        db.commit()

    # Never sent: waiting for their turn, which has come (the broker's backlog is empty).
    output = reconcile(tmp_path, GRACE)
    assert "3 trainings awaiting a worker checked, 0 re-enqueued" in output
    assert "3 waiting trainings sent in turn" in output
    assert set(sends(url).values()) == {1}
    with session_scope(url) as db:
        assert None not in set(db.scalars(select(Training.task_id)))
    # Sent a moment ago: left to its message, however long the queue.
    assert "3 trainings awaiting a worker checked, 0 re-enqueued" in reconcile(tmp_path, GRACE)
    assert set(sends(url).values()) == {1}
    # Its message was merely slow: a second one goes out, and the duplicate is harmless.
    age(url, GRACE + 1)
    assert "3 trainings awaiting a worker checked, 3 re-enqueued" in reconcile(tmp_path, GRACE)
    assert set(sends(url).values()) == {2}

    declare_queue(settings.effective_broker_url)
    worker = Worker.start(settings, "reconciled")
    try:
        # Six messages for three trainings: each trains once, the later message of each finds
        # it running or done and does nothing.
        poll(lambda: worker.log.read_text().count("succeeded in") >= 6, 300, "six tasks")
    finally:
        log = worker.stop()
    assert "'status': 'failed'" not in log, log[-3000:]
    with session_scope(url) as db:
        trainings = list(
            db.scalars(select(Training).where(Training.experiment_id == experiment_id))
        )
        assert {t.status for t in trainings} == {"done"}
        assert {t.attempts for t in trainings} == {1}
        assert set(db.scalars(select(Run.status))) == {"done"}
    epochs, layers = counts(url)
    assert epochs == len(trainings) * TINY_TRAINING["epochs"] and layers > 0


def test_a_message_lost_by_redis_is_sent_again_after_the_interval_with_back_off(
    postgres_url: str, redis_db_url: str, tmp_path: Path
) -> None:
    settings = service_settings(
        postgres_url,
        redis_db_url,
        tmp_path,
        single_user=True,
        reconcile_interval=0,
        reconcile_grace_seconds=GRACE,
        reconcile_grace_max_seconds=3 * GRACE,
    )
    url = settings.effective_database_url
    broker = redis.Redis.from_url(redis_db_url)
    with TestClient(create_app(settings)) as api:
        assert api.post("/api/v1/experiments", json=ONE_TRAINING).status_code == 201
        celery = api.app.state.celery
        [training_id] = sends(url)
        assert sends(url) == {training_id: 1}
        assert broker.llen(QUEUE) == 1

        assert reconcile_once(settings, celery).requeued == []  # sent recently
        broker.flushdb()  # the message is lost (Redis restarted without persistence)
        assert reconcile_once(settings, celery).requeued == []  # nothing tells, yet
        age(url, GRACE + 1)
        assert reconcile_once(settings, celery).requeued == [training_id]
        assert (sends(url), broker.llen(QUEUE)) == ({training_id: 2}, 1)

        age(url, GRACE + 1)  # the second wait is twice the first
        assert reconcile_once(settings, celery).requeued == []
        age(url, 2 * GRACE + 1)
        assert reconcile_once(settings, celery).requeued == [training_id]
        age(url, 3 * GRACE + 1)  # the third would be 4 × GRACE: capped at 3 × GRACE
        assert reconcile_once(settings, celery).requeued == [training_id]
        assert (sends(url), broker.llen(QUEUE)) == ({training_id: 4}, 3)

        # A message of the training delivered now trains it (the others find it done).
        with session_scope(url) as db:
            task_id = db.get(Training, training_id).task_id
        assert run_training_job(url, training_id, task_id=task_id) == "done"
        age(url, 10 * GRACE)
        assert reconcile_once(settings, celery).requeued == []  # done: never sent again
    broker.close()


def test_a_lost_message_for_the_open_runs_of_a_done_training_is_sent_again(
    postgres_url: str, redis_db_url: str, tmp_path: Path
) -> None:
    """A retried run of a finished training (like the runs of a search's front design) is
    simulated on the stored workload by a message for the done training; when that message is
    lost, the reconciler sends it again, and the run is stored once."""
    settings = service_settings(
        postgres_url,
        redis_db_url,
        tmp_path,
        single_user=True,
        reconcile_interval=0,
        reconcile_grace_seconds=GRACE,
    )
    url = settings.effective_database_url
    broker = redis.Redis.from_url(redis_db_url)
    with TestClient(create_app(settings)) as api:
        assert api.post("/api/v1/experiments", json=ONE_TRAINING).status_code == 201
        celery = api.app.state.celery
        [training_id] = sends(url)
        with session_scope(url) as db:
            task_id = db.get(Training, training_id).task_id
            [run_id] = db.scalars(select(Run.id).where(Run.training_id == training_id))
        assert run_training_job(url, training_id, task_id=task_id) == "done"
        layers = counts(url)[1]
        with session_scope(url) as db:  # the run failed after its training was done
            db.execute(update(Run).where(Run.id == run_id).values(status="failed", error="x"))
            db.commit()
        broker.flushdb()
        assert api.post(f"/api/v1/runs/{run_id}/retry").status_code == 200
        assert broker.llen(QUEUE) == 1
        broker.flushdb()  # the retry's message is lost

        assert reconcile_once(settings, celery).requeued == []  # sent recently
        age(url, GRACE + 1)
        assert reconcile_once(settings, celery).requeued == [training_id]
        assert broker.llen(QUEUE) == 1
        with session_scope(url) as db:
            task_id = db.get(Training, training_id).task_id
        assert run_training_job(url, training_id, task_id=task_id) == "done"
        with session_scope(url) as db:
            run = db.get(Run, run_id)
            assert (run.status, run.attempt) == ("done", 2) and run.total_cycles
        assert counts(url)[1] == layers  # its layers replaced, not added twice
        age(url, 10 * GRACE)
        assert reconcile_once(settings, celery).requeued == []  # nothing open: not sent again
    broker.close()


def test_a_message_sent_again_for_a_training_a_live_worker_holds_is_a_no_op(
    postgres_url: str, redis_db_url: str, tmp_path: Path
) -> None:
    settings = service_settings(
        postgres_url, redis_db_url, tmp_path, single_user=True, reconcile_interval=0
    )
    url = settings.effective_database_url
    with TestClient(create_app(settings)) as api:
        assert api.post("/api/v1/experiments", json=ONE_TRAINING).status_code == 201
        [training_id] = sends(url)
        with session_scope(url) as db:
            assert claim_training(db, training_id, "holder") == 1
            holder = db.get(Training, training_id).leased_by
        # Overdue by its last send, but running: the reconciler leaves it to its holder.
        age(url, 10 * settings.reconcile_grace_seconds)
        report = reconcile_once(settings, make_celery(settings))
        assert report.requeued == [] and report.expired == []

    # The message sent before the claim (or a re-send that raced it) is delivered meanwhile.
    assert run_training_job(url, training_id, task_id="duplicate") == "running"
    with session_scope(url) as db:
        training = db.get(Training, training_id)
        assert (training.status, training.attempts, training.task_id, training.leased_by) == (
            "running",
            1,
            "holder",
            holder,
        )
    assert counts(url) == (0, 0)

    # The holder stores its results; a duplicate delivered after that writes nothing.
    result = run_training(TrainingConfig(**TINY_TRAINING), parse_techniques([]))
    with session_scope(url) as db:
        assert store_results(db, training_id, 1, result) is True
    stored = counts(url)
    with session_scope(url) as db:
        finished = list(
            db.scalars(
                select(Run.finished_at).where(Run.training_id == training_id).order_by(Run.id)
            )
        )
    assert run_training_job(url, training_id, task_id="late duplicate") == "done"
    assert counts(url) == stored
    with session_scope(url) as db:
        training = db.get(Training, training_id)
        assert (training.status, training.attempts) == ("done", 1)
        again = select(Run.finished_at).where(Run.training_id == training_id).order_by(Run.id)
        assert list(db.scalars(again)) == finished
