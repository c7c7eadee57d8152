"""Through the browser: submit a tiny experiment, watch it finish, compare its runs, save a
dashboard, and open its read-only link in a fresh browser context.

This module's server also sees a test technique's entry point (tests/techniques/toy/, through
tests.techniques.install_toy): the form offers it, knobs and sweep paths included, with no change to
the frontend, because the form reads the server's technique table."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page

from tests.browser.conftest import ConsoleLog, Server, serving
from tests.conftest import orrery_env, repo_pythonpath
from tests.techniques import install_toy

pytestmark = pytest.mark.browser

CHARTS = ["pareto", "cycles", "energy", "layer_cycles", "macs", "curves", "parallel", "roofline"]
EXPECTED_422 = "the server responded with a status of 422"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data_dir = tmp_path_factory.mktemp("orrery-data")
    env = orrery_env(
        ORRERY_DATA_DIR=str(data_dir),
        ORRERY_WORKER_CONCURRENCY="1",
        PYTHONPATH=f"{install_toy(data_dir.parent / 'site')}{os.pathsep}{repo_pythonpath()}",
    )
    with serving(data_dir, env) as server:
        yield server


def wait_for_charts(page: Page, count: int) -> None:
    page.wait_for_selector(f'#charts[data-rendered="{count}"]', timeout=30_000)
    cards = page.locator(".chart-card")
    assert cards.count() == count
    for index in range(count):
        card = cards.nth(index)
        assert card.get_attribute("data-rendered") == "true"
        # Plotly drew an SVG (parcoords and bars alike) and no "nothing to show" note.
        assert card.locator(".main-svg").count() >= 1, card.get_attribute("data-chart")
        assert "no finished runs" not in card.inner_text(), card.get_attribute("data-chart")


def check_text_block(page: Page) -> None:
    """The text block sits between the first and second charts, its Markdown rendered and its
    script shown as text, never run."""
    block = page.locator("#charts > .text-block")
    assert block.count() == 1
    assert block.locator("h2").inner_text() == "What this shows"
    assert block.locator("strong").inner_text() == "8 bits"
    assert "<script>" in block.inner_text()
    assert page.evaluate("() => window.pwned") is None
    order = page.eval_on_selector_all(
        "#charts > *", "nodes => nodes.map(n => n.dataset.chart || n.className)"
    )
    assert order[:3] == [CHARTS[0], "text-block", CHARTS[1]], order


def fill_tiny_experiment(page: Page) -> None:
    page.get_by_label("Experiment name").fill("browser tiny sweep")
    page.get_by_label("Model", exact=True).select_option("mlp")
    page.get_by_label("Dataset", exact=True).select_option("digits")
    page.get_by_label("Epochs", exact=True).fill("1")
    page.get_by_label("Batch size", exact=True).fill("32")
    page.get_by_label("Train samples", exact=True).fill("256")
    page.get_by_label("Test samples", exact=True).fill("128")
    # The first technique of the table (by name: ADA-GP) starts checked; this flow runs MERCURY.
    assert page.get_by_label("ADA-GP", exact=True).is_checked()
    page.get_by_label("ADA-GP", exact=True).uncheck()
    page.get_by_label("MERCURY", exact=True).check()
    page.get_by_label("tpu-like", exact=True).uncheck()
    page.get_by_label("edge", exact=True).check()
    page.get_by_role("button", name="Add sweep axis").click()
    page.get_by_label("Parameter path").fill("mercury.signature_bits")
    page.get_by_label("Values").fill("8, 16")


def check_offered_techniques(page: Page, screenshots: Path) -> None:
    """The form offers the server's techniques but the baseline, in its order, each with its
    knobs; the toy one is accepted by the server's preview and offered as a sweep path."""
    techniques = page.evaluate("() => fetch('/api/v1/techniques').then(r => r.json())")
    labels = page.locator('input[name="technique"]').evaluate_all(
        'boxes => boxes.map(b => document.querySelector(`label[for="${b.id}"]`).textContent)'
    )
    assert labels == [t["label"] for t in techniques if t["name"] != "baseline"]
    assert labels[-1] == "Toy"
    sweep_paths = page.locator("#sweep-paths option").evaluate_all("os => os.map(o => o.value)")
    assert "toy.strength" in sweep_paths
    toy = page.get_by_label("Toy", exact=True)
    toy.check()
    knobs = page.locator('fieldset[data-path="technique.toy"]')
    assert knobs.get_by_label("Strength", exact=True).input_value() == "0.5"
    page.wait_for_function(
        "() => document.getElementById('preview').textContent.startsWith('4 runs')"
    )
    assert "name: toy" in page.locator("#spec-text").inner_text()
    page.locator('fieldset[data-path="techniques"]').screenshot(
        path=screenshots / "01-submit-techniques.png"
    )
    toy.uncheck()
    page.wait_for_function(
        "() => document.getElementById('preview').textContent.startsWith('3 runs')"
    )


