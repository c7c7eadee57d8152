"""Fair dispatch: which queued trainings and design search chunks go to the broker next, and
how many at a time.

Model. The broker is first in, first out, so whatever is in it decides who runs next: if every
training were sent when submitted, one user posting a few hundred trainings (or a few searches
of a thousand chunks each) would put them all ahead of everyone else's. So the broker holds
only a short *backlog*: at most `dispatch_ahead` (a setting, default 8) messages sent and not
yet claimed by a worker, trainings and search chunks alike. Every other queued training or
chunk waits in its table, unsent (`sent_at` NULL), and the dispatcher picks the next ones by SQL
whenever a slot may have opened:
- after a submission (`backend.experiments.service.submit`) and a search's start
  (`backend.searches.sending`),
- when a worker claims a training or a chunk (it leaves the backlog) and when it finishes a
  delivery (`worker.tasks`),
- at the end of every reconciler pass (`backend.delivery.reconcile`), which also repairs a
  dispatch lost to a crash.

Order. The next message is the one whose owner would then have the fewest messages *in flight*
(trainings and chunks running, or sent and waiting in the backlog, which will run next), then
the oldest. A chunk counts for its search's experiment's owner, as a training does, and is as
old as its search's start; a search's chunks go in their order. In SQL: each waiting message's
rank among its owner's waiting ones (by age, then position) plus its owner's count in flight,
lowest first. Picking several at once therefore deals them out round-robin between owners, and
a user with one training waits for at most the backlog and the messages already running,
however many trainings or chunks another user has queued: with chunks of a few seconds and a
backlog of twice the worker processes, about two chunks' time. Messages without an owner
(embedded single-user mode, where every request acts as the local user, or an owner deleted
since) are one more owner; with a single user this is first in, first out, as before.

Sending. Under a transaction-scoped advisory lock (PostgreSQL; SQLite serialises writers) the
dispatcher counts the backlog, picks the free slots' messages, and marks each one sent
(`backend.delivery.send.mark_and_send`: `sent_at`, `sends` = 1, a fresh `task_id`) with an
UPDATE conditional on it still being queued and unsent, so two dispatchers never send one twice;
it commits, then sends the messages. A send the broker refuses is unmarked again (the message
waits for the next dispatch) and raises `BrokerUnavailable`. A crash between commit and send
leaves a message marked but never sent: the reconciler sends it again once its wait is over, as
for a message the broker lost. Re-sends (the reconciler's overdue ones, leases taken back, a
run retried) go straight to the broker: they already had their turn.

Open choices, and why:
- A backlog rather than no backlog: a worker finishing a task finds the next message already
  waiting; `dispatch_ahead` should be about twice the worker processes of all workers (each of
  which reserves one message beside the one it runs: `worker_prefetch_multiplier` 1). Too small
  only idles workers between a claim and the next dispatch; too large lets the broker's
  first-in-first-out order decide more of the queue.
- Fairness counts messages, not their cost: a user's one long training and another's short
  chunk weigh the same. A training waits for at most the backlog of chunks (seconds each), and
  a search for at most the backlog of trainings.
- A submission while the backlog is full sends nothing and so never meets the broker: it is
  accepted even if the broker is away, and its trainings are sent when their turn comes. A
  submission that does send, to a broker that refuses, is refused whole (503) as before.
"""

from __future__ import annotations

import logging

from celery import Celery
from sqlalchemy import func, literal, or_, select, union_all
from sqlalchemy.orm import Session

from backend.db.models import DesignSearchRow, Experiment, SearchChunk, Training
from backend.delivery.queue import TaskName
from backend.delivery.send import Message, mark_and_send

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


def chunk_waiting():  # type: ignore[no-untyped-def]
    """SQL condition (joined with the chunk's search): queued, unsent, its search running."""
    return (
        (SearchChunk.status == "queued")
        & SearchChunk.sent_at.is_(None)
        & (DesignSearchRow.status == "running")
    )


def chunk_in_backlog():  # type: ignore[no-untyped-def]
    """SQL condition (joined with the chunk's search): sent, not yet claimed, search running."""
    return (
        (SearchChunk.status == "queued")
        & SearchChunk.sent_at.is_not(None)
        & (DesignSearchRow.status == "running")
    )


def _chunks():  # type: ignore[no-untyped-def]
    """Chunks with their search and its experiment (whose owner the chunk counts for)."""
    return (
        select()
        .select_from(SearchChunk)
        .join(DesignSearchRow, DesignSearchRow.id == SearchChunk.search_id)
        .join(Experiment, Experiment.id == DesignSearchRow.experiment_id)
    )


