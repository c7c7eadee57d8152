"""Through the browser: saved filters on the run table (save, apply, delete), pages for an
unknown run, experiment or dashboard (the reason, no empty sections), and ReDoc loading
nothing from another host. The server runs without a worker: the runs stay queued."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import httpx
import pytest
from playwright.sync_api import Browser, Page

from tests.browser.conftest import ConsoleLog, Server, serving
from tests.conftest import orrery_env

pytestmark = pytest.mark.browser

SPEC = {
    "name": "saved filter runs",
    "training": {"model": "mlp", "dataset": "digits", "epochs": 1, "train_samples": 64},
    "techniques": [{"name": "mercury"}, {"name": "sparsetrain"}],
    "accelerators": ["edge"],
}
# Chromium logs every 4xx answer: here the 404s of the unknown run, experiment and dashboard.
EXPECTED_404 = "the server responded with a status of 404"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data_dir = tmp_path_factory.mktemp("orrery-views")
    with serving(data_dir, orrery_env(ORRERY_DATA_DIR=str(data_dir)), "--no-with-worker") as s:
        yield s


def table_techniques(page: Page, server: Server) -> list[str]:
    """The techniques of the runs the table shows (read through the API by run id)."""
    page.wait_for_selector("#run-table:not([aria-busy]) tbody tr")
    ids = page.locator("#run-table tbody tr").evaluate_all("rows => rows.map(r => r.dataset.runId)")
    runs = httpx.get(f"{server.url}/api/v1/runs", params={"limit": 500}, timeout=10).json()
    technique = {str(run["id"]): run["technique"] for run in runs["items"]}
    return sorted(technique[i] for i in ids)


def test_saved_filters_save_apply_and_delete(
    server: Server, browser: Browser, screenshots: Path
) -> None:
    created = httpx.post(f"{server.url}/api/v1/experiments", json=SPEC, timeout=30)
    assert created.status_code == 201, created.text
    console = ConsoleLog()
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    console.watch(page)
    page.goto(f"{server.url}/")
    assert table_techniques(page, server) == ["baseline", "mercury", "sparsetrain"]
    saved = page.get_by_label("Saved filters", exact=True)
    assert saved.locator("option").all_inner_texts() == ["none saved yet"]

    # Save: the table's filters and sort under a name (stored as the API's dashboard filters).
    page.get_by_label("Technique", exact=True).fill("mercury")
    page.get_by_role("button", name="Apply filters").click()
    page.wait_for_function("() => document.querySelectorAll('#run-table tbody tr').length === 1")
    page.get_by_label("Save these filters as").fill("MERCURY only")
    page.get_by_role("button", name="Save filters").click()
    page.get_by_text("Saved “MERCURY only”.").wait_for()
    dashboards = httpx.get(f"{server.url}/api/v1/dashboards", timeout=10).json()
    assert [d["name"] for d in dashboards] == ["MERCURY only"]
    stored = dashboards[0]["config"]
    assert stored["filters"]["technique"] == ["mercury"] and stored["run_ids"] == []

    # Apply: from a fresh page with no filter, the saved one filters the table again.
    page.goto(f"{server.url}/")
    assert table_techniques(page, server) == ["baseline", "mercury", "sparsetrain"]
    saved.select_option(label="MERCURY only")
    page.get_by_role("button", name="Apply", exact=True).click()
    page.wait_for_function("() => document.querySelectorAll('#run-table tbody tr').length === 1")
    assert table_techniques(page, server) == ["mercury"]
    assert page.get_by_label("Technique", exact=True).input_value() == "mercury"
    assert "technique=mercury" in page.url
    page.screenshot(path=screenshots / "saved-filters.png", full_page=True)

    # Delete, after confirming: gone from the list and from the API.
    page.get_by_role("button", name="delete saved filter MERCURY only").click()
    page.get_by_role("button", name="Yes, delete").click()
    page.get_by_text("Deleted “MERCURY only”.").wait_for()
    assert saved.locator("option").all_inner_texts() == ["none saved yet"]
    assert httpx.get(f"{server.url}/api/v1/dashboards", timeout=10).json() == []
    assert console.errors == []
    context.close()


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/runs/987654", "Cannot show run 987654"),
        ("/experiments/987654", "Cannot show experiment 987654"),
        ("/dashboards/no-such-board", "dashboard"),
    ],
)
def test_a_page_for_nothing_says_why_and_shows_no_empty_sections(
    server: Server, browser: Browser, screenshots: Path, path: str, reason: str
) -> None:
    console = ConsoleLog()
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    console.watch(page)
    page.goto(f"{server.url}{path}")
    errors = page.locator("#page-errors")
    page.wait_for_function("() => document.getElementById('page-errors').textContent")
    assert reason in errors.inner_text() and "404" in errors.inner_text(), errors.inner_text()
    assert page.locator("main h2:visible, main h3:visible").count() == 0
    page.screenshot(path=screenshots / f"not-found-{path.split('/')[1]}.png", full_page=True)
    assert [e for e in console.errors if EXPECTED_404 not in e] == []
    page.close()


def test_redoc_asks_no_other_host(server: Server, browser: Browser) -> None:
    console = ConsoleLog()
    page = browser.new_page()
    console.watch(page)
    hosts: set[str] = set()
    page.on("request", lambda request: hosts.add(urlparse(request.url).netloc))
    page.goto(f"{server.url}/api/redoc")
    page.get_by_text("API docs by Redocly").wait_for(timeout=60_000)
    logo = page.locator("img[alt='redocly logo']")
    assert logo.count() == 0 or logo.get_attribute("src").startswith("data:")
    assert hosts <= {urlparse(server.url).netloc, ""}, hosts
    # A blocked outside load would show as a refusal under the page's policy.
    assert not [e for e in console.errors if re.search(r"Refused to load|cdn\.", e)], console.errors
    assert console.errors == []
    page.close()
