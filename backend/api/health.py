"""`GET /api/v1/health`: is the database reachable, is the broker reachable."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Response
from pydantic import BaseModel
from sqlalchemy import text

from backend.api.deps import CeleryDep, DbSession

router = APIRouter(tags=["health"])


class ComponentHealth(BaseModel):
    ok: bool
    detail: str


class Health(BaseModel):
    status: Literal["ok", "degraded"]
    database: ComponentHealth
    broker: ComponentHealth


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


@router.get("/health", response_model=Health, responses={503: {"model": Health}})
def health(db: DbSession, celery: CeleryDep, response: Response) -> Health:
    """Report whether the database and the broker answer; 503 when either does not."""
    database = check_database(db)
    broker = check_broker(celery)
    ok = database.ok and broker.ok
    if not ok:
        response.status_code = 503
    return Health(status="ok" if ok else "degraded", database=database, broker=broker)
