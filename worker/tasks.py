"""Celery tasks. The API sends them by the names in `backend.delivery.queue.TaskName`.

A training task dispatches the next trainings (`backend.delivery.dispatch`) once it claimed its
own, which frees a place in the broker's backlog, and again when it is over; then it starts the
design searches of its experiment that were waiting for it (`backend.searches.sending`). A
search chunk task dispatches the same way (trainings and chunks share one fair dispatch): once
it claimed its chunk and when it is over. A dispatch or start that
fails (database or broker away) is left to the reconciler and never fails the task.
"""

from __future__ import annotations

import logging
import os
import socket
from typing import Any

from celery import Task
from sqlalchemy import select
from sqlalchemy.exc import OperationalError

from backend.db.models import Training
from backend.db.session import session_scope
from backend.delivery.dispatch import dispatch
from backend.delivery.leases import LeaseTerms
from backend.delivery.queue import TaskName
from backend.searches.sending import start_ready_searches
from backend.settings import Settings, get_settings
from backend.training import Progress
from worker.app import app
from worker.intra_op_threads import configure_threads
from worker.jobs import run_training_job
from worker.search_jobs import run_chunk_job

log = logging.getLogger("orrery.tasks")


def dispatch_next(settings: Settings) -> None:
    """Send the next trainings and search chunks in their turn; a failure is logged, never
    raised."""
    try:
        with session_scope(settings.worker_database_url) as db:
            dispatch(db, app, settings.dispatch_ahead)
    except Exception as exc:  # the reconciler's next pass dispatches instead
        log.warning("dispatch after a delivery failed: %s", exc)


def start_searches_after(settings: Settings, training_id: int) -> None:
    """Start the searches of the training's experiment that can start now; logged, never
    raised."""
    try:
        with session_scope(settings.worker_database_url) as db:
            experiment_id = db.scalar(
                select(Training.experiment_id).where(Training.id == training_id)
            )
            if experiment_id is not None:
                start_ready_searches(db, app, settings.dispatch_ahead, experiment_id)
    except Exception as exc:  # the reconciler's next pass starts them instead
        log.warning("starting searches after training %s failed: %s", training_id, exc)


@app.task(name=TaskName.PING)
def ping() -> dict[str, object]:
    """Answer with who ran the task, so a health check proves a worker is consuming."""
    return {"host": socket.gethostname(), "pid": os.getpid()}


# A database that is briefly away (restart, failover) is worth waiting for.
DATABASE_RETRIES: dict[str, Any] = {
    "autoretry_for": (OperationalError,),
    "retry_backoff": 2,
    "retry_backoff_max": 120,
    "retry_jitter": True,
    "max_retries": 8,
}


@app.task(name=TaskName.TRAIN, bind=True, **DATABASE_RETRIES)
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
    start_searches_after(settings, training_id)
    return {"training_id": training_id, "status": status}


@app.task(name=TaskName.SEARCH_CHUNK, bind=True, **DATABASE_RETRIES)
def search_chunk(self: Task, chunk_id: int) -> dict[str, object]:
    """Evaluate one chunk of a design search and merge it into the search's result."""
    settings = get_settings()
    configure_threads()
    outcome = run_chunk_job(
        settings.worker_database_url,
        chunk_id,
        self.request.id,
        terms=LeaseTerms.of(settings),
        on_claimed=lambda: dispatch_next(settings),
    )
    dispatch_next(settings)
    return {"chunk_id": chunk_id, "status": outcome.status}
