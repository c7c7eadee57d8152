"""Request-scoped dependencies: settings and a database session.

Those doing no I/O are `async def`: FastAPI calls them on the event loop instead of handing
each to a worker thread.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from celery import Celery
from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool
from sqlalchemy.orm import Session

from backend.db.session import session_factory
from backend.settings import Settings


async def get_settings_dep(request: Request) -> Settings:
    return request.app.state.settings


async def get_celery(request: Request) -> Celery:
    """The API's sender: same broker and serializer as the worker, no task code."""
    return request.app.state.celery


async def get_db(request: Request) -> AsyncIterator[Session]:
    # Opening a session does no I/O (it connects on first use); closing one may (it rolls back
    # and returns its connection), so that runs on a worker thread.
    session = session_factory(request.app.state.settings.effective_database_url)()
    try:
        yield session
    finally:
        await run_in_threadpool(session.close)


SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
DbSession = Annotated[Session, Depends(get_db)]
CeleryDep = Annotated[Celery, Depends(get_celery)]
