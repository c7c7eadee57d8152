"""Worker liveness: each worker's main process records a heartbeat in the database.

Beats go to `worker_heartbeats` every third of the lease from a thread of the worker's main
process, started once the worker is ready and stopped (its row removed) when it shuts down
cleanly. A worker that is killed or stopped simply stops beating; the API counts the workers
that beat within one lease (see `backend.leases`).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from datetime import UTC, datetime
from typing import Any

from celery.signals import worker_ready, worker_shutdown
from sqlalchemy.exc import SQLAlchemyError

from backend.db.session import session_scope
from backend.leases import LeaseTerms, beat_worker, forget_worker
from backend.settings import get_settings

log = logging.getLogger("orrery.liveness")


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


@worker_ready.connect
def _start_beating(sender: Any = None, **_: Any) -> None:
    global _beat
    settings = get_settings()
    name = getattr(sender, "hostname", None) or f"{socket.gethostname()}:{os.getpid()}"
    interval = LeaseTerms.of(settings).heartbeat_interval
    _beat = WorkerBeat(settings.worker_database_url, name, interval)
    _beat.start()


@worker_shutdown.connect
def _stop_beating(**_: Any) -> None:
    if _beat is not None:
        _beat.stop()
