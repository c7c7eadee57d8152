"""`GET /api/v1/health`: is the database reachable, is the broker reachable, is any worker alive.

Worker liveness comes from the heartbeats workers record in the database (the embedded broker
has no Celery remote control to ask). No live worker does not make the service unhealthy:
submissions are stored and wait for one; the dashboard shows a banner instead.

The endpoint answers anyone (load balancers, the dashboard's banner): ok or degraded per
component, and whether any worker is alive. Open choice: what else it says depends on who asks.
- Anonymous callers see `workers.ok` and the lease, not how many workers beat nor when the last
  one did: a load balancer or a status page needs only ok or not, and the size of the worker
  fleet and when it last worked tell an outsider how busy and how large the service is.
- Signed-in users also see `workers.live` and `workers.last_beat_at` (the banner says when the
  last worker was seen).
- Administrators also see what each component is and why it failed (the database's dialect, the
  broker's transport, an exception's text, which names hosts and ports). In single-user mode
  the local user is one.
"""

from __future__ import annotations

from dataclasses import dataclass
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
    live: int | None = Field(
        description="workers whose last heartbeat is younger than the lease (signed-in callers "
        "only; null for others)"
    )
    last_beat_at: datetime | None = Field(
        description="the latest heartbeat of any worker (signed-in callers only)"
    )
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


@dataclass(frozen=True)
class Caller:
    """What the health check may tell this caller (see the module docstring)."""

    signed_in: bool = False
    administrator: bool = False


def health_caller(request: Request, db: DbSession, settings: SettingsDep) -> Caller:
    """Who asks: no credentials, or credentials that do not work, are anonymous (never a 401:
    health answers anyone). In single-user mode every request acts as the local user, an
    administrator."""
    if settings.single_user_mode:
        return Caller(signed_in=True, administrator=True)
    try:
        caller = caller_now(request, db)
    except Exception:  # the database is down: then nobody is known
        db.rollback()
        return Caller()
    if caller is None or not caller.is_active:
        return Caller()
    return Caller(signed_in=True, administrator=caller.is_admin)


@router.get("/health", response_model=Health, responses={503: {"model": Health}})
def health(
    request: Request, db: DbSession, celery: CeleryDep, settings: SettingsDep, response: Response
) -> Health:
    """Report whether the database and the broker answer (503 when either does not) and
    whether any worker beat within the lease; how many and when to signed-in users, what
    answered, or why not, to administrators only."""
    database = check_database(db)
    broker = check_broker(celery)
    workers = check_workers(db, settings) if database.ok else None
    caller = health_caller(request, db, settings) if database.ok else Caller()
    if not caller.administrator:
        database, broker = ComponentHealth(ok=database.ok), ComponentHealth(ok=broker.ok)
    if workers is not None and not caller.signed_in:
        workers = workers.model_copy(update={"live": None, "last_beat_at": None})
    ok = database.ok and broker.ok
    if not ok:
        response.status_code = 503
    return Health(
        status="ok" if ok else "degraded", database=database, broker=broker, workers=workers
    )
