"""The FastAPI application factory."""

from __future__ import annotations

import importlib
import re
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request, status
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.gzip import GZipMiddleware
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError, DBAPIError, OperationalError

from backend.api import api_docs
from backend.api.cached_reads import CachedReads, declared_reads
from backend.api.limits import BodySizeLimit, ConcurrencyLimit
from backend.api.marker_reader import marker_reader
from backend.api.page_headers import PageHeaders
from backend.api.read_cache import ReadCache
from backend.api.refusals import REFUSALS, domain_refusal
from backend.api.routes import (
    accounts,
    catalog,
    dashboards,
    experiments,
    health,
    pages,
    papers,
    preferences,
    runs,
    searches,
    teams,
)
from backend.api.unicode_input import RefuseLoneSurrogates
from backend.auth.redact import redact_access_log, validation_error_handler
from backend.delivery.queue import make_celery
from backend.delivery.reconcile import reconciler_lifespan
from backend.settings import Settings, get_settings

API_PREFIX = "/api/v1"
API_ROUTERS = (
    health.router,
    accounts.router,
    teams.router,
    teams.invitations_router,
    experiments.router,
    runs.router,
    searches.router,
    papers.router,
    preferences.router,
    catalog.router,
    dashboards.router,
)
# The read-only endpoints whose answers are cached, each declared where it is defined.
CACHED_READS = declared_reads(API_ROUTERS, API_PREFIX)
EVENT_STREAMS = re.compile(rf"{API_PREFIX}/experiments/[^/]+/events")
# Reads whose work grows with the runs they cover (every run matching the filters, or a
# dashboard's runs with their layers and epochs) or with a search's designs (its sample,
# megabytes): a few at a time (ConcurrencyLimit).
HEAVY_READS = re.compile(
    rf"{API_PREFIX}/(runs/(groups|summary|pareto|export)|dashboards/[^/]+/data|chart-data"
    r"|shared/[^/]+|searches/[^/]+/sample)$"
)
GZIP_LEVEL = 1  # zlib's fastest: JSON of numbers shrinks 2-3x, at a fifth of level 6's CPU


# Imported by the first seed-group interval (scipy.stats: about 2 s of CPU): loaded while the
# process starts, in the background, rather than by the first request that needs it.
LOADED_AT_START = ("scipy.stats",)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    for module in LOADED_AT_START:
        threading.Thread(target=importlib.import_module, args=(module,), daemon=True).start()
    async with reconciler_lifespan(app), marker_reader(app):
        yield


async def database_error(request: Request, exc: Exception) -> JSONResponse:
    """Database errors said plainly, not a bare 500: a lost connection is the server's trouble
    (503); a value the database cannot store, such as a NUL byte in text, is the request's (422).
    Either way the request's transaction was rolled back."""
    if isinstance(exc, OperationalError) or (
        isinstance(exc, DBAPIError) and exc.connection_invalidated
    ):
        return JSONResponse(
            {"detail": "the database is unreachable; nothing was changed, try again shortly"},
            status_code=status.HTTP_503_SERVICE_UNAVAILABLE,
        )
    if isinstance(exc, DataError):
        reason = str(exc.orig).splitlines()[0] if exc.orig else "invalid value"
        return JSONResponse(
            {
                "detail": [
                    {
                        "loc": ["body"],
                        "msg": f"a value cannot be stored: {reason}; nothing was changed",
                        "type": "value_error",
                    }
                ]
            },
            status_code=status.HTTP_422_UNPROCESSABLE_CONTENT,
        )
    raise exc


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    app = FastAPI(
        title="Orrery",
        version="0.1.0",
        description=(
            "Design-space exploration of DNN training-acceleration techniques "
            "(MERCURY, ADA-GP, SparseTrain) on simulated systolic-array accelerators."
        ),
        docs_url=None,  # served offline by api_docs.router
        redoc_url=None,
        openapi_url="/api/openapi.json",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.celery = make_celery(settings, name="orrery-api", sender=True)
    app.state.read_cache = ReadCache(
        settings.read_cache_entries, settings.read_cache_megabytes * 2**20
    )
    # The last added runs first: cached answers need no slot, and a slow upload holds none.
    # Compression runs inside the slot and before the cache, which keeps compressed answers.
    app.add_middleware(GZipMiddleware, minimum_size=1024, compresslevel=GZIP_LEVEL)
    app.add_middleware(
        ConcurrencyLimit,
        limit=settings.api_concurrency,
        exempt=EVENT_STREAMS,
        heavy=HEAVY_READS,
        heavy_limit=settings.api_heavy_concurrency,
    )
    app.add_middleware(RefuseLoneSurrogates)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(CachedReads, reads=CACHED_READS)
    app.add_middleware(PageHeaders)
    app.add_exception_handler(RequestValidationError, validation_error_handler)
    redact_access_log()
    app.add_exception_handler(DBAPIError, database_error)
    for refusal in REFUSALS:
        app.add_exception_handler(refusal, domain_refusal)
    for router in API_ROUTERS:
        app.include_router(router, prefix=API_PREFIX)
    app.include_router(pages.router)
    app.include_router(api_docs.router)
    pages.mount_static(app)
    return app
