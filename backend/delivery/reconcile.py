"""The reconciler: take back trainings whose lease expired, send again queued trainings whose
message is overdue; the same for the chunks of design searches, and start the searches whose
trainings have all ended (`_reconcile_searches`). It reads the database only, never the
broker's storage, so it works the same on every transport (Redis, the embedded SQLite broker,
any other kombu transport).

A pass first takes back every `running` training whose worker stopped beating for a lease
(`backend.delivery.leases`): it is queued and sent again under a new task id, or failed with
the reason once it has had its deliveries.

Then it looks at the queued trainings that were sent. Every send is recorded on the training
(`backend.delivery.send`, `backend.delivery.dispatch`: `sent_at`, and `sends` since it last
became queued). A queued training whose last send is older than its wait is sent again, where
the wait is
`reconcile_grace_seconds` (default 300 s) × 2^(sends - 1), at most `reconcile_grace_max_seconds`
(default 3600 s). That is how a lost message is repaired: Redis restarted without persistence,
the broker's storage was wiped, a dispatcher crashed between marking a training sent and
sending it.

A training already done is sent again when runs are added to it (a retried run, the runs of a
search's front design: `worker.jobs` simulates its open runs on the stored workload). Its
message can be lost the same way, so a done training with open runs is looked at the same way:
sent again once its last send is overdue (storing a run's result is conditional on the run
being open, so a duplicate stores nothing twice).

A training never sent (`sent_at` NULL) is waiting for its turn, not lost: the pass ends with a
fair dispatch (`backend.delivery.dispatch`), which sends the next ones if the broker's backlog
has room; so a dispatch that never happened (the broker was away, the process died) is repaired
within one pass.

Open choices, and why:
- The reconciler cannot tell a lost message from one that is merely slow, e.g. waiting behind
  hours of other trainings: it does not look. A slow message is sent again all the same, and the
  training then has two (or more) messages; the first one a worker takes claims the training,
  any later one finds it running under a live lease, or finished, and does nothing
  (`backend.delivery.claims`). Duplicates cost a worker a few milliseconds each; a lost message
  costs a training that never runs. The interval trades how soon a lost message is repaired
  against how many duplicates a long queue accumulates.
- Back-off bounds those duplicates: a training that waits in the queue for a time T gets about
  log2(T / interval) extra messages until the cap, then one per cap. A new wait (submission,
  retry, a lease taken back) starts again from one send.
- A send is recorded only after the broker accepted it, so the row errs towards looking unsent:
  a crash between send and record costs a duplicate, never a loss.
- A queued training with a cancellation requested is not sent: cancelling ends it in the
  database (`backend.experiments.service`).
- Clocks: `sent_at` is the sender's UTC time, compared with the reconciler's (NTP, as leases).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from celery import Celery
from fastapi import FastAPI
from fastapi.concurrency import run_in_threadpool
from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session

from backend.db.models import Run, Training
from backend.db.session import session_scope
from backend.delivery.dispatch import dispatch
from backend.delivery.leases import LeaseTerms, take_back_expired
from backend.delivery.send import BrokerUnavailable, Message, enqueue_trainings
from backend.experiments.service import TERMINAL
from backend.searches.chunks import overdue_chunks, take_back_expired_chunks
from backend.searches.sending import resend_chunks, start_ready_searches
from backend.settings import Settings

log = logging.getLogger("orrery.reconcile")
MAX_DOUBLINGS = 30  # beyond any cap: keeps 2 ** n a small number


@dataclass
class Report:
    checked: int = 0  # queued trainings, and done ones with open runs, looked at
    requeued: list[int] = field(default_factory=list)  # overdue, sent again
    skipped: str | None = None  # why nothing could be decided
    expired: list[int] = field(default_factory=list)  # leases taken back, queued again
    failed: list[int] = field(default_factory=list)  # leases taken back, out of attempts
    # trainings and search chunks sent in their turn: (task name, id)
    dispatched: list[Message] = field(default_factory=list)
    chunks_expired: list[int] = field(default_factory=list)  # search chunks taken back
    chunks_resent: list[int] = field(default_factory=list)  # overdue search chunks sent again
    searches_started: list[int] = field(default_factory=list)  # waiting searches started


def resend_wait(sends: int, grace: float, cap: float) -> float:
    """Seconds a queued training's last message is given before it is sent again."""
    return min(grace * 2 ** min(max(sends - 1, 0), MAX_DOUBLINGS), max(cap, grace))


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)  # SQLite drops the zone


