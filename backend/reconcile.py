"""The reconciler: take back trainings whose lease expired, re-enqueue trainings left `queued`
in the database with no live task.

A pass first takes back every `running` training whose worker stopped beating for a lease
(`backend.leases`): it is queued again under a new task id, or failed with the reason once it
has had its deliveries. This needs nothing from the broker, so it works on every transport.

A training's message can vanish while its row stays queued: Redis restarted without
persistence, or the API committed the row and then lost the broker before sending. A pass
collects every task id the broker still holds (waiting or unacknowledged) and every task a
worker has reserved or is running, and sends a fresh task for each queued training whose task
is in none of them. Trainings younger than a grace period are skipped: the API may be sending
them at this moment. A duplicate delivery is harmless (the job runner is idempotent); a lost
one is what this repairs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from celery import Celery
from fastapi import FastAPI
from fastapi.concurrency import run_in_threadpool
from sqlalchemy import create_engine, select, text

from backend.db.models import Training
from backend.db.session import session_scope
from backend.experiments.service import BrokerUnavailable, enqueue_trainings
from backend.leases import LeaseTerms, take_back_expired
from backend.queue import QUEUE
from backend.settings import Settings

log = logging.getLogger("orrery.reconcile")
INSPECT_TIMEOUT = 1.0


@dataclass
class Report:
    checked: int = 0
    requeued: list[int] = field(default_factory=list)
    skipped: str | None = None  # why nothing could be decided
    expired: list[int] = field(default_factory=list)  # leases taken back, queued again
    failed: list[int] = field(default_factory=list)  # leases taken back, out of attempts


def _ids_in(payloads: Iterable[bytes | str]) -> set[str]:
    ids = set()
    for payload in payloads:
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            message = json.loads(payload)
            if isinstance(message, list):  # Redis's unacked entries: [message, exchange, key]
                message = message[0]
            task_id = message.get("headers", {}).get("id")
            if task_id:
                ids.add(task_id)
    return ids


def _redis_task_ids(url: str) -> set[str]:
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=5)
    try:
        payloads: list[bytes] = []
        # kombu keeps one list per priority step: "orrery", "orrery\x06\x163", ...
        for key in client.scan_iter(match=f"{QUEUE}*", count=100):
            if client.type(key) == b"list":
                payloads.extend(client.lrange(key, 0, -1))
        payloads.extend(client.hvals("unacked"))
        return _ids_in(payloads)
    finally:
        client.close()


def _sqlalchemy_task_ids(url: str) -> set[str]:
    engine = create_engine(url.removeprefix("sqla+"))
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                text(
                    "SELECT m.payload FROM kombu_message m JOIN kombu_queue q "
                    "ON q.id = m.queue_id WHERE q.name = :queue"
                ),
                {"queue": QUEUE},
            )
            return _ids_in(row[0] for row in rows)
    except Exception as exc:
        if "no such table" in str(exc):  # nothing was ever sent
            return set()
        raise
    finally:
        engine.dispose()


def broker_task_ids(celery: Celery) -> set[str] | None:
    """Task ids the broker holds; None for a transport this module cannot read."""
    url = str(celery.conf.broker_url)
    if url.startswith(("redis://", "rediss://")):
        return _redis_task_ids(url)
    if url.startswith("sqla+"):
        return _sqlalchemy_task_ids(url)
    return None


def worker_task_ids(celery: Celery) -> set[str]:
    """Task ids workers have prefetched or are running (they are no longer in the broker)."""
    inspector = celery.control.inspect(timeout=INSPECT_TIMEOUT)
    ids: set[str] = set()
    for answer in (inspector.reserved(), inspector.active()):
        for tasks in (answer or {}).values():
            ids.update(task["id"] for task in tasks if task.get("id"))
    return ids


def reconcile_once(
    settings: Settings, celery: Celery, grace_seconds: float | None = None
) -> Report:
    grace = settings.reconcile_grace_seconds if grace_seconds is None else grace_seconds
    cutoff = datetime.now(UTC) - timedelta(seconds=grace)
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
            except BrokerUnavailable as exc:  # they stay queued; a later pass sends them
                report.skipped = f"broker unreachable: {exc}"
                return report
        db.commit()
        queued = list(
            db.scalars(
                select(Training)
                .where(
                    Training.status == "queued",
                    Training.cancel_requested.is_(False),
                    Training.created_at <= cutoff,
                )
                .order_by(Training.id)
            )
        )
        report.checked = len(queued)
        if not queued:
            return report
        try:
            live = broker_task_ids(celery)
            if live is None:
                report.skipped = f"cannot list the tasks of broker {celery.conf.broker_url!r}"
                return report
            live |= worker_task_ids(celery)
        except Exception as exc:  # the broker is still away: try again next pass
            report.skipped = f"broker unreachable: {type(exc).__name__}: {exc}"
            return report
        stranded = [t for t in queued if t.task_id not in live]
        if stranded:
            try:
                enqueue_trainings(db, celery, stranded)
            except BrokerUnavailable as exc:
                report.skipped = f"broker unreachable: {exc}"
                return report
            report.requeued = [t.id for t in stranded]
            log.warning("re-enqueued %d stranded trainings: %s", len(stranded), report.requeued)
    return report


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
