"""Fair dispatch: which queued trainings go to the broker next, and how many at a time.

Model. The broker is first in, first out, so whatever is in it decides who trains next: if every
training were sent when submitted, one user posting a few hundred trainings would put them all
ahead of everyone else's. So the broker holds only a short *backlog*: at most `dispatch_ahead`
(a setting, default 8) trainings sent and not yet claimed by a worker. Every other queued
training waits in the trainings table, unsent (`sent_at` NULL), and the dispatcher picks the
next ones by SQL whenever a slot may have opened:
- after a submission (`backend.experiments.service.submit`),
- when a worker claims a training (it leaves the backlog) and when it finishes a delivery
  (`worker.tasks`),
- at the end of every reconciler pass (`backend.delivery.reconcile`), which also repairs a
  dispatch lost to a crash.

Order. The next training is the one whose owner would then have the fewest trainings *in
flight* (running, or sent and waiting in the backlog, which will run next), then the oldest by
(created_at, id). In SQL: each waiting training's rank among its owner's waiting ones (by
created_at, id) plus its owner's count in flight, lowest first. Picking several at once
therefore deals them out round-robin between owners, and a user with one training waits for at
most the backlog and the trainings already running, however many another user has queued.
Trainings without an owner (embedded single-user mode, where every request acts as the local
user, or an owner deleted since) are one more owner; with a single user this is first in, first
out, as before.

Sending. Under a transaction-scoped advisory lock (PostgreSQL; SQLite serialises writers) the
dispatcher counts the backlog, picks the free slots' trainings, and marks each one sent
(`sent_at`, `sends` = 1, a fresh `task_id`) with an UPDATE conditional on it still being queued
and unsent, so two dispatchers never send one training twice; it commits, then sends the
messages. A send the broker refuses is unmarked again (the training waits for the next
dispatch) and raises `BrokerUnavailable`. A crash between commit and send leaves a training
marked but never sent: the reconciler sends it again once its wait is over, as for a message
the broker lost. Re-sends (the reconciler's overdue ones, leases taken back, a run retried) go
straight to the broker through `backend.delivery.send`: they already had their turn.

Open choices, and why:
- A backlog rather than no backlog: a worker finishing a training finds the next message
  already waiting; `dispatch_ahead` should be about twice the worker processes of all workers
  (each of which reserves one message beside the one it runs: `worker_prefetch_multiplier` 1).
  Too small only idles workers between a claim and the next dispatch; too large lets the
  broker's first-in-first-out order decide more of the queue.
- Fairness counts trainings, not their cost: a user's one long training and another's short one
  weigh the same.
- A submission while the backlog is full sends nothing and so never meets the broker: it is
  accepted even if the broker is away, and its trainings are sent when their turn comes. A
  submission that does send, to a broker that refuses, is refused whole (503) as before.
"""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime

from celery import Celery
from sqlalchemy import func, or_, select, update
from sqlalchemy.orm import Session

from backend.db.models import Experiment, Training
from backend.delivery.queue import TaskName
from backend.delivery.send import send_marked

log = logging.getLogger("orrery.dispatch")
DISPATCH_LOCK = 0x6F72_7279  # pg_advisory_xact_lock key of the dispatcher ("orry")


def waiting_for_dispatch():  # type: ignore[no-untyped-def]
    """SQL condition: queued, never sent in this wait, not being cancelled."""
    return (
        (Training.status == "queued")
        & Training.sent_at.is_(None)
        & Training.cancel_requested.is_(False)
    )


def in_backlog():  # type: ignore[no-untyped-def]
    """SQL condition: sent to the broker, not yet claimed by a worker."""
    return (
        (Training.status == "queued")
        & Training.sent_at.is_not(None)
        & Training.cancel_requested.is_(False)
    )


def backlog(db: Session) -> int:
    return db.scalar(select(func.count()).select_from(Training).where(in_backlog())) or 0


def next_trainings(db: Session, limit: int) -> list[int]:
    """The ids of the next `limit` trainings to send, fairest first (see the module docstring)."""
    if limit <= 0:
        return []
    in_flight = (
        select(Experiment.owner_id, func.count().label("n"))
        .join(Training, Training.experiment_id == Experiment.id)
        .where(or_(Training.status == "running", in_backlog()))
        .group_by(Experiment.owner_id)
        .subquery()
    )
    turn = func.row_number().over(
        partition_by=Experiment.owner_id, order_by=(Training.created_at, Training.id)
    )
    waiting = (
        select(
            Training.id,
            Training.created_at,
            (func.coalesce(in_flight.c.n, 0) + turn).label("load"),
        )
        .join(Experiment, Experiment.id == Training.experiment_id)
        .outerjoin(in_flight, in_flight.c.owner_id.is_not_distinct_from(Experiment.owner_id))
        .where(waiting_for_dispatch())
        .subquery()
    )
    return list(
        db.scalars(
            select(waiting.c.id)
            .order_by(waiting.c.load, waiting.c.created_at, waiting.c.id)
            .limit(limit)
        )
    )


def dispatch(db: Session, celery: Celery, ahead: int) -> list[int]:
    """Send the next trainings, fairly, until `ahead` are sent and unclaimed; the ids sent.

    Commits the caller's session. Raises BrokerUnavailable at the first send the broker
    refused, after unmarking the trainings not sent (they wait for the next dispatch)."""
    if db.get_bind().dialect.name == "postgresql":
        db.execute(select(func.pg_advisory_xact_lock(DISPATCH_LOCK)))
    picked = next_trainings(db, ahead - backlog(db))
    now = datetime.now(UTC)
    marked: list[tuple[int, str]] = []
    for training_id in picked:
        task_id = str(uuid.uuid4())
        hit = db.execute(
            update(Training)
            .where(Training.id == training_id, waiting_for_dispatch())
            .values(task_id=task_id, sent_at=now, sends=1)
            .execution_options(synchronize_session=False)
        ).rowcount
        if hit:
            marked.append((training_id, task_id))
    db.commit()

    sent = send_marked(db, celery, TaskName.TRAIN, Training, marked)
    if sent:
        log.info("dispatched trainings %s", sent)
    return sent