def reconcile_once(
    settings: Settings, celery: Celery, grace_seconds: float | None = None
) -> Report:
    """One pass; `grace_seconds` overrides `reconcile_grace_seconds` (the first wait)."""
    grace = settings.reconcile_grace_seconds if grace_seconds is None else grace_seconds
    report = Report()
    with session_scope(settings.effective_database_url) as db:
        taken_back = take_back_expired(db, LeaseTerms.of(settings))
        report.failed = taken_back.failed
        report.expired = [t.id for t in taken_back.requeued]
        if taken_back.failed:
            log.warning("failed trainings out of attempts: %s", taken_back.failed)
        if taken_back.requeued:
            log.warning("took back expired leases of trainings %s", report.expired)
            try:
                enqueue_trainings(db, celery, taken_back.requeued)
            except BrokerUnavailable as exc:  # queued, unsent: sent once their wait is over
                report.skipped = f"broker unreachable: {exc}"
                return report
        db.commit()
        now = datetime.now(UTC)
        open_runs = select(Run.training_id).where(Run.status.not_in(TERMINAL))
        waiting = db.execute(
            select(Training.id, Training.status, Training.sent_at, Training.sends)
            .where(
                Training.cancel_requested.is_(False),
                or_(
                    Training.status == "queued",
                    and_(Training.status == "done", Training.id.in_(open_runs)),
                ),
            )
            .order_by(Training.id)
        ).all()
        report.checked = len(waiting)
        cap = settings.reconcile_grace_max_seconds
        overdue = [
            training_id
            for training_id, status, sent_at, sends in waiting
            # a queued training never sent waits for the fair dispatch below; a done one has
            # no turn to wait for
            if (sent_at is None and status == "done")
            or (
                sent_at is not None
                and now - _aware(sent_at) >= timedelta(seconds=resend_wait(sends, grace, cap))
            )
        ]
        if overdue:
            trainings = list(
                db.scalars(select(Training).where(Training.id.in_(overdue)).order_by(Training.id))
            )
            try:
                enqueue_trainings(db, celery, trainings, resend=True)
            except BrokerUnavailable as exc:  # the broker is still away: the next pass tries
                report.skipped = f"broker unreachable: {exc}"
                return report
            report.requeued = [t.id for t in trainings]
            log.warning("sent %d overdue trainings again: %s", len(overdue), overdue)
        try:
            _reconcile_searches(db, celery, settings, grace, report)
            report.dispatched = dispatch(db, celery, settings.dispatch_ahead)
        except BrokerUnavailable as exc:
            report.skipped = f"broker unreachable: {exc}"
    return report


def _reconcile_searches(
    db: Session, celery: Celery, settings: Settings, grace: float, report: Report
) -> None:
    """The same for design searches (backend/searches/): take back expired chunk leases, send
    overdue chunks again, start the waiting searches whose trainings have all ended. Their
    chunks are sent by the dispatch that follows, in their turn."""
    report.chunks_expired = take_back_expired_chunks(db, LeaseTerms.of(settings))
    db.commit()
    if report.chunks_expired:
        log.warning("took back expired leases of search chunks %s", report.chunks_expired)
    cap = settings.reconcile_grace_max_seconds
    overdue = overdue_chunks(db, datetime.now(UTC), lambda sends: resend_wait(sends, grace, cap))
    report.chunks_resent = resend_chunks(db, celery, overdue)
    report.searches_started = start_ready_searches(db, celery, settings.dispatch_ahead)


async def reconcile_forever(settings: Settings, celery: Celery, interval: float) -> None:
    while True:
        await asyncio.sleep(interval)
        try:
            report = await run_in_threadpool(reconcile_once, settings, celery)
        except Exception:  # the database may be restarting; the next pass will tell
            log.exception("reconciler pass failed")
            continue
        if report.skipped:
            log.warning("reconciler: %s", report.skipped)


@asynccontextmanager
async def reconciler_lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Run the reconciler in the API process every `reconcile_interval` seconds."""
    settings: Settings = app.state.settings
    task: asyncio.Task[Any] | None = None
    if settings.reconcile_interval > 0:
        task = asyncio.create_task(
            reconcile_forever(settings, app.state.celery, settings.reconcile_interval)
        )
    try:
        yield
    finally:
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
