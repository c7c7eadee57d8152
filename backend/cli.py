"""The `orrery` command line: serve, worker, migrate (and, in their modules, the science)."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import httpx
import typer
import yaml
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from backend.client import ApiError, OrreryClient
from backend.db import migrate as migrations
from backend.delivery.queue import QUEUE, declare_queue
from backend.delivery.supervisor import Supervisor
from backend.settings import get_settings
from backend.specs.accelerator import PRESETS
from backend.specs.techniques import accelerator_for, techniques_of
from backend.specs.training import MODEL_NAMES, TrainingConfig

T = TypeVar("T")

app = typer.Typer(
    help="Orrery: which training-acceleration technique, on which accelerator, is worth it?",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def _output_width() -> int | None:
    """A terminal's own width; when piped, COLUMNS if set, else wide enough that tables are
    never cut (rich would otherwise assume 80 columns and truncate cells)."""
    if sys.stdout.isatty():
        return None
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else 1000


console = Console(width=_output_width())


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
    declare_queue(settings.effective_broker_url)
    command = worker_command(concurrency or settings.worker_concurrency, loglevel)
    os.execv(command[0], command)


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="address to bind")] = None,
    port: Annotated[int | None, typer.Option(help="port to bind")] = None,
    with_worker: Annotated[bool, typer.Option(help="also start a worker process")] = True,
    workers: Annotated[int, typer.Option(min=1, max=64, help="API processes")] = 1,
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
    mode = "embedded (SQLite, no external server)" if settings.is_embedded else "external services"
    if settings.single_user_mode:
        mode += "; SINGLE-USER: no login, every request acts as the local user"
    console.print(f"[bold]Orrery[/] on {mode}; data in {settings.data_dir.resolve()}")
    console.print(f"Dashboard and API: [link]http://{host}:{port}/[/]  (docs: /api/docs)")
    # uvicorn shuts down gracefully on SIGTERM, then re-raises the signal to the handler that was
    # installed before it: make that handler an exit, so the worker below is stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        uvicorn.run(
            "backend.api.app:create_app", factory=True, host=host, port=port, workers=workers
        )
    finally:
        if supervisor is not None:
            supervisor.stop()


ServerUrl = Annotated[
    str | None,
    typer.Option(
        "--url",
        envvar="ORRERY_URL",
        help="the Orrery server [default: http://ORRERY_API_HOST:ORRERY_API_PORT, as `orrery "
        "serve` binds it]",
        show_default=False,
    ),
]
Token = Annotated[
    str | None, typer.Option("--token", envvar="ORRERY_TOKEN", help="personal API token")
]
Json = Annotated[bool, typer.Option("--json", help="print JSON instead of a table")]


def default_server_url() -> str:
    """Where `orrery serve` listens under the same settings (a wildcard bind is reached on the
    loopback address)."""
    settings = get_settings()
    host = settings.api_host
    if host in ("", "0.0.0.0", "::", "[::]"):
        host = "127.0.0.1"
    elif ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{settings.api_port}"


def _client(url: str | None, token: str | None) -> OrreryClient:
    return OrreryClient(url or default_server_url(), token=token)


def print_json(data: Any) -> None:
    """JSON on standard output, untouched by rich (for jq and scripts)."""
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def _fail(message: str, code: int = 1) -> NoReturn:
    console.print(f"[red]error:[/] {message}")
    raise typer.Exit(code)


def _call(action: Callable[[], T]) -> T:
    """Run a client call, turning server refusals and connection errors into clear messages."""
    try:
        return action()
    except ApiError as exc:
        if exc.errors:
            for field, reason in exc.errors:
                console.print(f"[red]{field}[/]: {reason}")
            _fail(f"the server refused the request (HTTP {exc.status_code})", 2)
        _fail(str(exc))
    except httpx.HTTPError as exc:
        _fail(f"cannot reach the server: {exc} (is `orrery serve` running? see --url)")


def load_spec(path: Path) -> dict[str, Any]:
    """Read a YAML or JSON experiment spec, or exit with a message naming the problem."""
    try:
        data = yaml.safe_load(path.read_bytes().decode("utf-8"))
    except OSError as exc:
        _fail(f"cannot read {path}: {exc.strerror}")
    except UnicodeDecodeError as exc:
        _fail(
            f"{path} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset "
            f"{exc.start}); save the spec as UTF-8"
        )
    except yaml.YAMLError as exc:
        _fail(f"{path} is not valid YAML/JSON: {exc}")
    if not isinstance(data, dict):
        _fail(f"{path} must hold a mapping (an experiment spec), not {type(data).__name__}")
    return data


@app.command()
def submit(
    spec_file: Annotated[Path, typer.Argument(help="experiment spec, YAML or JSON")],
    wait: Annotated[bool, typer.Option(help="wait for every run, with progress bars")] = False,
    url: ServerUrl = None,
    token: Token = None,
) -> None:
    """Submit an experiment; with --wait, follow its runs until they finish."""
    spec = load_spec(spec_file)
    with _client(url, token) as client:
        experiment = _call(lambda: client.submit(spec))
        console.print(
            f"experiment [bold]{experiment['id']}[/] '{experiment['name']}': "
            f"{experiment['total_runs']} runs, {experiment['trainings']} trainings queued"
        )
        if wait:
            final = follow(client, experiment["id"])
            console.print(f"experiment {final['id']} {final['status']}: {final['run_counts']}")
            print_runs(list(client.iter_runs(experiment_id=[experiment["id"]], sort="id")))
            if final["status"] != "done":
                raise typer.Exit(1)


def follow(client: OrreryClient, experiment_id: int) -> dict[str, Any]:
    """Show a progress bar per run until all have finished."""
    from rich.progress import BarColumn, Progress, TextColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[status]}"),
        console=console,
    ) as bars:
        tasks: dict[int, Any] = {}

        def update(runs: list[dict[str, Any]]) -> None:
            for run in runs:
                if run["id"] not in tasks:
                    label = f"run {run['id']} {run['technique']} @ {run['accelerator_name']}"
                    tasks[run["id"]] = bars.add_task(label, total=1.0, status=run["status"])
                bars.update(tasks[run["id"]], completed=run["progress"], status=run["status"])

        return _call(lambda: client.wait(experiment_id, on_update=update))


def print_runs(runs: list[dict[str, Any]]) -> None:
    table = Table(show_lines=False)
    for column in (
        "id",
        "technique",
        "model",
        "dataset",
        "accelerator",
        "status",
        "accuracy",
        "speedup",
        "energy ratio",
        "cycles",
        "reason",
    ):
        table.add_column(
            column,
            justify="right"
            if column in ("id", "accuracy", "speedup", "energy ratio", "cycles")
            else "left",
            overflow="fold" if column == "reason" else "ellipsis",
        )
    for run in runs:
        table.add_row(
            str(run["id"]),
            run["technique"],
            run["model"],
            run["dataset"],
            run["accelerator_name"],
            run["status"],
            _accuracy_cell(run),
            _fmt(run["speedup"], "{:.2f}x"),
            _fmt(run["energy_ratio"], "{:.2f}"),
            _fmt(run["total_cycles"], "{:,}"),
            run["error"] or "",
        )
    console.print(table)


def _accuracy_cell(run: dict[str, Any]) -> str:
    """The accuracy, flagged when the run did not learn (below chance + the margin)."""
    text = _fmt(run["accuracy"], "{:.2%}")
    return f"[red]{text} did not learn[/]" if run.get("did_not_learn") else text


def _fmt(value: float | None, pattern: str) -> str:
    return "-" if value is None else pattern.format(value)


@app.command()
def runs(
    experiment: Annotated[list[int] | None, typer.Option(help="experiment id (repeatable)")] = None,
    technique: Annotated[list[str] | None, typer.Option(help="technique (repeatable)")] = None,
    status: Annotated[list[str] | None, typer.Option(help="status (repeatable)")] = None,
    sort: Annotated[str, typer.Option(help="columns, '-' for descending")] = "-id",
    limit: Annotated[int, typer.Option(help="rows to show")] = 50,
    as_json: Json = False,
    url: ServerUrl = None,
    token: Token = None,
) -> None:
    """List runs as a table."""
    filters = {
        "experiment_id": experiment or [],
        "technique": technique or [],
        "status": status or [],
        "sort": sort,
        "limit": limit,
    }
    with _client(url, token) as client:
        page = _call(lambda: client.runs(**filters))
    if as_json:
        print_json(page)
        return
    print_runs(page["items"])
    console.print(f"{len(page['items'])} of {page['total']} runs")


@app.command()
def show(
    run_id: Annotated[int, typer.Argument(help="run id")],
    as_json: Json = False,
    url: ServerUrl = None,
    token: Token = None,
) -> None:
    """One run in full: spec, accelerator, baseline, status, per-layer and per-epoch figures."""
    with _client(url, token) as client:
        run = _call(lambda: client.run(run_id))
    if as_json:
        print_json(run)
        return
    for table in run_tables(run):
        console.print(table)


def run_tables(run: dict[str, Any]) -> list[Table]:
    """The run as tables: summary, per-layer-per-pass figures, per-epoch training figures."""
    summary = Table(title=f"run {run['id']}: {run['technique']}", show_header=False)
    summary.add_column("field", style="bold")
    summary.add_column("value")
    baseline = (
        "itself (a baseline)"
        if run["is_baseline"]
        else f"run {run['baseline_run_id']} ({run['baseline_hardware']} hardware)"
    )
    rows = {
        "experiment": str(run["experiment_id"]),
        "status": run["status"] + (f": {run['error']}" if run["error"] else ""),
        "attempt": str(run.get("attempt", 1))
        + "".join(
            f"; attempt {a['attempt']} {a['status']}" + (f": {a['error']}" if a["error"] else "")
            for a in run.get("attempts", [])
        ),
        "model / data": f"{run['model']} on {run['dataset']}, seed {run['seed']}",
        "training": json.dumps(run["training_config"], sort_keys=True),
        "techniques": json.dumps(run["technique_params"], sort_keys=True),
        "accelerator": f"{run['accelerator_name']}: "
        + json.dumps(run["accelerator_config"], sort_keys=True),
        "trained with": json.dumps(run["training_environment"], sort_keys=True)
        if run.get("training_environment")
        else "-",
        "compared with": baseline,
        "accuracy": _fmt(run["accuracy"], "{:.2%}"),
        "speedup": _fmt(run["speedup"], "{:.3f}x"),
        "energy ratio": _fmt(run["energy_ratio"], "{:.3f}"),
        "cycles": _fmt(run["total_cycles"], "{:,}"),
        "energy": _fmt(run["energy_pj"] and run["energy_pj"] / 1e6, "{:,.1f} µJ"),
        "MACs actual / algorithmic": f"{_fmt(run['macs_actual'], '{:,}')} / "
        f"{_fmt(run['macs_algorithmic'], '{:,}')} (overhead {_fmt(run['macs_overhead'], '{:,}')})",
    }
    for field, value in rows.items():
        summary.add_row(field, value)
    tables = [summary]
    if run["layers"]:
        layers = Table(title="per layer and pass (whole training)")
        headers = ("layer", "pass", "role", "MACs actual", "MACs skipped", "compute cyc",
                   "stall cyc", "total cyc", "util %", "DRAM MiB", "energy µJ")  # fmt: skip
        for header in headers:
            layers.add_column(header, justify="left" if header in headers[:3] else "right")
        for layer in run["layers"]:
            layers.add_row(
                layer["layer"],
                layer["training_pass"],
                layer["role"],
                f"{layer['macs_actual']:,}",
                f"{layer['macs_skipped']:,}",
                f"{layer['compute_cycles']:,}",
                f"{layer['stall_cycles']:,}",
                f"{layer['total_cycles']:,}",
                f"{100 * layer['utilization']:.1f}",
                f"{layer['dram_bytes'] / 2**20:.2f}",
                f"{layer['energy_pj'] / 1e6:.2f}",
            )
        tables.append(layers)
    if run["epochs"]:
        epochs = Table(title="per epoch")
        keys = ("epoch", "train_loss", "train_accuracy", "test_loss", "test_accuracy",
                "hit_rate", "density_fwd", "density_bwd", "gp_fraction", "seconds")  # fmt: skip
        shown = [k for k in keys if any(e.get(k) is not None for e in run["epochs"])]
        for key in shown:
            epochs.add_column(key.replace("_", " "), justify="right")
        for epoch in run["epochs"]:
            epochs.add_row(*(_fmt(epoch.get(k), "{:.4g}") for k in shown))
        tables.append(epochs)
    return tables


@app.command()
def cancel(
    experiment_id: Annotated[
        int | None, typer.Argument(help="experiment whose open runs to cancel")
    ] = None,
    run: Annotated[int | None, typer.Option("--run", help="cancel this one run instead")] = None,
    as_json: Json = False,
    url: ServerUrl = None,
    token: Token = None,
) -> None:
    """Cancel an experiment's queued and running runs, or one run (--run)."""
    if (experiment_id is None) == (run is None):
        _fail("give an experiment id or --run RUN (one of the two)")
    with _client(url, token) as client:
        if run is not None:
            answer = _call(lambda: client.cancel_run(run))
            summary = f"run {answer['id']}: {answer['status']}"
        else:
            answer = _call(lambda: client.cancel(experiment_id))
            summary = f"experiment {answer['id']}: {answer['status']}, {answer['run_counts']}"
    if as_json:
        print_json(answer)
    else:
        console.print(summary)


