"""The commands that start Orrery's processes on this machine: migrate, worker, serve, reconcile.

Model: each reads the service settings (backend/settings.py) and acts on this machine: `migrate`
upgrades the schema once; `worker` replaces itself with a Celery worker; `serve` migrates, then
runs the API under uvicorn beside a worker it restarts whenever it dies; `reconcile` makes one
reconciler pass, or one per interval. Open choice: `worker` execs Celery (the process becomes
the worker) while `serve` keeps its worker as a child; `serve --workers N` on SQLite is allowed
with a warning (README: several API processes suit PostgreSQL only).
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Annotated

import typer

from backend.cli.output import console
from backend.db import migrate as migrations
from backend.delivery.queue import QUEUE, TaskName, declare_queue
from backend.delivery.supervisor import Supervisor
from backend.settings import get_settings


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


def worker(
    concurrency: Annotated[
        int | None, typer.Option(help="training processes (default: ORRERY_WORKER_CONCURRENCY)")
    ] = None,
    loglevel: Annotated[str, typer.Option(help="Celery log level")] = "INFO",
) -> None:
    """Run a Celery worker that trains and simulates queued runs."""
    settings = get_settings()
    declare_queue(settings.effective_broker_url)
    command = worker_command(concurrency or settings.worker_concurrency, loglevel)
    os.execv(command[0], command)


def serve(
    host: Annotated[str | None, typer.Option(help="address to bind")] = None,
    port: Annotated[int | None, typer.Option(help="port to bind")] = None,
    with_worker: Annotated[bool, typer.Option(help="also start a worker process")] = True,
    workers: Annotated[
        int,
        typer.Option(
            min=1, max=64, help="API processes: about one per core on PostgreSQL; 1 on SQLite"
        ),
    ] = 1,
) -> None:
    """Migrate, then run the API and a worker (embedded defaults need no external server)."""
    import uvicorn

    settings = get_settings()
    host = host or settings.api_host
    port = port or settings.api_port
    migrations.upgrade(settings.effective_database_url)
    declare_queue(settings.effective_broker_url)
    supervisor = None
    if with_worker:  # restarted whenever it dies
        supervisor = Supervisor(worker_command(settings.worker_concurrency, "WARNING"))
        supervisor.start()
    if workers > 1 and settings.effective_database_url.startswith("sqlite"):
        # SQLite has one writer at a time for the whole file: processes would queue on its lock.
        console.print(
            f"[yellow]{workers} API processes on SQLite: writes wait on the file's lock and may "
            "fail with 'database is locked'; use PostgreSQL for several processes[/]"
        )
    mode = "embedded (SQLite, no external server)" if settings.is_embedded else "external services"
    if settings.single_user_mode:
        mode += "; SINGLE-USER: no login, every request acts as the local user"
    console.print(f"[bold]Orrery[/] on {mode}; data in {settings.data_dir.resolve()}")
    console.print(f"Dashboard and API: [link]http://{host}:{port}/[/]  (docs: /api/docs)")
    # uvicorn shuts down gracefully on SIGTERM, then re-raises the signal to the handler that was
    # installed before it: make that handler an exit, so the worker below is stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        # The app reads X-Forwarded-For itself, from the trusted_proxies setting only
        # (api/client_address.py): uvicorn's own handling would trust any loopback peer.
        uvicorn.run(
            "backend.api.app:create_app",
            factory=True,
            host=host,
            port=port,
            workers=workers,
            proxy_headers=False,
        )
    finally:
        if supervisor is not None:
            supervisor.stop()


def reconcile(
    loop: Annotated[bool, typer.Option(help="keep running, one pass per --interval")] = False,
    interval: Annotated[float, typer.Option(help="seconds between passes with --loop")] = 60.0,
    grace: Annotated[
        float | None,
        typer.Option(
            help="seconds after its last send before a queued training is sent again (doubling "
            "with each re-send; default: the reconcile_grace_seconds setting)"
        ),
    ] = None,
) -> None:
    """Take back trainings whose lease expired; send again queued trainings whose last send is
    overdue (the trainings table says which, not the broker)."""
    import time

    from backend.delivery.queue import make_celery
    from backend.delivery.reconcile import reconcile_once

    settings = get_settings()
    celery = make_celery(settings, name="orrery-reconcile")
    while True:
        report = reconcile_once(settings, celery, grace)
        if report.expired or report.failed:
            console.print(
                f"expired leases: {len(report.expired)} trainings queued again "
                f"{report.expired or ''}, {len(report.failed)} failed {report.failed or ''}"
            )
        if report.skipped:
            console.print(
                f"[yellow]{report.checked} trainings awaiting a worker, undecided:[/] "
                f"{report.skipped}"
            )
        else:
            console.print(
                f"{report.checked} trainings awaiting a worker checked, "
                f"{len(report.requeued)} re-enqueued {report.requeued or ''}".rstrip()
            )
        if report.dispatched:
            trainings = [i for task, i in report.dispatched if task == TaskName.TRAIN]
            chunks = [i for task, i in report.dispatched if task == TaskName.SEARCH_CHUNK]
            if trainings:
                console.print(f"{len(trainings)} waiting trainings sent in turn {trainings}")
            if chunks:
                console.print(f"{len(chunks)} search chunks sent in turn {chunks}")
        if not loop:
            return
        time.sleep(interval)


def _redact(url: str) -> str:
    """Hide a password in a database URL before printing it."""
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)
