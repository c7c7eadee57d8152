"""`GET /api/v1/health`: is the database reachable, is the broker reachable, is any worker alive.

Worker liveness comes from the heartbeats workers record in the database (the embedded broker
has no Celery remote control to ask). No live worker does not make the service unhealthy:
submissions are stored and wait for one; the dashboard shows a banner instead.

The endpoint answers anyone (load balancers, the dashboard's banner): ok or degraded per
component and the workers' liveness. What each component is and why it failed (the database's
dialect, the broker's transport, an exception's text, which names hosts and ports) is shown to
signed-in administrators only (in single-user mode the local user is one).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, Field
from sqlalchemy import text

from backend.api.deps import CeleryDep, DbSession, SettingsDep
from backend.api.security import caller_now
from backend.delivery.leases import LeaseTerms
from backend.delivery.liveness import worker_liveness

router = APIRouter(tags=["health"])


class ComponentHealth(BaseModel):
    ok: bool
    detail: str | None = Field(
        None,
        description="what answered, or why it did not (administrators only; null for others)",
    )


class WorkersHealth(BaseModel):
    ok: bool = Field(description="at least one worker beat within the lease")
    live: int = Field(description="workers whose last heartbeat is younger than the lease")
    last_beat_at: datetime | None = Field(description="the latest heartbeat of any worker")
    lease_seconds: float


class Health(BaseModel):
    status: Literal["ok", "degraded"] = Field(description="database and broker both answer")
    database: ComponentHealth
    broker: ComponentHealth
    workers: WorkersHealth | None = Field(description="None when the database cannot tell")


def check_database(db: DbSession) -> ComponentHealth:
    try:
        db.execute(text("SELECT 1"))
    except Exception as exc:  # any driver error means "not reachable"
        return ComponentHealth(ok=False, detail=f"{type(exc).__name__}: {exc}"[:300])
    return ComponentHealth(ok=True, detail=db.get_bind().dialect.name)


def check_broker(celery: CeleryDep) -> ComponentHealth:
    try:
        with celery.connection_for_write() as connection:
            connection.ensure_connection(max_retries=1, timeout=2)
            transport = connection.transport_cls
    except Exception as exc:
        return ComponentHealth(ok=False, detail=f"{type(exc).__name__}: {exc}"[:300])
    return ComponentHealth(ok=True, detail=str(transport))


def check_workers(db: DbSession, settings: SettingsDep) -> WorkersHealth | None:
    terms = LeaseTerms.of(settings)
    try:
        liveness = worker_liveness(db, terms)
    except Exception:  # the database check above says why
        db.rollback()
        return None
    return WorkersHealth(
        ok=liveness.live > 0,
        live=liveness.live,
        last_beat_at=liveness.last_beat_at,
        lease_seconds=terms.lease_seconds,
    )


def is_administrator(request: Request, db: DbSession, settings: SettingsDep) -> bool:
    """Whether the request's credentials name an active administrator; no credentials, or
    credentials that do not work, are anonymous (never a 401: health answers anyone). In
    single-user mode every request acts as the local user, an administrator."""
    if settings.single_user_mode:
        return True
    try:
        caller = caller_now(request, db)
    except Exception:  # the database is down: then nobody is known to be an administrator
        db.rollback()
        return False
    return caller is not None and caller.is_admin and caller.is_active


@router.get("/health", response_model=Health, responses={503: {"model": Health}})
def health(
    request: Request, db: DbSession, celery: CeleryDep, settings: SettingsDep, response: Response
) -> Health:
    """Report whether the database and the broker answer (503 when either does not) and how
    many workers beat within the lease; what answered, or why not, to administrators only."""
    database = check_database(db)
    broker = check_broker(celery)
    workers = check_workers(db, settings) if database.ok else None
    if not (database.ok and is_administrator(request, db, settings)):
        database, broker = ComponentHealth(ok=database.ok), ComponentHealth(ok=broker.ok)
    ok = database.ok and broker.ok
    if not ok:
        response.status_code = 503
    return Health(
        status="ok" if ok else "degraded", database=database, broker=broker, workers=workers
    )
