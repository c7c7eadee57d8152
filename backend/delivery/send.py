"""Sending trainings to the workers, and recording each send on the training's row.

A training is sent as a Celery task by name (`backend.delivery.queue.TaskName.TRAIN`) under a
fresh task id, committed before the send. After the broker accepted the message the training
records `sent_at` and `sends` (messages sent since it last became queued): the trainings table,
not the broker, is what the reconciler (`backend.delivery.reconcile`) reads to decide that a
message is overdue. The send is recorded *after* it happened, so a crash in between, or a
database that is away at that moment, leaves the row looking unsent and the reconciler sends it
again: the error is always a duplicate message, which a claim turns into a no-op, never a lost
one.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

from celery import Celery
from sqlalchemy import update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from backend.db.models import SearchChunk, Training
from backend.delivery.queue import TaskName

log = logging.getLogger("orrery.send")
SEND_RETRY_POLICY = {
    "max_retries": 2,
    "interval_start": 0,
    "interval_step": 0.2,
    "interval_max": 0.5,
}


class BrokerUnavailable(RuntimeError):
    """The task queue could not be reached; nothing was recorded."""


def enqueue_trainings(
    db: Session, celery: Celery, trainings: Sequence[Training], resend: bool = False
) -> None:
    """Give each training a task id, commit, send the tasks by name, then record the sends.

    `resend` marks a message sent again for the same wait in the queue (the reconciler found
    the last one overdue): its `sends` grows, which lengthens the wait before the next re-send.
    Any other send starts a new wait (`sends` = 1). Raises BrokerUnavailable at the first send
    the broker refused, after recording those that went out.
    """
    for training in trainings:
        training.task_id = str(uuid.uuid4())
    db.commit()
    sent: list[int] = []
    refused: Exception | None = None
    for training in trainings:
        try:
            celery.send_task(
                TaskName.TRAIN,
                args=[training.id],
                task_id=training.task_id,
                retry=True,
                retry_policy=SEND_RETRY_POLICY,
                # Progress and results live in the database. Without this the sender would
                # also subscribe to the result store, which, with Redis down, waits ~19 s.
                ignore_result=True,
            )
        except Exception as exc:  # kombu raises many connection error types
            refused = exc
            break
        sent.append(training.id)
    _record_sends(db, sent, resend)
    if refused is not None:
        raise BrokerUnavailable(f"{type(refused).__name__}: {refused}") from refused


def send_marked(
    db: Session,
    celery: Celery,
    task_name: str,
    table: type[Training] | type[SearchChunk],
    marked: Sequence[tuple[int, str]],
) -> list[int]:
    """Send a task per (row id, task id) already marked sent and committed; the ids sent. At
    the first send the broker refuses, the rows not sent that are still queued lose their mark
    (they wait for the next dispatch), and BrokerUnavailable is raised."""
    sent: list[int] = []
    for target_id, task_id in marked:
        try:
            celery.send_task(
                task_name,
                args=[target_id],
                task_id=task_id,
                retry=True,
                retry_policy=SEND_RETRY_POLICY,
                ignore_result=True,
            )
        except Exception as exc:  # kombu raises many connection error types
            db.execute(
                update(table)
                .where(table.id.in_([i for i, _ in marked if i not in sent]))
                .where(table.status == "queued")
                .values(sent_at=None, sends=0)
                .execution_options(synchronize_session=False)
            )
            db.commit()
            raise BrokerUnavailable(f"{type(exc).__name__}: {exc}") from exc
        sent.append(target_id)
    return sent


def _record_sends(db: Session, training_ids: list[int], resend: bool) -> None:
    if not training_ids:
        return
    try:
        db.execute(
            update(Training)
            .where(Training.id.in_(training_ids))
            .values(sent_at=datetime.now(UTC), sends=Training.sends + 1 if resend else 1)
        )
        db.commit()
    except SQLAlchemyError as exc:  # sent all the same; the reconciler will send them again
        db.rollback()
        log.warning("sends of trainings %s not recorded: %s", training_ids, exc)
