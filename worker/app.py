"""The Celery application that runs Orrery's jobs: `celery -A worker.app worker`."""

from __future__ import annotations

import worker.liveness  # noqa: F401  (connects the worker heartbeat to the worker's signals)
from backend.queue import make_celery
from backend.settings import get_settings

app = make_celery(get_settings())
app.conf.include = ["worker.tasks"]
