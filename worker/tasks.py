"""Celery tasks. The API sends them by the names in `backend.delivery.queue.TaskName`.

A training task dispatches the next trainings (`backend.delivery.dispatch`) once it claimed its
own, which frees a place in the broker's backlog, and again when it is over; a dispatch that
fails (database or broker away) is left to the reconciler and never fails the task.
"""

from __future__ import annotations

import logging
import os
import socket

from celery import Task
from sqlalchemy.exc import OperationalError

from backend.db.session import session_scope
from backend.delivery.dispatch import dispatch
from backend.delivery.leases import LeaseTerms
from backend.delivery.queue import TaskName
from backend.settings import Settings, get_settings
from worker.app import app
from worker.intra_op_threads import configure_threads
from worker.jobs import run_training_job
from worker.training import Progress

log = logging.getLogger("orrery.tasks")


def dispatch_next(settings: Settings) -> None:
    """Send the next trainings in their turn; a failure is logged, never raised."""
    try:
        with session_scope(settings.worker_database_url) as db:
            dispatch(db, app, settings.dispatch_ahead)
    except Exception as exc:  # the reconciler's next pass dispatches instead
        log.warning("dispatch after a delivery failed: %s", exc)


@app.task(name=TaskName.PING)
def ping() -> dict[str, object]:
    """Answer with who ran the task, so a health check proves a worker is consuming."""
    return {"host": socket.gethostname(), "pid": os.getpid()}


@app.task(
    name=TaskName.TRAIN,
    bind=True,
    # A database that is briefly away (restart, failover) is worth waiting for.
    autoretry_for=(OperationalError,),
    retry_backoff=2,
    retry_backoff_max=120,
    retry_jitter=True,
    max_retries=8,
)
def train(self: Task, training_id: int) -> dict[str, object]:
    """Train one training, store its workload and epochs, simulate each of its runs."""

    def on_progress(progress: Progress) -> None:
        self.update_state(
            state="PROGRESS",
            meta={"fraction": progress.fraction, "epoch": progress.epoch, "batch": progress.batch},
        )

    settings = get_settings()
    configure_threads()
    status = run_training_job(
        settings.worker_database_url,
        training_id,
        self.request.id,
        on_progress=on_progress,
        did_not_learn_margin=settings.did_not_learn_margin,
        terms=LeaseTerms.of(settings),
        on_claimed=lambda: dispatch_next(settings),
    )
    dispatch_next(settings)
    return {"training_id": training_id, "status": status}
