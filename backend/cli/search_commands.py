"""The commands of hardware design searches: `orrery search` runs one and follows it, `orrery
front` prints its fronts.

Model: as the other client commands (backend/cli/client_commands.py): an `OrreryClient` on
--url / --token, refusals and an unreachable server as messages and exit codes, never a
traceback. `search SPEC` submits an experiment spec with a `search:` section, follows its runs
(as `submit --wait`), then its search; `search SPEC --experiment ID` runs the DesignSearch in
SPEC (a bare one, or an experiment spec's `search:` section) on an existing experiment. Open
choice: `front` shows the experiment's latest search unless --search names one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from backend.cli.client_commands import (
    Json,
    ServerUrl,
    Token,
    call,
    client_for,
    follow,
    load_spec,
    print_json,
)
from backend.cli.output import console, fail
from backend.client import OrreryClient
from backend.numbers import format_value


def _design_search(spec: dict[str, Any], path: Path) -> dict[str, Any]:
    """The DesignSearch in a file: the whole file, or an experiment spec's `search:`."""
    if "techniques" in spec or "search" in spec:
        found = spec.get("search")
        if not isinstance(found, dict):
            fail(f"{path} is an experiment spec without a 'search:' section")
        return found
    return spec


def search(
    spec_file: Annotated[
        Path,
        typer.Argument(
            help="an experiment spec with a `search:` section, or (--experiment) a design "
            "search, YAML or JSON"
        ),
    ],
    experiment: Annotated[
        int | None,
        typer.Option("--experiment", help="run the search on this existing experiment"),
    ] = None,
    wait: Annotated[bool, typer.Option(help="follow the search until it ends")] = True,
    url: ServerUrl = None,
    token: Token = None,
) -> None:
    """Search hardware designs on an experiment's stored workloads; print its fronts."""
    spec = load_spec(spec_file)
    with client_for(url, token) as client:
        if experiment is None:
            if not isinstance(spec.get("search"), dict):
                fail(
                    f"{spec_file} has no 'search:' section; add one, or give --experiment ID to "
                    "run a design search file on an experiment"
                )
            submitted = call(lambda: client.submit(spec))
            experiment_id = submitted["id"]
            console.print(
                f"experiment [bold]{experiment_id}[/] '{submitted['name']}': "
                f"{submitted['total_runs']} runs, {submitted['trainings']} trainings queued"
            )
            found = call(lambda: client.searches(experiment_id))
            started = found[-1]
            if wait:
                follow(client, experiment_id)
        else:
            body = _design_search(spec, spec_file)
            started = call(lambda: client.submit_search(experiment, body))
            experiment_id = experiment
        console.print(
            f"search [bold]{started['id']}[/] of experiment {experiment_id}: {started['status']}"
        )
        if not wait:
            return
        final = follow_search(client, started["id"])
        if final["status"] != "done":
            console.print(f"search {final['id']} {final['status']}: {final['error'] or ''}")
            raise typer.Exit(1)
        print_fronts(call(lambda: client.fronts(final["id"])), final)


def follow_search(client: OrreryClient, search_id: int) -> dict[str, Any]:
    """A progress bar over the search's chunks until it ends."""
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("chunks, {task.fields[designs]} designs, {task.fields[status]}"),
        console=console,
    ) as bars:
        task = bars.add_task(f"search {search_id}", total=None, designs=0, status="waiting")

        def update(answer: dict[str, Any]) -> None:
            progress = answer["progress"]
            bars.update(
                task,
                total=progress["chunks_total"] or None,
                completed=progress["chunks_done"],
                designs=f"{progress['designs_evaluated']:,}",
                status=answer["status"],
            )

        return call(lambda: client.wait_search(search_id, on_update=update))


def _cell(value: Any) -> str:
    return format_value(value) if isinstance(value, float) else str(value)


def _figure(value: float, unit: str) -> str:
    """A design's figure by the shared number rules (joules scaled from pJ like every energy)."""
    return format_value(value * 1e12, "pJ") if unit == "J" else format_value(value, unit)


def fronts_table(answer: dict[str, Any]) -> Table:
    """One row per front design: technique, time, energy, area, the searched fields."""
    measures = answer["measures"]
    table = Table(title=f"search {answer['search_id']}: fronts ({answer['status']})")
    table.add_column("technique")
    table.add_column("design", justify="right")
    for measure in measures:
        table.add_column(measure["key"].rsplit("_", 1)[0], justify="right")
    for field in answer["fields"]:
        table.add_column(field, justify="right")
    for technique, points in answer["fronts"].items():
        first = measures[0]["key"]
        for point in sorted(points, key=lambda p: p[first]):
            table.add_row(
                technique,
                str(point["index"]),
                *(_figure(point[m["key"]], m["unit"]) for m in measures),
                *(_cell(point["fields"].get(field)) for field in answer["fields"]),
            )
    return table


def print_fronts(answer: dict[str, Any], search_status: dict[str, Any]) -> None:
    console.print(fronts_table(answer))
    for technique, counts in search_status["techniques"].items():
        console.print(
            f"{technique}: {counts['front']} on the front of {counts['feasible']:,} feasible "
            f"of {counts['evaluated']:,} designs"
        )


def front(
    experiment_id: Annotated[int, typer.Argument(help="experiment whose search to show")],
    search_id: Annotated[
        int | None, typer.Option("--search", help="this search (default: the latest)")
    ] = None,
    as_json: Json = False,
    url: ServerUrl = None,
    token: Token = None,
) -> None:
    """The Pareto fronts of an experiment's design search, per technique."""
    with client_for(url, token) as client:
        found = call(lambda: client.searches(experiment_id))
        if search_id is None:
            if not found:
                fail(
                    f"experiment {experiment_id} has no design search; run one with `orrery "
                    f"search SPEC --experiment {experiment_id}`"
                )
            search_id = found[-1]["id"]
        elif search_id not in {s["id"] for s in found}:
            fail(f"search {search_id} is not a search of experiment {experiment_id}")
        status = call(lambda: client.search(search_id))
        answer = call(lambda: client.fronts(search_id))
    if as_json:
        print_json(answer)
        return
    if status["status"] != "done":
        progress = status["progress"]
        console.print(
            f"search {search_id} is {status['status']}: the fronts of the "
            f"{progress['designs_evaluated']:,} designs evaluated so far"
        )
    print_fronts(answer, status)
