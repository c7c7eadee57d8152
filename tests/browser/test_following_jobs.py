"""Through the browser: jobs you can follow. An experiment's counts follow its runs live; a
running run shows epoch k of N, per cent and time left, and its curve grows as epochs are
stored; a finished run whose baseline is not done says it waits for it and links it; the run
page shows its times, duration and accuracy change against its baseline."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect
from sqlalchemy import update

from backend.api.security import local_user
from backend.db.models import EpochMetric, Experiment, Run, Training
from backend.db.session import session_scope
from tests.browser.conftest import ConsoleLog, Server

pytestmark = pytest.mark.browser

EPOCHS = 3


def seed(server: Server, runs_per_training: int = 1) -> dict[str, list[int] | int]:
    """An experiment with a baseline training and a technique training, both running under a
    fresh lease (so the reconciler leaves them alone), each with its runs."""
    now = datetime.now(UTC)
    with session_scope(server.database_url) as db:
        experiment = Experiment(
            owner_id=local_user(db).id, name="following", spec={"name": "following"},
            status="running",
        )  # fmt: skip
        db.add(experiment)
        db.flush()
        ids: dict[str, list[int] | int] = {"experiment": experiment.id}
        for technique in ("baseline", "sparsetrain"):
            training = Training(
                experiment_id=experiment.id, key=technique, technique=technique,
                technique_params=[], training_config={"epochs": EPOCHS}, status="running",
                progress=0.0, attempts=1, started_at=now - timedelta(seconds=30),
                heartbeat_at=now + timedelta(hours=1),
            )  # fmt: skip
            db.add(training)
            db.flush()
            ids[f"{technique}_training"] = training.id
            runs = []
            for _ in range(runs_per_training):
                run = Run(
                    experiment_id=experiment.id, training_id=training.id, technique=technique,
                    technique_params=[], model="mlp", dataset="digits", training_config={},
                    accelerator_name="edge", accelerator_config={"clock_mhz": 500},
                    params={"technique": technique}, seed=0, status="running", progress=0.0,
                    created_at=now - timedelta(seconds=60),
                    is_baseline=technique == "baseline", started_at=now - timedelta(seconds=30),
                    baseline_run_id=ids["baseline"][0] if technique != "baseline" else None,  # type: ignore[index]
                )  # fmt: skip
                db.add(run)
                db.flush()
                runs.append(run.id)
            ids[technique] = runs
        return ids


def store_epoch(server: Server, training_id: int, epoch: int, fraction: float) -> None:
    """What the worker writes when it measured an epoch: the epoch, and its progress."""
    with session_scope(server.database_url) as db:
        db.add(
            EpochMetric(
                training_id=training_id, epoch=epoch, train_loss=1 / epoch, test_loss=1.2 / epoch,
                train_accuracy=0.5 + epoch / 10, test_accuracy=0.45 + epoch / 10, seconds=8.0,
                wall_seconds=10.0, per_layer={},
            )
        )  # fmt: skip
        db.execute(update(Training).where(Training.id == training_id).values(progress=fraction))
        db.execute(
            update(Run).where(Run.training_id == training_id).values(progress=0.98 * fraction)
        )


def finish(server: Server, run_ids: list[int], **metrics: float | None) -> None:
    with session_scope(server.database_url) as db:
        db.execute(
            update(Run)
            .where(Run.id.in_(run_ids))
            .values(status="done", progress=1.0, finished_at=datetime.now(UTC), **metrics)
        )


def open_page(browser: Browser, console: ConsoleLog, url: str) -> Page:
    page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    console.watch(page)
    page.goto(url)
    return page


def test_the_experiment_list_counts_runs_as_they_finish(
    server: Server, browser: Browser, screenshots: Path
) -> None:
    ids = seed(server, runs_per_training=2)
    console = ConsoleLog()
    page = open_page(browser, console, f"{server.url}/")
    row = page.locator(f'tr[data-experiment-id="{ids["experiment"]}"]')
    expect(row.locator(".experiment-counts")).to_have_text("0/4 done")
    finish(server, ids["baseline"], accuracy=0.9)  # type: ignore[arg-type]
    # The stream's run events, not a reload, bring the counts (the experiment is not over).
    expect(row.locator(".experiment-counts")).to_have_text("2/4 done", timeout=10_000)
    store_epoch(server, ids["sparsetrain_training"], 1, 0.5)  # type: ignore[arg-type]
    expect(row.locator(".experiment-progress")).to_contain_text("left", timeout=10_000)
    page.screenshot(path=screenshots / "20-experiment-list-live-counts.png")
    assert console.errors == []


def test_a_running_run_shows_its_epoch_time_left_and_growing_curves(
    server: Server, browser: Browser, screenshots: Path
) -> None:
    ids = seed(server)
    [run_id], [baseline_id] = ids["sparsetrain"], ids["baseline"]  # type: ignore[misc]
    training = ids["sparsetrain_training"]
    store_epoch(server, training, 1, 0.5)  # type: ignore[arg-type]
    console = ConsoleLog()
    page = open_page(browser, console, f"{server.url}/runs/{run_id}")
    summary = page.locator("#summary")
    # Epoch 2 of 3 under way, 49% of the run, 10 s an epoch x 1.5 epochs left.
    expect(summary).to_contain_text("epoch 2/3 · 49% · about 15 s left")
    expect(page.locator("#curves")).to_have_attribute("data-epochs", "1")
    for term in ("Created", "Started", "Finished", "Duration", "Δ accuracy"):
        expect(summary.locator("dt", has_text=term)).to_have_count(1)
    page.screenshot(path=screenshots / "21-run-live-epoch-1.png", full_page=True)

    store_epoch(server, training, 2, 0.8)  # type: ignore[arg-type]
    expect(page.locator("#curves")).to_have_attribute("data-epochs", "2", timeout=10_000)
    expect(summary).to_contain_text("epoch 3/3 · 78% · about 6 s left")
    assert page.evaluate("document.getElementById('curves').data[0].x") == [1, 2]

    # Done before its baseline: the speedup waits for it, and says so.
    store_epoch(server, training, 3, 1.0)  # type: ignore[arg-type]
    finish(server, [run_id], accuracy=0.8)
    waiting = summary.locator(".waiting-baseline")
    expect(waiting).to_contain_text(f"waiting for baseline run #{baseline_id}", timeout=10_000)
    expect(waiting.locator("a")).to_have_attribute("href", f"/runs/{baseline_id}")
    # Written the same in every locale, in the reader's zone: "2026-12-04 22:41:07".
    finished = summary.locator("dt", has_text="Finished").locator("+ dd")
    expect(finished).to_have_text(re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$"))
    page.screenshot(path=screenshots / "22-run-waiting-for-baseline.png", full_page=True)

    table = open_page(browser, console, f"{server.url}/experiments/{ids['experiment']}")
    cell = table.locator(f'a.waiting-baseline[href="/runs/{baseline_id}"]')
    expect(cell).to_have_text(f"waiting for baseline #{baseline_id}")
    table.screenshot(path=screenshots / "23-experiment-waiting-for-baseline.png", full_page=True)

    # The baseline finishes (the worker sets the speedups in the same transaction): the
    # speedup and the accuracy change against it appear.
    with session_scope(server.database_url) as db:
        db.execute(update(Run).where(Run.id == run_id).values(speedup=1.5))
        db.execute(
            update(Run)
            .where(Run.id == baseline_id)
            .values(status="done", progress=1.0, finished_at=datetime.now(UTC), accuracy=0.79)
        )
    expect(summary).to_contain_text("1.50×", timeout=10_000)
    expect(summary.locator("dt", has_text="Δ accuracy").locator("+ dd")).to_contain_text(
        "+1.00 pt (baseline 79.0%)"
    )
    page.screenshot(path=screenshots / "24-run-done-with-baseline.png", full_page=True)
    assert console.errors == []
