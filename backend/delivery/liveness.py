"""Worker liveness: each worker's main process records a heartbeat in the database.

Beats go to `worker_heartbeats` every third of the lease from a thread of the worker's main
process, started once the worker is ready and stopped (its row removed) when it shuts down
cleanly. A worker that is killed or stopped simply stops beating; the API counts the workers
that beat within one lease (see `backend.delivery.leases`). That table, not Celery's remote
control, is what the API shows as worker liveness: the embedded SQLite broker has none.

The worker connects the beat to its signals with `connect_worker_signals` (worker/app.py);
the API only reads `worker_liveness`.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from celery.signals import worker_ready, worker_shutdown
from sqlalchemy import delete, select, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from backend.db.models import WorkerHeartbeat
from backend.db.session import session_scope
from backend.delivery.leases import LeaseTerms, utcnow
from backend.settings import get_settings

log = logging.getLogger("orrery.liveness")


@dataclass
class Liveness:
    live: int  # workers that beat within the lease
    last_beat_at: datetime | None


def worker_liveness(db: Session, terms: LeaseTerms) -> Liveness:
    beats = list(db.scalars(select(WorkerHeartbeat.beat_at)))
    cutoff = terms.cutoff()
    aware = [b if b.tzinfo else b.replace(tzinfo=UTC) for b in beats]
    return Liveness(live=sum(b >= cutoff for b in aware), last_beat_at=max(aware, default=None))


def beat_worker(db: Session, name: str, hostname: str, pid: int, started_at: datetime) -> None:
    """Record that worker `name` is alive now."""
    now = utcnow()
    updated = db.execute(
        update(WorkerHeartbeat)
        .where(WorkerHeartbeat.name == name)
        .values(beat_at=now, hostname=hostname, pid=pid, started_at=started_at)
    ).rowcount
    if not updated:
        db.add(
            WorkerHeartbeat(
                name=name, hostname=hostname, pid=pid, started_at=started_at, beat_at=now
            )
        )


def forget_worker(db: Session, name: str) -> None:
    """A worker that shuts down cleanly stops counting as live at once."""
    db.execute(delete(WorkerHeartbeat).where(WorkerHeartbeat.name == name))


class WorkerBeat:
    def __init__(self, database_url: str, name: str, interval: float) -> None:
        self.database_url = database_url
        self.name = name
        self.interval = interval
        self.started_at = datetime.now(UTC)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="liveness", daemon=True)

    def beat(self) -> None:
        try:
            with session_scope(self.database_url) as db:
                beat_worker(db, self.name, socket.gethostname(), os.getpid(), self.started_at)
        except SQLAlchemyError as exc:
            log.warning("worker heartbeat not recorded: %s", exc)

    def _run(self) -> None:
        self.beat()
        while not self._stop.wait(self.interval):
            self.beat()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        try:
            with session_scope(self.database_url) as db:
                forget_worker(db, self.name)
        except SQLAlchemyError as exc:
            log.warning("worker heartbeat not removed: %s", exc)


_beat: WorkerBeat | None = None


def _start_beating(sender: Any = None, **_: Any) -> None:
    global _beat
    settings = get_settings()
    name = getattr(sender, "hostname", None) or f"{socket.gethostname()}:{os.getpid()}"
    interval = LeaseTerms.of(settings).heartbeat_interval
    _beat = WorkerBeat(settings.worker_database_url, name, interval)
    _beat.start()


def _stop_beating(**_: Any) -> None:
    if _beat is not None:
        _beat.stop()


def connect_worker_signals() -> None:
    """Beat from the worker's main process once it is ready; stop and forget it at shutdown."""
    worker_ready.connect(_start_beating, weak=False)
    worker_shutdown.connect(_stop_beating, weak=False)