@app.command()
def retry(
    run_id: Annotated[int, typer.Argument(help="a failed or cancelled run")],
    as_json: Json = False,
    url: ServerUrl = None,
    token: Token = None,
) -> None:
    """Re-run a failed or cancelled run as its next attempt (the ended one is kept: `show`)."""
    with _client(url, token) as client:
        answer = _call(lambda: client.retry_run(run_id))
    if as_json:
        print_json(answer)
    else:
        console.print(f"run {answer['id']}: {answer['status']}, attempt {answer['attempt']}")


@app.command()
def compare(
    run_ids: Annotated[list[int], typer.Argument(help="run ids")],
    as_json: Json = False,
    url: ServerUrl = None,
    token: Token = None,
) -> None:
    """Each run against its baseline: speedup, energy ratio, accuracy and its change."""
    with _client(url, token) as client:
        rows = _call(lambda: client.compare(run_ids))
    if as_json:
        print_json(rows)
        return
    table = Table()
    for header in ("run", "technique", "accelerator", "baseline run", "speedup", "energy ratio",
                   "accuracy", "Δ accuracy"):  # fmt: skip
        table.add_column(
            header, justify="left" if header in ("technique", "accelerator") else "right"
        )
    for row in rows:
        table.add_row(
            str(row["run_id"]),
            row["technique"],
            row["accelerator_name"],
            _fmt(row["baseline_run_id"], "{}"),
            _fmt(row["speedup"], "{:.3f}x"),
            _fmt(row["energy_ratio"], "{:.3f}"),
            _fmt(row["accuracy"], "{:.2%}"),
            _fmt(row["accuracy_delta"] and 100 * row["accuracy_delta"], "{:+.2f} pt"),
        )
    console.print(table)


