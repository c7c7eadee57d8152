"""Starting a design search, and sending its chunks to the workers.

A search's chunks are not all sent at once: the broker is first in, first out, and a search of
10^6 designs in 1,000 chunks would put a thousand messages ahead of every training queued
after it. Chunks are dispatched with trainings, by one fair dispatcher
(`backend.delivery.dispatch`): the broker holds at most `dispatch_ahead` messages sent and not
yet claimed, trainings and chunks alike, and the next one is that of the user with the fewest in
flight. A started search's first chunks go out at once when their turn comes; each chunk
claimed or ended dispatches again (worker/tasks.py), and so does every reconciler pass. Several
workers evaluate one search's chunks at once.

A chunk is marked sent, committed before the message goes out, by the same conditional UPDATE as
a training (`backend.delivery.send.mark_and_send`), so two senders never send one chunk twice; a
send the broker refuses is unmarked again. A chunk marked but never sent (a crash in between)
is re-sent by the reconciler once overdue (`backend.searches.chunks.overdue_chunks`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from celery import Celery
from pydantic import ValidationError
from sqlalchemy.orm import Session

from backend.db.models import DesignSearchRow
from backend.delivery.dispatch import dispatch
from backend.delivery.queue import TaskName
from backend.delivery.send import BrokerUnavailable, mark_and_send
from backend.searches.records import (
    begin_search,
    fail_search,
    readiness,
    spec_of,
    waiting_searches,
)

log = logging.getLogger("orrery.searches")


def resend_chunks(db: Session, celery: Celery, chunk_ids: Sequence[int]) -> list[int]:
    """Send these queued chunks again (their message is overdue); commits."""
    messages = [(TaskName.SEARCH_CHUNK, chunk_id) for chunk_id in chunk_ids]
    sent = [chunk_id for _, chunk_id in mark_and_send(db, celery, messages, resend=True)]
    if sent:
        log.info("sent overdue search chunks again %s", sent)
    return sent


def start_ready_searches(
    db: Session, celery: Celery, ahead: int, experiment_id: int | None = None
) -> list[int]:
    """Start, or fail, every waiting search (of one experiment, or all) whose experiment has no
    training under way (`backend.searches.records`), then dispatch (the started searches' first
    chunks go out in their turn); the ids started. Commits. A broker that refuses is logged:
    the searches are running and the next dispatch sends their chunks."""
    started: list[int] = []
    for search_id in waiting_searches(db, experiment_id):
        search = db.get(DesignSearchRow, search_id)
        if search is None:
            continue
        ready = readiness(db, search.experiment_id)
        if ready.failure is not None:
            fail_search(db, search_id, ready.failure)
        elif ready.trainings is not None:
            try:
                designs = spec_of(search).design_count
            except ValidationError as exc:  # recorded under older, looser bounds
                reasons = "; ".join(error["msg"] for error in exc.errors())
                fail_search(db, search_id, f"the search's spec is no longer valid: {reasons}")
            else:
                if begin_search(db, search_id, ready.trainings, designs):
                    started.append(search_id)
        db.commit()
    if started:
        try:
            dispatch(db, celery, ahead)
        except BrokerUnavailable as exc:
            log.warning("searches %s started, their chunks not sent: %s", started, exc)
    return started
