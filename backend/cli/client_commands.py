"""The commands that talk to an Orrery server over HTTP: submit, wait, runs, show, summary,
cancel, retry, compare, export.

Model: each opens an `OrreryClient` (backend/client.py) on --url / ORRERY_URL, or where `orrery
serve` would listen under the same settings, with --token / ORRERY_TOKEN; a refusal or an
unreachable server becomes an error message and exit code, never a traceback. Output is a table
(backend/cli/tables.py) or, with --json, the server's answer as JSON. Following an experiment
(`submit --wait`, `wait`) draws progress bars on a terminal and prints a line per change
otherwise (a log, a pipe, CI). Open choice: the default URL follows the serve settings rather
than a client-side configuration file.
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
from backend.cli.tables import comparison_table, print_runs, run_tables, summary_tables
from backend.client import ApiError, OrreryClient
from backend.numbers import format_value
from backend.settings import get_settings

T = TypeVar("T")
STATUSES = ("queued", "running", "done", "failed", "cancelled")

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
            _follow_to_the_end(client, experiment["id"])


def wait(
    experiment_id: Annotated[int, typer.Argument(help="experiment to follow")],
    url: ServerUrl = None,
    token: Token = None,
) -> None:
    """Follow an experiment's runs until they finish (re-attach after `submit` or a lost
    `--wait`), then print them; exits 1 unless every run is done."""
    with client_for(url, token) as client:
        experiment = call(lambda: client.experiment(experiment_id))
        console.print(f"experiment [bold]{experiment['id']}[/] '{experiment['name']}'")
        _follow_to_the_end(client, experiment_id)


def _follow_to_the_end(client: OrreryClient, experiment_id: int) -> None:
    final = follow(client, experiment_id)
    console.print(f"experiment {final['id']} {final['status']}: {final['run_counts']}")
    print_runs(list(client.iter_runs(experiment_id=[experiment_id], sort="id")))
    if final["status"] != "done":
        raise typer.Exit(1)


def follow(client: OrreryClient, experiment_id: int) -> dict[str, Any]:
    """Show the runs' progress until all have finished: a bar per run on a terminal, else a
    line whenever the experiment's counts or a run's status or tenth of progress change."""
    if not console.is_terminal:
        return call(lambda: client.wait(experiment_id, on_update=_progress_lines(experiment_id)))
    from rich.progress import (
        BarColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeRemainingColumn,
    )

    # Time left is rich's estimate from each bar's recent rate of progress.
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[status]}"),
        console=console,
    ) as bars:
        tasks: dict[int, Any] = {}

        def update(runs: list[dict[str, Any]]) -> None:
            for run in runs:
                if run["id"] not in tasks:
                    tasks[run["id"]] = bars.add_task(_run_label(run), total=1.0, status="")
                bars.update(tasks[run["id"]], completed=run["progress"], status=run["status"])

        return call(lambda: client.wait(experiment_id, on_update=update))


def _run_label(run: dict[str, Any]) -> str:
    return f"run {run['id']} {run['technique']} @ {run['accelerator_name']}"


def _progress_lines(experiment_id: int) -> Callable[[list[dict[str, Any]]], None]:
    """An update that prints what changed since the last poll, one line each, flushed."""
    seen: dict[int, tuple[str, int]] = {}
    last_counts: list[str] = []

    def update(runs: list[dict[str, Any]]) -> None:
        statuses = [run["status"] for run in runs]
        counts = [f"{statuses.count(s)} {s}" for s in STATUSES if s != "done" and s in statuses]
        line = [f"{statuses.count('done')} of {len(runs)} done", *counts]
        if line != last_counts:
            last_counts[:] = line
            console.print(f"experiment {experiment_id}: {', '.join(line)}", highlight=False)
        for run in runs:
            state = (run["status"], int(10 * run["progress"]))
            if seen.get(run["id"]) != state:
                seen[run["id"]] = state
                percent = format_value(run["progress"], "%")
                progress = f" {percent}" if run["status"] == "running" else ""
                console.print(f"{_run_label(run)}: {run['status']}{progress}", highlight=False)
        console.file.flush()

    return update


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


def summary(
    experiment_id: Annotated[int, typer.Argument(help="experiment")],
    as_json: Json = False,
    url: ServerUrl = None,
    token: Token = None,
) -> None:
    """The experiment's design points over seeds: each figure's mean ± the half-width of its
    95% interval (the compare page's summary)."""
    with client_for(url, token) as client:
        call(lambda: client.experiment(experiment_id))  # an unknown experiment is an error
        groups = call(lambda: client.groups(experiment_id=[experiment_id]))
    if as_json:
        print_json(groups)
        return
    for table in summary_tables(groups, console.width):
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
