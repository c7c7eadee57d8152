"""The commands that talk to an Orrery server over HTTP: submit, runs, show, cancel, retry,
compare, export.

Model: each opens an `OrreryClient` (backend/client.py) on --url / ORRERY_URL, or where `orrery
serve` would listen under the same settings, with --token / ORRERY_TOKEN; a refusal or an
unreachable server becomes an error message and exit code, never a traceback. Output is a table
(backend/cli/tables.py) or, with --json, the server's answer as JSON. Open choice: the default
URL follows the serve settings rather than a client-side configuration file.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import httpx
import typer
import yaml

from backend.cli.output import console, fail
from backend.cli.tables import comparison_table, print_runs, run_tables
from backend.client import ApiError, OrreryClient
from backend.settings import get_settings

T = TypeVar("T")

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


def client_for(url: str | None, token: str | None) -> OrreryClient:
    return OrreryClient(url or default_server_url(), token=token)


def print_json(data: Any) -> None:
    """JSON on standard output, untouched by rich (for jq and scripts)."""
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def call(action: Callable[[], T]) -> T:
    """Run a client call, turning server refusals and connection errors into clear messages."""
    try:
        return action()
    except ApiError as exc:
        if exc.errors:
            for field, reason in exc.errors:
                console.print(f"[red]{field}[/]: {reason}")
            fail(f"the server refused the request (HTTP {exc.status_code})", 2)
        fail(str(exc))
    except httpx.HTTPError as exc:
        fail(f"cannot reach the server: {exc} (is `orrery serve` running? see --url)")


def load_spec(path: Path) -> dict[str, Any]:
    """Read a YAML or JSON experiment spec, or exit with a message naming the problem."""
    try:
        data = yaml.safe_load(path.read_bytes().decode("utf-8"))
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror}")
    except UnicodeDecodeError as exc:
        fail(
            f"{path} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset "
            f"{exc.start}); save the spec as UTF-8"
        )
    except yaml.YAMLError as exc:
        fail(f"{path} is not valid YAML/JSON: {exc}")
    if not isinstance(data, dict):
        fail(f"{path} must hold a mapping (an experiment spec), not {type(data).__name__}")
    return data


def submit(
    spec_file: Annotated[Path, typer.Argument(help="experiment spec, YAML or JSON")],
    wait: Annotated[bool, typer.Option(help="wait for every run, with progress bars")] = False,
    url: ServerUrl = None,
    token: Token = None,
) -> None:
    """Submit an experiment; with --wait, follow its runs until they finish."""
    spec = load_spec(spec_file)
    with client_for(url, token) as client:
        experiment = call(lambda: client.submit(spec))
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

        return call(lambda: client.wait(experiment_id, on_update=update))


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
    with client_for(url, token) as client:
        page = call(lambda: client.runs(**filters))
    if as_json:
        print_json(page)
        return
    print_runs(page["items"])
    console.print(f"{len(page['items'])} of {page['total']} runs")


def show(
    run_id: Annotated[int, typer.Argument(help="run id")],
    as_json: Json = False,
    url: ServerUrl = None,
    token: Token = None,
) -> None:
    """One run in full: spec, accelerator, baseline, status, per-layer and per-epoch figures."""
    with client_for(url, token) as client:
        run = call(lambda: client.run(run_id))
    if as_json:
        print_json(run)
        return
    for table in run_tables(run):
        console.print(table)


def cancel(
    experiment_id: Annotated[
        int | None, typer.Argument(help="experiment whose open runs to cancel")
    ] = None,
    run: Annotated[int | None, typer.Option("--run", help="cancel this one run instead")] = None,
    search: Annotated[
        int | None, typer.Option("--search", help="cancel this design search instead")
    ] = None,
    as_json: Json = False,
    url: ServerUrl = None,
    token: Token = None,
) -> None:
    """Cancel an experiment's open runs and searches, one run (--run), or a search (--search)."""
    if sum(given is not None for given in (experiment_id, run, search)) != 1:
        fail("give an experiment id or --run RUN or --search SEARCH (one of them)")
    with client_for(url, token) as client:
        if run is not None:
            answer = call(lambda: client.cancel_run(run))
            summary = f"run {answer['id']}: {answer['status']}"
        elif search is not None:
            answer = call(lambda: client.cancel_search(search))
            progress = answer["progress"]
            summary = (
                f"search {answer['id']}: {answer['status']} after {progress['chunks_done']} of "
                f"{progress['chunks_total']} chunks"
            )
        else:
            answer = call(lambda: client.cancel(experiment_id))
            summary = f"experiment {answer['id']}: {answer['status']}, {answer['run_counts']}"
    if as_json:
        print_json(answer)
    else:
        console.print(summary)


def retry(
    run_id: Annotated[int, typer.Argument(help="a failed or cancelled run")],
    as_json: Json = False,
    url: ServerUrl = None,
    token: Token = None,
) -> None:
    """Re-run a failed or cancelled run as its next attempt (the ended one is kept: `show`)."""
    with client_for(url, token) as client:
        answer = call(lambda: client.retry_run(run_id))
    if as_json:
        print_json(answer)
    else:
        console.print(f"run {answer['id']}: {answer['status']}, attempt {answer['attempt']}")


def compare(
    run_ids: Annotated[list[int], typer.Argument(help="run ids")],
    as_json: Json = False,
    url: ServerUrl = None,
    token: Token = None,
) -> None:
    """Each run against its baseline: speedup, energy ratio, accuracy and its change."""
    with client_for(url, token) as client:
        rows = call(lambda: client.compare(run_ids))
    if as_json:
        print_json(rows)
        return
    console.print(comparison_table(rows))


def export(
    output: Annotated[Path, typer.Option("--output", "-o", help="file to write")],
    format: Annotated[str, typer.Option(help="csv or json")] = "csv",
    experiment: Annotated[list[int] | None, typer.Option(help="experiment id (repeatable)")] = None,
    url: ServerUrl = None,
    token: Token = None,
) -> None:
    """Export every matching run (with params, times and metrics) to CSV or JSON."""
    if format not in ("csv", "json"):
        fail(f"--format must be csv or json, not '{format}'")
    with client_for(url, token) as client, output.open("wb") as handle:
        call(
            lambda: [
                handle.write(chunk)
                for chunk in client.export(format, experiment_id=experiment or [])
            ]
        )
    console.print(f"wrote {output}")
