"""`orrery reconcile` on the embedded defaults: a training recorded but never sent (the API
lost the broker between commit and send) is re-enqueued once, and only once."""

from __future__ import annotations

import subprocess
from pathlib import Path

from backend.reconcile import broker_task_ids
from sqlalchemy import select

from backend.db import migrate
from backend.db.models import Training
from backend.db.session import session_scope
from backend.delivery.queue import make_celery
from backend.experiments.expand import expand
from backend.experiments.service import record_experiment
from backend.settings import Settings
from backend.specs.experiment import ExperimentSpec
from tests.conftest import ORRERY_BIN, orrery_env
from tests.pipeline.conftest import TINY_TRAINING

SPEC = {
    "name": "never sent",
    "training": TINY_TRAINING,
    "techniques": [{"name": "mercury"}, {"name": "sparsetrain"}],
    "accelerators": ["edge"],
}


def reconcile(data_dir: Path) -> str:
    done = subprocess.run(
        [ORRERY_BIN, "reconcile", "--grace", "0"],
        env=orrery_env(ORRERY_DATA_DIR=str(data_dir)),
        cwd=data_dir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_reconcile_requeues_trainings_with_no_message_once(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    migrate.upgrade(settings.effective_database_url)
    spec = ExperimentSpec.model_validate(SPEC)
    with session_scope(settings.effective_database_url) as db:
        record_experiment(db, spec, expand(spec, 100), owner_id=None)

    assert "3 queued trainings checked, 3 re-enqueued" in reconcile(tmp_path)
    with session_scope(settings.effective_database_url) as db:
        task_ids = set(db.scalars(select(Training.task_id)))
    assert None not in task_ids
    assert broker_task_ids(make_celery(settings)) == task_ids

    assert "3 queued trainings checked, 0 re-enqueued" in reconcile(tmp_path)
    assert broker_task_ids(make_celery(settings)) == task_ids
