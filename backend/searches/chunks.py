"""Claiming a chunk of a design search, holding its lease, storing its result once.

The same fencing as a training's (`backend.delivery.claims`, `backend.delivery.leases`):
- a chunk is *claimed* by a conditional UPDATE: queued, or running with a heartbeat older than
  the lease, its search running, deliveries left; the claim adds one to `attempts`, the
  delivery's fencing token. A delivery that finds the chunk done, leased to a live delivery or
  its search over does nothing;
- while it evaluates, a `ChunkLease` thread renews the heartbeat;
- the chunk is marked done by an UPDATE conditional on the token (`running` under this
  attempt), after the search's row is locked, and its result is merged into the search's in
  the same transaction: so of two deliveries of one chunk (a worker died and the chunk was
  taken back, then the first one woke up) exactly one is merged, chunks merge one at a time,
  and the one that leaves no chunk open ends the search;
- the reconciler takes back a running chunk whose lease expired (`take_back_expired_chunks`):
  queued again to be sent again, or failed with its search once it had its deliveries.

Open choice: each chunk is merged into the search's result as it ends (worker/search_jobs.py),
rather than every chunk's result kept until a final merge: what is stored stays bounded (the
fronts and one sample per technique, not a sample per chunk, which for chunks smaller than the
sample would be every design), the fronts so far can be read while the search runs, and no
window is left in which every chunk is done but no merge is on its way. The price: chunk merges
of one search queue on its row lock (each a pass over one sample, tens of milliseconds).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from sqlalchemy import Update, exists, func, or_, select, update
from sqlalchemy.orm import Session

from backend.db.models import DesignSearchRow, SearchChunk
from backend.db.times import as_utc
from backend.delivery.claims import Lease
from backend.delivery.leases import LeaseTerms
from backend.searches.records import fail_search


def _now() -> datetime:
    return datetime.now(UTC)


def chunk_lease_expired(terms: LeaseTerms, now: datetime | None = None):  # type: ignore[no-untyped-def]
    cutoff = terms.cutoff(now)
    return or_(SearchChunk.heartbeat_at < cutoff, SearchChunk.heartbeat_at.is_(None))


def chunk_lease_held(chunk_id: int, attempt: int):  # type: ignore[no-untyped-def]
    return (
        (SearchChunk.id == chunk_id)
        & (SearchChunk.attempts == attempt)
        & (SearchChunk.status == "running")
    )


def _search_running():  # type: ignore[no-untyped-def]
    return exists().where(
        DesignSearchRow.id == SearchChunk.search_id, DesignSearchRow.status == "running"
    )


def exhausted_reason(chunk: SearchChunk, terms: LeaseTerms) -> str:
    return (
        f"chunk {chunk.position} (designs {chunk.start} to {chunk.stop - 1}) gave up after "
        f"{chunk.attempts} deliveries (limit {terms.max_attempts}): each time its worker stopped "
        f"sending heartbeats for {terms.lease_seconds:g} s"
    )


def claim_chunk(
    db: Session, chunk_id: int, task_id: str | None, terms: LeaseTerms = LeaseTerms()
) -> int | None:
    """Take the chunk's lease: the attempt number, or None when there is nothing to do."""
    now = _now()
    claimable = or_(
        SearchChunk.status == "queued",
        (SearchChunk.status == "running") & chunk_lease_expired(terms, now),
    )
    attempt = db.execute(
        update(SearchChunk)
        .where(
            SearchChunk.id == chunk_id,
            claimable,
            _search_running(),
            SearchChunk.attempts < terms.max_attempts,
        )
        .values(
            status="running",
            task_id=task_id,
            attempts=SearchChunk.attempts + 1,
            heartbeat_at=now,
            leased_by=f"{socket.gethostname()}:{os.getpid()}",
        )
        .returning(SearchChunk.attempts)
    ).scalar_one_or_none()
    if attempt is None:
        exhausted = db.scalar(
            select(SearchChunk).where(
                SearchChunk.id == chunk_id,
                claimable,
                SearchChunk.attempts >= terms.max_attempts,
            )
        )
        if exhausted is not None:
            fail_search(db, exhausted.search_id, exhausted_reason(exhausted, terms))
    return attempt


class ChunkLease(Lease):
    """The lease of one delivery of a chunk."""

    def __init__(self, database_url: str, chunk_id: int, attempt: int, interval: float) -> None:
        super().__init__(database_url, f"search chunk {chunk_id}: attempt {attempt}", interval)
        self.chunk_id = chunk_id
        self.attempt = attempt

    def renewal(self) -> Update:
        return (
            update(SearchChunk)
            .where(chunk_lease_held(self.chunk_id, self.attempt))
            .values(heartbeat_at=_now())
        )


def lock_search(db: Session, search_id: int) -> DesignSearchRow | None:
    """The search's row, locked until commit (PostgreSQL; SQLite serialises writers)."""
    return db.scalar(
        select(DesignSearchRow)
        .where(DesignSearchRow.id == search_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )


def mark_chunk_done(
    db: Session, chunk_id: int, search_id: int, attempt: int, seconds: float
) -> DesignSearchRow | None:
    """Lock the search's row, then mark the chunk done if this attempt still holds its lease
    and the search still runs: the search, locked until the caller commits (the caller merges
    the chunk's result into it in the same transaction), or None with nothing written."""
    search = lock_search(db, search_id)
    if search is None or search.status != "running":
        return None
    done = db.execute(
        update(SearchChunk)
        .where(chunk_lease_held(chunk_id, attempt))
        .values(status="done", seconds=seconds, heartbeat_at=None, finished_at=_now())
        .execution_options(synchronize_session=False)
    ).rowcount
    return search if done else None


def chunks_left(db: Session, search_id: int) -> int:
    return (
        db.scalar(
            select(func.count())
            .select_from(SearchChunk)
            .where(SearchChunk.search_id == search_id, SearchChunk.status != "done")
        )
        or 0
    )


def take_back_expired_chunks(db: Session, terms: LeaseTerms) -> list[int]:
    """Queue again (unsent, for the next dispatch) every running chunk whose lease expired, or
    fail its search once the chunk had its deliveries; the ids queued again. Caller commits."""
    now = _now()
    expired = list(
        db.scalars(
            select(SearchChunk).where(
                SearchChunk.status == "running", chunk_lease_expired(terms, now)
            )
        )
    )
    requeued = []
    for chunk in expired:
        if chunk.attempts >= terms.max_attempts:
            fail_search(db, chunk.search_id, exhausted_reason(chunk, terms))
            continue
        taken = db.execute(
            update(SearchChunk)
            .where(
                SearchChunk.id == chunk.id,
                SearchChunk.attempts == chunk.attempts,
                SearchChunk.status == "running",
                chunk_lease_expired(terms, now),
            )
            .values(status="queued", heartbeat_at=None, sent_at=None, sends=0)
            .execution_options(synchronize_session=False)
        ).rowcount
        if taken:
            requeued.append(chunk.id)
    return requeued


def overdue_chunks(db: Session, now: datetime, wait: Callable[[int], float]) -> list[int]:
    """Queued chunks of running searches sent `wait(sends)` seconds ago or more and not claimed
    since: their message may be lost (as for trainings: `backend.delivery.reconcile`)."""
    sent = db.execute(
        select(SearchChunk.id, SearchChunk.sent_at, SearchChunk.sends).where(
            SearchChunk.status == "queued", SearchChunk.sent_at.is_not(None), _search_running()
        )
    ).all()
    return [
        chunk_id
        for chunk_id, sent_at, sends in sent
        if now - as_utc(sent_at) >= timedelta(seconds=wait(sends))
    ]