def check_validation_messages(page: Page, console: ConsoleLog) -> None:
    """A browser-side check and a server 422, each shown beside its field."""
    epochs = page.get_by_label("Epochs", exact=True)
    epochs.fill("0")
    error = page.locator('.field[data-path="training.epochs"] .error')
    page.wait_for_function(
        "() => document.querySelector('.field[data-path=\"training.epochs\"] .error')"
        ".textContent.length > 0"
    )
    assert error.inner_text()
    epochs.fill("1")
    # max_bits below signature_bits: only the server's validator knows; the 422 lands by MERCURY.
    max_bits = page.get_by_label("Max bits", exact=True)
    max_bits.fill("4")
    mercury_error = page.locator('fieldset[data-path="technique.mercury"] > .error')
    mercury_error.wait_for(timeout=10_000)
    page.wait_for_function(
        "() => /max_bits/.test(document.querySelector("
        "'fieldset[data-path=\"technique.mercury\"] > .error')?.textContent || '')"
    )
    max_bits.fill("32")
    page.wait_for_function("() => /\\d+ runs/.test(document.getElementById('preview').textContent)")
    assert all(EXPECTED_422 in e for e in console.errors), console.errors
    console.errors.clear()


def test_submit_watch_compare_save_and_share(
    server: Server, browser: Browser, screenshots: Path
) -> None:
    console = ConsoleLog()
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    console.watch(page)

    # 1. Submit through the form.
    page.goto(f"{server.url}/submit")
    page.wait_for_selector('#spec-form[data-ready="true"]')
    fill_tiny_experiment(page)
    page.wait_for_function(
        "() => document.getElementById('preview').textContent.startsWith('3 runs')"
    )
    spec_text = page.locator("#spec-text").inner_text()
    assert "signature_bits" in spec_text and "mlp" in spec_text
    check_offered_techniques(page, screenshots)
    check_validation_messages(page, console)
    page.screenshot(path=screenshots / "01-submit-form.png", full_page=True)
    page.get_by_role("button", name="Submit experiment").click()
    page.wait_for_url(re.compile(r"/\?experiment_id=\d+"))
    experiment_id = page.url.rsplit("=", 1)[1]

    # 2. Watch it run to the end over server-sent events.
    row = page.locator(f'tr[data-experiment-id="{experiment_id}"]')
    row.wait_for()
    page.screenshot(path=screenshots / "02-runs-live.png", full_page=True)
    page.wait_for_selector(
        f'tr[data-experiment-id="{experiment_id}"][data-status="done"]', timeout=240_000
    )
    page.wait_for_function(
        "() => document.querySelectorAll('#run-table tbody tr').length === 3 && "
        "[...document.querySelectorAll('#run-table [data-run-status]')]"
        ".every(s => s.dataset.runStatus === 'done')",
        timeout=30_000,
    )
    assert page.locator(".page-info").inner_text() == "1–3 of 3 runs"
    assert row.get_by_role("button", name=f"cancel experiment {experiment_id}").is_hidden()
    page.screenshot(path=screenshots / "03-runs-done.png", full_page=True)

    # 3. Compare every run.
    page.get_by_label("select all runs on this page").check()
    page.get_by_role("button", name=re.compile(r"Compare selected \(3\)")).click()
    page.wait_for_url(re.compile(r"/compare\?ids="))
    wait_for_charts(page, len(CHARTS))
    # The summary first: one row per design point (here one seed each), sortable.
    summary = page.locator("#group-summary tbody tr")
    summary.first.wait_for()
    assert summary.count() == 3
    techniques = page.locator("#group-summary tbody td:first-child").all_inner_texts()
    assert sorted(techniques) == ["baseline", "mercury", "mercury"]
    page.get_by_role("button", name=re.compile("^Technique")).click()
    assert page.locator("#group-summary tbody td:first-child").all_inner_texts() == [
        "baseline",
        "mercury",
        "mercury",
    ]
    assert "1 of 1" in summary.first.inner_text()
    page.screenshot(path=screenshots / "04-compare.png", full_page=True)

    # 4. Save as a dashboard with a text block before the second chart, then a read-only link.
    page.get_by_text("Text blocks (Markdown").click()
    page.get_by_role("button", name="Add text block").click()
    page.get_by_label("text block 1", exact=True).fill(
        "## What this shows\n\nMERCURY at **8 bits** <script>window.pwned = 1</script>"
    )
    page.get_by_label("place of text block 1").select_option(index=1)
    page.get_by_label("Dashboard name").fill("tiny sweep")
    page.get_by_role("button", name="Save dashboard").click()
    page.wait_for_url(re.compile(r"/dashboards/[A-Za-z0-9_-]+\?saved=1"), timeout=90_000)
    wait_for_charts(page, len(CHARTS))
    check_text_block(page)
    page.get_by_role("button", name="Create share link").click()
    share_url = page.get_by_label("share link").input_value()
    assert re.search(r"/shared/[A-Za-z0-9_-]{40,}$", share_url)
    page.screenshot(path=screenshots / "05-dashboard-saved.png", full_page=True)
    page.goto(f"{server.url}/dashboards")
    page.get_by_role("link", name="tiny sweep").wait_for()
    page.screenshot(path=screenshots / "06-dashboards-list.png", full_page=True)

    # 5. The link in a fresh context (no session): the charts, and only the shared endpoint.
    viewer = browser.new_context(viewport={"width": 1400, "height": 1000})
    shared = viewer.new_page()
    console.watch(shared)
    api_calls: list[str] = []
    shared.on("request", lambda r: api_calls.append(r.url) if "/api/" in r.url else None)
    shared.goto(share_url)
    wait_for_charts(shared, len(CHARTS))
    check_text_block(shared)
    assert shared.locator("#title").inner_text() == "tiny sweep"
    # Its summary table as on the compare page, the run counts as text (no page behind a login).
    shared_summary = shared.locator("#group-summary tbody tr")
    shared_summary.first.wait_for()
    assert shared_summary.count() == 3
    assert sorted(shared.locator("#group-summary tbody td:first-child").all_inner_texts()) == [
        "baseline",
        "mercury",
        "mercury",
    ]
    assert shared.locator("#group-summary a").count() == 0
    assert shared.locator("form, nav, a[href='/submit']").count() == 0
    # The shared endpoint, and the public technique table (the charts' colours) and figure
    # declarations (the training curves' panels).
    public = ("/api/v1/techniques", "/api/v1/figures")
    assert api_calls and all(
        "/api/v1/shared/" in url or url.endswith(public) for url in api_calls
    ), api_calls
    shared.screenshot(path=screenshots / "07-shared-dashboard.png", full_page=True)
    viewer.close()

    assert console.errors == []
    context.close()