@app.command()
def export(
    output: Annotated[Path, typer.Option("--output", "-o", help="file to write")],
    format: Annotated[str, typer.Option(help="csv or json")] = "csv",
    experiment: Annotated[list[int] | None, typer.Option(help="experiment id (repeatable)")] = None,
    url: ServerUrl = None,
    token: Token = None,
) -> None:
    """Export every matching run (with params, times and metrics) to CSV or JSON."""
    if format not in ("csv", "json"):
        _fail(f"--format must be csv or json, not '{format}'")
    with _client(url, token) as client, output.open("wb") as handle:
        _call(
            lambda: [
                handle.write(chunk)
                for chunk in client.export(format, experiment_id=experiment or [])
            ]
        )
    console.print(f"wrote {output}")


@app.command()
def simulate(
    model: Annotated[str, typer.Argument(help=f"model: {', '.join(MODEL_NAMES)}")],
    accel: Annotated[
        str, typer.Option(help=f"accelerator preset: {', '.join(PRESETS)}")
    ] = "tpu-like",
    dataset: Annotated[str, typer.Option(help="data set whose input shape to use")] = "mnist",
    batch_size: Annotated[int, typer.Option(help="mini-batch size")] = 64,
    width: Annotated[int, typer.Option(help="base channel width")] = 16,
) -> None:
    """Simulate one dense training step of a zoo model on a preset; print a per-layer table.

    Like an experiment's baseline run, the step runs on the preset with only the extensions its
    techniques use switched on (a dense step uses none); the output says which were on."""
    if accel not in PRESETS:
        _fail(f"--accel: unknown preset '{accel}'; choose one of {', '.join(PRESETS)}")
    try:
        config = TrainingConfig(model=model, dataset=dataset, batch_size=batch_size, width=width)
    except ValidationError as exc:
        error = exc.errors()[0]
        _fail(f"{'.'.join(str(p) for p in error['loc']) or 'spec'}: {error['msg']}")
    from worker.sim import simulate as run_simulation
    from worker.sim.report import extensions_line, layer_table
    from worker.training import dense_workload

    workload = dense_workload(config)
    hardware = accelerator_for(PRESETS[accel], techniques_of(workload.technique))
    result = run_simulation(workload, hardware)
    console.print(layer_table(result))
    offered = ", ".join(PRESETS[accel].extensions_on) or "none"
    console.print(
        f"{extensions_line(result)}; {accel} offers: {offered} (a run switches on those its "
        "techniques use; a dense step, like an experiment's baseline, uses none)"
    )
    console.print(f"convolution operand traffic: {result.conv_operand_traffic}")
    for note in result.notes:
        console.print(f"note: {note}")


