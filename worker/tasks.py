"""Celery tasks. The API sends them by the names in `backend.queue.TaskName`."""

from __future__ import annotations

import os
import socket

from backend.queue import TaskName
from worker.app import app


@app.task(name=TaskName.PING)
def ping() -> dict[str, object]:
    """Answer with who ran the task, so a health check proves a worker is consuming."""
    return {"host": socket.gethostname(), "pid": os.getpid()}
