"""The Celery application that runs Orrery's jobs: `celery -A worker.app worker`."""

from __future__ import annotations

from backend.delivery.liveness import connect_worker_signals
from backend.delivery.queue import make_celery
from backend.settings import get_settings

connect_worker_signals()  # the worker's heartbeat in the database (worker liveness)
app = make_celery(get_settings())
app.conf.include = ["worker.tasks"]
