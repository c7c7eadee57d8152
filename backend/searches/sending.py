"""Starting a design search, and sending its chunks to the workers a bounded window at a time.

A search's chunks are not all sent at once: the broker is first in, first out, and a search of
10^6 designs in chunks of 1,000 would put a thousand messages ahead of every training queued
after it. At most `ahead` chunks of a search (the `dispatch_ahead` setting) are sent and not
yet done; each chunk delivery that ends sends the next ones (worker/search_jobs.py), and so
does every reconciler pass (a window lost to a crash is repaired within one pass). Several
workers evaluate one search's window at once.

As for trainings (`backend.delivery.dispatch`), a chunk is marked sent by an UPDATE conditional
on it being unsent, committed before the message goes out, so two senders never send one chunk
twice; a send the broker refuses is unmarked again. A chunk marked but never sent (a crash in
between) is re-sent by the reconciler once overdue (`backend.searches.chunks.overdue_chunks`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

from celery import Celery
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from backend.db.models import DesignSearchRow, SearchChunk
from backend.delivery.queue import TaskName
from backend.delivery.send import BrokerUnavailable, send_marked
from backend.searches.records import (
    begin_search,
    fail_search,
    readiness,
    spec_of,
    waiting_searches,
)

log = logging.getLogger("orrery.searches")


def _in_flight(search_id: int):  # type: ignore[no-untyped-def]
    return (
        select(func.count())
        .select_from(SearchChunk)
        .where(
            SearchChunk.search_id == search_id,
            (SearchChunk.status == "running")
            | ((SearchChunk.status == "queued") & SearchChunk.sent_at.is_not(None)),
        )
        .scalar_subquery()
    )


def send_chunks(db: Session, celery: Celery, search_id: int, ahead: int) -> list[int]:
    """Send the search's next unsent chunks until `ahead` are sent and not done; the chunk ids
    sent. Commits the caller's session."""
    room = ahead - (db.scalar(select(_in_flight(search_id))) or 0)
    picked = (
        list(
            db.scalars(
                select(SearchChunk.id)
                .join(DesignSearchRow, DesignSearchRow.id == SearchChunk.search_id)
                .where(
                    SearchChunk.search_id == search_id,
                    SearchChunk.status == "queued",
                    SearchChunk.sent_at.is_(None),
                    DesignSearchRow.status == "running",
                )
                .order_by(SearchChunk.position)
                .limit(room)
            )
        )
        if room > 0
        else []
    )
    return _mark_and_send(db, celery, picked, resend=False)


def resend_chunks(db: Session, celery: Celery, chunk_ids: Sequence[int]) -> list[int]:
    """Send these queued chunks again (their message is overdue); commits."""
    return _mark_and_send(db, celery, chunk_ids, resend=True)


def _mark_and_send(
    db: Session, celery: Celery, chunk_ids: Sequence[int], resend: bool
) -> list[int]:
    now = datetime.now(UTC)
    marked: list[tuple[int, str]] = []
    for chunk_id in chunk_ids:
        task_id = str(uuid.uuid4())
        unsent = SearchChunk.sent_at.is_not(None) if resend else SearchChunk.sent_at.is_(None)
        hit = db.execute(
            update(SearchChunk)
            .where(SearchChunk.id == chunk_id, SearchChunk.status == "queued", unsent)
            .values(task_id=task_id, sent_at=now, sends=SearchChunk.sends + 1 if resend else 1)
            .execution_options(synchronize_session=False)
        ).rowcount
        if hit:
            marked.append((chunk_id, task_id))
    db.commit()

    sent = send_marked(db, celery, TaskName.SEARCH_CHUNK, SearchChunk, marked)
    if sent:
        log.info("sent search chunks %s", sent)
    return sent


def running_searches(db: Session) -> list[int]:
    return list(db.scalars(select(DesignSearchRow.id).where(DesignSearchRow.status == "running")))


def start_ready_searches(
    db: Session, celery: Celery, ahead: int, experiment_id: int | None = None
) -> list[int]:
    """Start, or fail, every waiting search (of one experiment, or all) whose experiment has no
    training under way (`backend.searches.records`), and send the first chunks of those
    started; the ids started. Commits. A broker that refuses the chunks is logged: the searches
    are running and the reconciler's next pass sends their window."""
    started: list[int] = []
    for search_id in waiting_searches(db, experiment_id):
        search = db.get(DesignSearchRow, search_id)
        if search is None:
            continue
        ready = readiness(db, search.experiment_id)
        if ready.failure is not None:
            fail_search(db, search_id, ready.failure)
        elif ready.trainings is not None and begin_search(
            db, search_id, ready.trainings, spec_of(search).design_count
        ):
            started.append(search_id)
        db.commit()
    for search_id in started:
        try:
            send_chunks(db, celery, search_id, ahead)
        except BrokerUnavailable as exc:
            log.warning("search %s started, its chunks not sent: %s", search_id, exc)
    return started
