"""Through the browser: the run table sorts, pages and filters on the server, exports what it
shows, and a running experiment can be cancelled from its row."""

from __future__ import annotations

import csv
import io
import re
import statistics
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page
from sqlalchemy import insert

from backend.api.security import local_user
from backend.db.models import Experiment, Run
from backend.db.session import session_scope
from backend.numbers import format_estimate, format_value
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
    page.get_by_label("show column Energy", exact=True).uncheck()
    page.get_by_label("show column Tags").uncheck()
    page.locator(".column-chooser [role=status]").filter(has_text="saved").wait_for()
    other = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    console.watch(other)
    other.goto(f"{server.url}/?experiment_id={experiment_id}")
    other.locator(".page-info").filter(has_text=f"of {RUNS} runs").wait_for()
    shown = [h.strip(" ▲▼") for h in other.locator("#run-table thead th").all_inner_texts()]
    assert "Tags" not in shown and "Energy" not in shown and "Speedup" in shown

    # Grouped by technique: every run counted, mean ± sd over the whole filter, not a page.
    page.get_by_label("Group by", exact=True).select_option("technique")
    groups = page.locator("#run-groups tbody tr")
    groups.first.wait_for()
    assert groups.count() == 3
    baseline = groups.filter(has_text="baseline").locator("td").all_inner_texts()
    speedups = [1 + i / 100 for i in range(RUNS) if i % 3 == 0]
    mean = statistics.fmean(speedups)  # as the server sums (1.585 is a tie at 3 figures)
    sd = (sum((s - mean) ** 2 for s in speedups) / (len(speedups) - 1)) ** 0.5
    headings = page.locator("#run-groups thead th").all_inner_texts()
    speedup = headings.index("Speedup, same array mean ± sd")
    assert baseline[1] == str(len(speedups))
    assert baseline[speedup] == f"{format_estimate(mean, sd, '×')} (n = {len(speedups)})"
    page.screenshot(path=screenshots / "10-run-table-grouped.png", full_page=True)
    page.request.put(f"{server.url}/api/v1/preferences", data={"run_table_columns": None})
    assert console.errors == []
    context.close()


def seed_configured_runs(server: Server) -> tuple[int, list[dict]]:
    """An experiment of 30 runs with training, accelerator and technique settings and every
    figure stored (a third of them still queued, without figures); the rows as inserted."""
    rows = []
    with session_scope(server.database_url) as db:
        experiment = Experiment(
            owner_id=local_user(db).id,
            name="configured",
            spec={"name": "configured"},
            status="done",
        )
        db.add(experiment)
        db.flush()
        for i in range(30):
            technique = "mercury" if i % 2 else "sparsetrain"
            done = i % 3 != 0
            knobs = {"name": "mercury", "signature_bits": 8 + 4 * (i % 4)} if i % 2 else {
                "name": "sparsetrain", "prune_rate": 0.5 + i / 100
            }  # fmt: skip
            rows.append(
                {
                    "experiment_id": experiment.id,
                    "technique": technique,
                    "technique_params": [knobs],
                    "model": "lenet5" if i % 5 < 2 else "mlp",
                    "dataset": "digits",
                    "training_config": {"batch_size": 32 if i < 15 else 64, "optimizer": "sgd"},
                    "accelerator_name": "edge",
                    "accelerator_config": {"rows": 16, "word_bytes": 4},
                    "params": {},
                    "status": "done" if done else "queued",
                    "progress": 1.0 if done else 0.0,
                    "is_baseline": False,
                    **(
                        {
                            "accuracy": 0.8 + i / 200,
                            "speedup": 1 + i / 50,
                            "energy_ratio": 1 - i / 100,
                            "total_cycles": 1_000_000 + 12_345 * i,
                            "stall_cycles": 1_000 * i,
                            "stall_share": 1_000 * i / (1_000_000 + 12_345 * i),
                            "energy_pj": 1.7e8 + 1e6 * i,
                            "dram_bytes": 3 * 2**20 + 4096 * i,
                            "seconds": 0.0123 + i / 1000,
                            "area_mm2": 8.36,
                        }
                        if done
                        else {}
                    ),
                }
            )
        db.execute(insert(Run), rows)
        return experiment.id, rows


