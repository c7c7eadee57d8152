"""Through the browser: the run table sorts, pages and filters on the server, exports what it
shows, and a running experiment can be cancelled from its row."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page
from sqlalchemy import insert

from backend.api.security import local_user
from backend.db.models import Experiment, Run
from backend.db.session import session_scope
from tests.browser.conftest import ConsoleLog, Server
from tests.pipeline.conftest import TINY_TRAINING

pytestmark = pytest.mark.browser

RUNS = 120
TECHNIQUES = ["baseline", "mercury", "sparsetrain"]


def seed_runs(server: Server) -> int:
    """An experiment of RUNS finished runs with distinct speedups, owned by the local user."""
    with session_scope(server.database_url) as db:
        experiment = Experiment(
            owner_id=local_user(db).id, name="seeded", spec={"name": "seeded"}, status="done"
        )
        db.add(experiment)
        db.flush()
        db.execute(
            insert(Run),
            [
                {
                    "experiment_id": experiment.id,
                    "technique": TECHNIQUES[i % 3],
                    "technique_params": [],
                    "model": "mlp",
                    "dataset": "digits",
                    "training_config": {},
                    "accelerator_name": "edge",
                    "accelerator_config": {},
                    "params": {"mercury.signature_bits": 8 + i % 5},
                    "status": "done",
                    "progress": 1.0,
                    "is_baseline": i % 3 == 0,
                    "accuracy": 0.9 if i < RUNS - 1 else 0.11,
                    "did_not_learn": i == RUNS - 1,
                    "speedup": 1 + i / 100,
                    "total_cycles": 1_000_000 - i,
                }
                for i in range(RUNS)
            ],
        )
        return experiment.id


def speedups(page: Page) -> list[float]:
    cells = page.locator("#run-table tbody tr td:nth-child(10)").all_inner_texts()
    return [float(text.rstrip("×")) for text in cells]


def test_sort_page_filter_and_export(server: Server, browser: Browser, screenshots: Path) -> None:
    experiment_id = seed_runs(server)
    console = ConsoleLog()
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    console.watch(page)
    page.goto(f"{server.url}/?experiment_id={experiment_id}")
    info = page.locator(".page-info")
    info.filter(has_text=f"1–50 of {RUNS} runs").wait_for()
    flagged = page.locator("#run-table tbody tr").filter(has_text="did not learn")
    assert flagged.count() == 1 and "11.0" in flagged.inner_text()  # the newest run, first

    page.get_by_role("button", name="Speedup").click()
    info.filter(has_text=f"1–50 of {RUNS}").wait_for()
    page.wait_for_function("() => location.search.includes('sort=-speedup')")
    first_page = speedups(page)
    assert first_page == sorted(first_page, reverse=True) and first_page[0] == 1 + (RUNS - 1) / 100
    page.get_by_role("button", name="Next ›").click()
    info.filter(has_text=f"51–100 of {RUNS}").wait_for()
    assert max(speedups(page)) < min(first_page)
    page.screenshot(path=screenshots / "08-run-table-sorted.png", full_page=True)

    page.get_by_label("Technique", exact=True).fill("mercury")
    page.get_by_role("button", name="Apply filters").click()
    info.filter(has_text=f"1–40 of {RUNS // 3} runs").wait_for()
    assert set(page.locator("#run-table tbody tr td:nth-child(4)").all_inner_texts()) == {"mercury"}
    href = page.get_by_role("link", name="Export CSV").get_attribute("href")
    assert "technique=mercury" in href and "format=csv" in href
    exported = list(csv.DictReader(io.StringIO(page.request.get(server.url + href).text())))
    assert len(exported) == RUNS // 3 and {row["technique"] for row in exported} == {"mercury"}

    # The selection survives paging and leads to the comparison of exactly those runs.
    page.get_by_label("select all runs on this page").check()
    page.get_by_role("button", name="Compare selected (40)").click()
    page.wait_for_url(re.compile(r"/compare\?ids="))
    page.wait_for_selector('#charts[data-rendered="8"]')
    assert "40 run(s)" in page.locator("#run-summary").inner_text()
    assert console.errors == []
    context.close()


def test_cancel_a_running_experiment(server: Server, browser: Browser, screenshots: Path) -> None:
    console = ConsoleLog()
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    console.watch(page)
    page.goto(f"{server.url}/")
    long_training = {**TINY_TRAINING, "epochs": 200, "train_samples": None}
    response = page.request.post(
        f"{server.url}/api/v1/experiments",
        data={"name": "too long", "training": long_training, "techniques": [{"name": "adagp"}]},
    )
    assert response.status == 201, response.text()
    experiment_id = response.json()["id"]
    page.reload()
    row = page.locator(f'tr[data-experiment-id="{experiment_id}"]')
    row.wait_for()
    row.get_by_role("button", name=f"cancel experiment {experiment_id}").click()
    assert "unfinished run(s)?" in row.locator(".confirm").inner_text()
    row.get_by_role("button", name="Yes, cancel").click()
    page.wait_for_selector(
        f'tr[data-experiment-id="{experiment_id}"][data-status="cancelled"]', timeout=60_000
    )
    assert row.locator(".badge").inner_text() == "cancelled"
    page.screenshot(path=screenshots / "09-experiment-cancelled.png", full_page=True)
    assert console.errors == []
    context.close()


def test_columns_are_kept_and_runs_grouped(
    server: Server, browser: Browser, screenshots: Path
) -> None:
    experiment_id = seed_runs(server)
    console = ConsoleLog()
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    console.watch(page)
    page.goto(f"{server.url}/?experiment_id={experiment_id}")
    page.locator(".page-info").filter(has_text=f"of {RUNS} runs").wait_for()
    headers = page.locator("#run-table thead th")
    assert "Tags" in headers.all_inner_texts()

    # Columns chosen in one browser are the account's: a fresh context shows the same.
    page.get_by_text("Columns", exact=True).click()
    page.get_by_label("show column Energy (µJ)").uncheck()
    page.get_by_label("show column Tags").uncheck()
    page.locator(".column-chooser [role=status]").filter(has_text="saved").wait_for()
    other = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    console.watch(other)
    other.goto(f"{server.url}/?experiment_id={experiment_id}")
    other.locator(".page-info").filter(has_text=f"of {RUNS} runs").wait_for()
    shown = [h.strip(" ▲▼") for h in other.locator("#run-table thead th").all_inner_texts()]
    assert "Tags" not in shown and "Energy (µJ)" not in shown and "Speedup" in shown

    # Grouped by technique: every run counted, mean ± sd over the whole filter, not a page.
    page.get_by_label("Group by").select_option("technique")
    groups = page.locator("#run-groups tbody tr")
    groups.first.wait_for()
    assert groups.count() == 3
    baseline = groups.filter(has_text="baseline").locator("td").all_inner_texts()
    speedups = [1 + i / 100 for i in range(RUNS) if i % 3 == 0]
    mean = sum(speedups) / len(speedups)
    sd = (sum((s - mean) ** 2 for s in speedups) / (len(speedups) - 1)) ** 0.5
    assert baseline[1] == str(len(speedups))
    assert baseline[3] == f"{round(mean, 3):g} ± {round(sd, 3):g}"
    page.screenshot(path=screenshots / "10-run-table-grouped.png", full_page=True)
    page.request.put(f"{server.url}/api/v1/preferences", data={"run_table_columns": None})
    assert console.errors == []
    context.close()
