"""Sending trainings and design search chunks to the workers, and recording each send on the
row.

`mark_and_send` is the one way a first send (fair dispatch, `backend.delivery.dispatch`) and a
chunk's re-send go out: the row is marked sent before the message, under a condition that only
one sender can meet. `enqueue_trainings` below re-sends trainings that already had their turn,
and records the send after it.

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


# What each task is sent for: the table whose row it works on (both have `status`, `task_id`,
# `sent_at` and `sends`, and are sent while `queued`).
TASK_TABLES: dict[str, type[Training] | type[SearchChunk]] = {
    TaskName.TRAIN: Training,
    TaskName.SEARCH_CHUNK: SearchChunk,
}
Message = tuple[str, int]  # (task name, row id)


def _sendable(table: type[Training] | type[SearchChunk], resend: bool):  # type: ignore[no-untyped-def]
    """SQL condition: queued and unsent (first send) or sent (re-send), not being cancelled."""
    condition = (table.status == "queued") & (
        table.sent_at.is_not(None) if resend else table.sent_at.is_(None)
    )
    if table is Training:
        condition &= Training.cancel_requested.is_(False)
    return condition


def mark_and_send(
    db: Session, celery: Celery, messages: Sequence[Message], resend: bool = False
) -> list[Message]:
    """Mark each message's row sent (a fresh task id, `sent_at`, `sends` 1, or one more for a
    re-send) by an UPDATE conditional on it still being queued and unsent (or, re-sending,
    sent), commit, then send the messages in order; the messages sent.

    The mark is committed before the send, so two senders never send one row twice; at the
    first send the broker refuses, the rows not yet sent lose their mark (they wait for the
    next dispatch) and BrokerUnavailable is raised."""
    now = datetime.now(UTC)
    marked: list[tuple[str, int, str]] = []
    for task, row_id in messages:
        table = TASK_TABLES[task]
        task_id = str(uuid.uuid4())
        hit = db.execute(
            update(table)
            .where(table.id == row_id, _sendable(table, resend))
            .values(task_id=task_id, sent_at=now, sends=table.sends + 1 if resend else 1)
            .execution_options(synchronize_session=False)
        ).rowcount
        if hit:
            marked.append((task, row_id, task_id))
    db.commit()

    sent: list[Message] = []
    for task, row_id, task_id in marked:
        try:
            celery.send_task(
                task,
                args=[row_id],
                task_id=task_id,
                retry=True,
                retry_policy=SEND_RETRY_POLICY,
                ignore_result=True,
            )
        except Exception as exc:  # kombu raises many connection error types
            _unmark(db, [(t, i) for t, i, _ in marked if (t, i) not in sent])
            raise BrokerUnavailable(f"{type(exc).__name__}: {exc}") from exc
        sent.append((task, row_id))
    return sent


def _unmark(db: Session, messages: Sequence[Message]) -> None:
    for task, table in TASK_TABLES.items():
        ids = [row_id for t, row_id in messages if t == task]
        if ids:
            db.execute(
                update(table)
                .where(table.id.in_(ids), table.status == "queued")
                .values(sent_at=None, sends=0)
                .execution_options(synchronize_session=False)
            )
    db.commit()


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