user_app = typer.Typer(help="Accounts: create users (the first admin among them).")
token_app = typer.Typer(help="Personal API tokens, made on the server for a user.")
app.add_typer(user_app, name="user")
app.add_typer(token_app, name="token")


@user_app.command("create")
def user_create(
    email: Annotated[str, typer.Option(help="the account's email, used to log in")],
    name: Annotated[str | None, typer.Option(help="display name")] = None,
    admin: Annotated[bool, typer.Option(help="may create accounts")] = False,
    password_stdin: Annotated[
        bool, typer.Option(help="read the password from standard input, not a prompt")
    ] = False,
) -> None:
    """Create an account on this server's database (e.g. the first admin)."""
    from backend.auth.users import AccountError, create_user
    from backend.db.session import session_scope

    if password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = typer.prompt("password", hide_input=True, confirmation_prompt=True)
    settings = get_settings()
    migrations.upgrade(settings.effective_database_url)
    with session_scope(settings.effective_database_url) as db:
        try:
            user = create_user(db, email, password, name, is_admin=admin)
        except AccountError as exc:
            _fail(f"--{exc.field}: {exc.message}" if exc.field == "email" else str(exc))
        console.print(f"created {'admin ' if admin else ''}user {user.id} <{user.email}>")
    if settings.single_user_mode:
        console.print(
            "[yellow]note:[/] this server runs single-user (no login); set "
            "ORRERY_SINGLE_USER=false to require accounts"
        )