def _trainings():  # type: ignore[no-untyped-def]
    return select().select_from(Training).join(Experiment, Experiment.id == Training.experiment_id)


def backlog(db: Session) -> int:
    """Messages (trainings and chunks) sent to the broker and not yet claimed."""
    trainings = select(func.count()).select_from(Training).where(in_backlog())
    chunks = _chunks().add_columns(func.count()).where(chunk_in_backlog())
    return (db.scalar(trainings) or 0) + (db.scalar(chunks) or 0)


def _waiting(query, task: str, row_id, since, position):  # type: ignore[no-untyped-def]
    """The columns a waiting message is ranked by: its task, id, owner, age and position."""
    return query.add_columns(
        literal(task).label("task"),
        row_id.label("id"),
        Experiment.owner_id.label("owner_id"),
        since.label("since"),
        position.label("position"),
    )


def next_messages(db: Session, limit: int) -> list[Message]:
    """The next `limit` messages to send, trainings and search chunks alike, fairest first
    (see the module docstring): (task name, row id)."""
    if limit <= 0:
        return []
    flying = union_all(
        _trainings()
        .add_columns(Experiment.owner_id)
        .where(or_(Training.status == "running", in_backlog())),
        _chunks()
        .add_columns(Experiment.owner_id)
        .where(
            DesignSearchRow.status == "running",
            or_(SearchChunk.status == "running", chunk_in_backlog()),
        ),
    ).subquery()
    in_flight = (
        select(flying.c.owner_id, func.count().label("n")).group_by(flying.c.owner_id).subquery()
    )
    # A search's chunks go in their order, so no more than its first `limit` waiting ones can
    # be picked: only the `limit` positions from its first waiting chunk are ranked, not every
    # waiting chunk of every search (a chunk taken back, queued again behind sent ones, may
    # leave fewer in that window; the next dispatch goes on from there).
    first = (
        select(func.min(SearchChunk.position))
        .where(
            SearchChunk.search_id == DesignSearchRow.id,
            SearchChunk.status == "queued",
            SearchChunk.sent_at.is_(None),
        )
        .scalar_subquery()
    )
    # MATERIALIZED: found once per running search (an index probe each), not once per chunk.
    searches = (
        select(DesignSearchRow.id.label("search_id"), first.label("first"))
        .where(DesignSearchRow.status == "running")
        .cte("first_waiting")
        .prefix_with("MATERIALIZED")
    )
    trainings = _waiting(
        _trainings(), TaskName.TRAIN, Training.id, Training.created_at, literal(0)
    ).where(waiting_for_dispatch())
    chunks = _waiting(
        _chunks().join(searches, searches.c.search_id == SearchChunk.search_id),
        TaskName.SEARCH_CHUNK,
        SearchChunk.id,
        DesignSearchRow.started_at,
        SearchChunk.position,
    ).where(
        chunk_waiting(),
        SearchChunk.position >= searches.c.first,
        SearchChunk.position < searches.c.first + limit,
    )
    candidates = union_all(trainings, chunks).subquery()
    order = (candidates.c.since, candidates.c.position, candidates.c.task, candidates.c.id)
    turn = func.row_number().over(partition_by=candidates.c.owner_id, order_by=order)
    waiting = (
        select(
            candidates.c.task,
            candidates.c.id,
            candidates.c.since,
            candidates.c.position,
            (func.coalesce(in_flight.c.n, 0) + turn).label("load"),
        )
        .outerjoin(in_flight, in_flight.c.owner_id.is_not_distinct_from(candidates.c.owner_id))
        .subquery()
    )
    rows = db.execute(
        select(waiting.c.task, waiting.c.id)
        .order_by(waiting.c.load, waiting.c.since, waiting.c.position, waiting.c.task, waiting.c.id)
        .limit(limit)
    ).all()
    return [(task, row_id) for task, row_id in rows]


def dispatch(db: Session, celery: Celery, ahead: int) -> list[Message]:
    """Send the next trainings and search chunks, fairly, until `ahead` are sent and
    unclaimed; the messages sent.

    Commits the caller's session. Raises BrokerUnavailable at the first send the broker
    refused, after unmarking the messages not sent (they wait for the next dispatch)."""
    if db.get_bind().dialect.name == "postgresql":
        db.execute(select(func.pg_advisory_xact_lock(DISPATCH_LOCK)))
    sent = mark_and_send(db, celery, next_messages(db, ahead - backlog(db)))
    if sent:
        log.info("dispatched %s", sent)
    return sent
