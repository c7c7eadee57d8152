"""The `orrery` command line: serve, worker, migrate (and, in their modules, the science)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Annotated

import typer
from rich.console import Console

from backend.db import migrate as migrations
from backend.queue import QUEUE
from backend.settings import get_settings

app = typer.Typer(
    help="Orrery: which training-acceleration technique, on which accelerator, is worth it?",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
console = Console()


@app.command()
def migrate() -> None:
    """Bring the database schema up to date (alembic upgrade head)."""
    settings = get_settings()
    migrations.upgrade(settings.effective_database_url)
    console.print(f"[green]database up to date[/]: {_redact(settings.effective_database_url)}")


def worker_command(concurrency: int, loglevel: str = "INFO") -> list[str]:
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "worker.app",
        "worker",
        f"--loglevel={loglevel}",
        f"--concurrency={concurrency}",
        "-Q",
        QUEUE,
    ]


@app.command()
def worker(
    concurrency: Annotated[
        int | None, typer.Option(help="training processes (default: ORRERY_WORKER_CONCURRENCY)")
    ] = None,
    loglevel: Annotated[str, typer.Option(help="Celery log level")] = "INFO",
) -> None:
    """Run a Celery worker that trains and simulates queued runs."""
    settings = get_settings()
    command = worker_command(concurrency or settings.worker_concurrency, loglevel)
    os.execv(command[0], command)


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="address to bind")] = None,
    port: Annotated[int | None, typer.Option(help="port to bind")] = None,
    with_worker: Annotated[bool, typer.Option(help="also start a worker process")] = True,
) -> None:
    """Migrate, then run the API and a worker (embedded defaults need no external server)."""
    import uvicorn

    settings = get_settings()
    host = host or settings.api_host
    port = port or settings.api_port
    migrations.upgrade(settings.effective_database_url)
    worker_process = None
    if with_worker:
        worker_process = subprocess.Popen(worker_command(settings.worker_concurrency, "WARNING"))
    mode = "embedded (SQLite, no external server)" if settings.is_embedded else "external services"
    console.print(f"[bold]Orrery[/] on {mode}; data in {settings.data_dir.resolve()}")
    console.print(f"Dashboard and API: [link]http://{host}:{port}/[/]  (docs: /api/docs)")
    try:
        uvicorn.run("backend.api.app:create_app", factory=True, host=host, port=port)
    finally:
        if worker_process is not None:
            worker_process.terminate()
            worker_process.wait(timeout=30)


def _redact(url: str) -> str:
    """Hide a password in a database URL before printing it."""
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


if __name__ == "__main__":
    app()