@token_app.command("create")
def token_create(
    email: Annotated[str, typer.Option(help="whose token")],
    name: Annotated[str, typer.Option(help="what the token is for")] = "cli",
) -> None:
    """Make a personal API token for a user and print it once (only its hash is stored)."""
    from backend.auth.tokens import create_token
    from backend.auth.users import user_by_email
    from backend.db.session import session_scope

    settings = get_settings()
    with session_scope(settings.effective_database_url) as db:
        user = user_by_email(db, email)
        if user is None or not user.is_active:
            _fail(f"--email: no active account has the email '{email}'")
        _, secret = create_token(db, user, name)
    console.print("[bold]API token[/] (shown once; keep it secret, e.g. in ORRERY_TOKEN):")
    print(secret)


@app.command()
def reconcile(
    loop: Annotated[bool, typer.Option(help="keep running, one pass per --interval")] = False,
    interval: Annotated[float, typer.Option(help="seconds between passes with --loop")] = 60.0,
    grace: Annotated[
        float | None, typer.Option(help="skip trainings younger than this, seconds")
    ] = None,
) -> None:
    """Take back trainings whose lease expired; re-enqueue trainings left queued in the
    database with no task in the broker."""
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
                f"[yellow]{report.checked} queued trainings, undecided:[/] {report.skipped}"
            )
        else:
            console.print(
                f"{report.checked} queued trainings checked, "
                f"{len(report.requeued)} re-enqueued {report.requeued or ''}".rstrip()
            )
        if not loop:
            return
        time.sleep(interval)


def _redact(url: str) -> str:
    """Hide a password in a database URL before printing it."""
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


if __name__ == "__main__":
    app()