def test_any_field_or_figure_as_a_column_and_grouped_by_several(
    server: Server, browser: Browser, screenshots: Path
) -> None:
    experiment_id, rows = seed_configured_runs(server)
    console = ConsoleLog()
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    console.watch(page)
    page.goto(f"{server.url}/?experiment_id={experiment_id}&sort=id")
    page.locator(".page-info").filter(has_text="of 30 runs").wait_for()
    # Formatted by the shared rules: energy in µJ to three figures, DRAM in MiB, time in ms.
    first = page.locator("#run-table tbody tr").nth(1)  # run 2 of the experiment: done
    cells = first.locator("td").all_inner_texts()
    assert "171 µJ" in cells and "13.3 ms" in cells and "1.01 M cycles" in cells

    page.get_by_text("Columns", exact=True).click()
    page.get_by_label("find a column").fill("signature bits")
    page.get_by_label("show column MERCURY signature bits").check()
    page.get_by_label("find a column").fill("")
    for label in ("Δ accuracy", "Stall share", "DRAM words", "training batch size", "DRAM"):
        page.get_by_label(f"show column {label}", exact=True).check()
    page.locator(".column-chooser [role=status]").filter(has_text="saved").wait_for()
    header = page.locator("#run-table thead th")
    header.filter(has_text="Stall share").wait_for()
    shown = [h.strip(" ▲▼") for h in header.all_inner_texts()]
    assert shown[-6:] == [
        "MERCURY signature bits", "Δ accuracy", "Stall share", "DRAM words",
        "training batch size", "DRAM",
    ]  # fmt: skip
    row = page.locator("#run-table tbody tr").nth(1).locator("td").all_inner_texts()
    run = rows[1]
    share = format_value(run["stall_cycles"] / run["total_cycles"], "%")
    words = format_value(run["dram_bytes"] / 4, "words")
    assert row[-6:] == ["12", "–", share, words, "32", format_value(run["dram_bytes"], "bytes")]

    # Sorted on the server by a technique field: the largest signature length first, runs
    # without one (SparseTrain's) after every MERCURY run.
    page.get_by_role("button", name="MERCURY signature bits").click()
    page.wait_for_function("() => location.search.includes('sort=-mercury.signature_bits')")
    page.locator(".page-info").filter(has_text="of 30 runs").wait_for()
    page.locator("#run-table thead th[aria-sort=descending]").wait_for()
    bits = page.locator("#run-table tbody tr td:nth-last-child(6)").all_inner_texts()
    mercury = sorted(
        (r["technique_params"][0]["signature_bits"] for r in rows if r["technique"] == "mercury"),
        reverse=True,
    )
    assert bits == [str(b) for b in mercury] + ["–"] * (30 - len(mercury))

    # At 1400 px the last column is reachable: the table scrolls inside its box, the page does
    # not spill sideways.
    last = page.locator("#run-table thead th").last
    last.scroll_into_view_if_needed()
    box = last.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 1400
    overflow = page.evaluate("() => document.documentElement.scrollWidth")
    assert overflow <= 1400
    page.screenshot(path=screenshots / "27-run-table-added-columns.png", full_page=True)

    # Grouped by technique and model: a group per pair, n beside every mean, n counting only
    # the runs that have the figure (queued ones have none).
    page.get_by_label("Group by", exact=True).select_option("technique")
    page.get_by_label("then group by (2)").select_option("model")
    groups = page.locator("#run-groups tbody tr")
    page.locator("#run-groups thead th").filter(has_text="Model").wait_for()
    expected: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        expected.setdefault((r["technique"], r["model"]), []).append(r)
    assert groups.count() == len(expected) == 4
    headings = page.locator("#run-groups thead th").all_inner_texts()
    speedup = headings.index("Speedup, same array mean ± sd")
    for (technique, model), members in sorted(expected.items()):
        cells = (
            groups.filter(has_text=technique).filter(has_text=model).locator("td").all_inner_texts()
        )
        assert cells[:3] == [technique, model, str(len(members))]
        speedups = [r["speedup"] for r in members if "speedup" in r]
        mean = statistics.fmean(speedups)
        sd = (sum((v - mean) ** 2 for v in speedups) / (len(speedups) - 1)) ** 0.5
        assert cells[speedup] == f"{format_estimate(mean, sd, '×')} (n = {len(speedups)})"
        assert len(speedups) < len(members)
    page.screenshot(path=screenshots / "27-run-table-grouped-by-two.png", full_page=True)
    page.request.put(f"{server.url}/api/v1/preferences", data={"run_table_columns": None})

    # The compare page's summary at 1400 px: its last column reachable too, in the same units.
    page.get_by_label("select all runs on this page").check()
    page.get_by_role("button", name="Compare selected (30)").click()
    summary = page.locator("table[aria-label='design points over seeds']")
    summary.wait_for()
    last = summary.locator("thead th").last
    last.scroll_into_view_if_needed()
    box = last.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 1400
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 1400
    headings = [h.strip(" ▲▼") for h in summary.locator("thead th").all_inner_texts()]
    energy_column = headings.index("Energy") + 1
    energies = summary.locator(f"tbody td:nth-child({energy_column})").all_inner_texts()
    assert any(re.fullmatch(r"\d+\.?\d* ± \d+\.?\d* µJ", text) for text in energies), energies
    page.screenshot(path=screenshots / "27-compare-summary-1400.png", full_page=True)
    assert console.errors == []
    context.close()
