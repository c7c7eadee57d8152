"""The FastAPI application factory."""

from __future__ import annotations

from fastapi import FastAPI

from backend.api import dashboards, experiments, health, pages, runs
from backend.queue import make_celery
from backend.settings import Settings, get_settings

API_PREFIX = "/api/v1"


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    app = FastAPI(
        title="Orrery",
        version="0.1.0",
        description=(
            "Design-space exploration of DNN training-acceleration techniques "
            "(MERCURY, ADA-GP, SparseTrain) on simulated systolic-array accelerators."
        ),
        docs_url="/api/docs",
        redoc_url="/api/redoc",
        openapi_url="/api/openapi.json",
    )
    app.state.settings = settings
    app.state.celery = make_celery(settings, name="orrery-api")
    for router in (health.router, experiments.router, runs.router):
        app.include_router(router, prefix=API_PREFIX)
    app.include_router(dashboards.router, prefix=API_PREFIX)
    app.include_router(pages.router)
    pages.mount_static(app)
    return app
