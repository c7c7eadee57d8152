"""The Celery application that runs Orrery's jobs: `celery -A worker.app worker`."""

from __future__ import annotations

from typing import Any

from celery.signals import worker_init

from backend.delivery.liveness import connect_worker_signals
from backend.delivery.queue import make_celery
from backend.settings import get_settings
from worker.cpu_priority import yield_cpu

connect_worker_signals()  # the worker's heartbeat in the database (worker liveness)
app = make_celery(get_settings())
app.conf.include = ["worker.tasks"]


@worker_init.connect(weak=False)
def _yield_cpu(**_: Any) -> None:
    """Before the pool starts, so that its training processes inherit the niceness."""
    yield_cpu(get_settings().worker_nice)
