"""Through the browser: the papers page shows the three papers' headlines, "no stored runs
yet" before any, submits a miniature through the normal submission and links to it, and then
shows the stored results per accelerator preset as mean ± 95% interval."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser

from tests.browser.conftest import ConsoleLog, Server, serving
from tests.conftest import orrery_env
from tests.pipeline.test_papers import finish_runs

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def idle_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """No worker: a submitted miniature stays queued (the test stores its results)."""
    data_dir = tmp_path_factory.mktemp("papers-data")
    with serving(data_dir, orrery_env(ORRERY_DATA_DIR=str(data_dir)), "--no-with-worker") as server:
        yield server


def test_papers_page_submits_a_miniature_and_shows_its_results(
    idle_server: Server, browser: Browser, screenshots: Path
) -> None:
    console = ConsoleLog()
    page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
    console.watch(page)
    page.goto(f"{idle_server.url}/")
    page.get_by_role("navigation", name="main").get_by_role("link", name="Papers").click()
    page.wait_for_selector("section.paper")
    cards = page.locator("section.paper")
    assert cards.count() == 3
    text = page.locator("#papers").inner_text()
    for headline in ("1.97x average speedup", "34% less energy", "2.2x energy efficiency"):
        assert headline in text
    assert page.locator(".no-runs").count() == 3
    findings = page.locator("section[data-paper=adagp] .findings li")
    assert findings.count() == 2 and "cosine gate" in findings.nth(0).inner_text()
    page.screenshot(path=str(screenshots / "papers-page.png"), full_page=True)

    mercury = page.locator("section[data-paper=mercury]")
    button = mercury.get_by_role("button", name="submit the mercury miniature")
    # Disabled from the click on (the click handler's first step), and still once submitted.
    assert button.evaluate("b => { b.click(); return b.disabled; }")
    link = mercury.locator("a.submitted")
    link.wait_for()
    assert (
        "(24 runs). Reload the page to submit it again."
        in mercury.locator(".submit-status").inner_text()
    )
    assert button.is_disabled() and button.inner_text() == "Submitted"
    mercury.screenshot(path=str(screenshots / "papers-page-submitted.png"))
    experiment_id = int(link.inner_text().removeprefix("experiment #"))
    link.click()
    page.wait_for_url(f"**/experiments/{experiment_id}")
    page.get_by_text("paper miniature: MERCURY").first.wait_for()

    finish_runs(idle_server.database_url, experiment_id)
    page.goto(f"{idle_server.url}/papers")
    page.wait_for_selector("section[data-paper=mercury] table.paper-results")
    ours = mercury.locator("tr[data-accelerator=mercury-like]").locator("td").all_inner_texts()
    # seeds 0, 1, 2 at 1.5x, 1.6x, 1.7x: mean 1.60, 95% half-width t(2) * 0.1 / sqrt(3) = 0.25
    assert ours[:2] == ["3 of 3", "1.60 ± 0.25×"]
    # Beside the speedup: the runs' stall share and their baselines' (the same in every seed).
    assert ours[2] == "20.0%\nbaseline 40.0%"
    # Iso-area: 0.9 of each seed's speedup, against the dense designs the runs stored.
    assert ours[4] == "1.44 ± 0.22×"
    assert ours[8] == (
        "fastest: 32×36, 16/16/16 KiB, 16.5 mm²; least energy: 32×32, 16/16/16 KiB, 15.0 mm²"
    )
    assert "121 of 384 dense designs" in (
        mercury.locator("tr[data-accelerator=mercury-like] td.iso-designs").get_attribute("title")
        or ""
    )
    # deltas −1, −0.5, 0 points: half-width 1.24 to two figures, the mean to its precision
    assert ours[6] == "-0.5 ± 1.2 pt"
    # The mean (1.60x) reaches half of 1.97x in log terms (1.40x), the lower bound (1.35x) not.
    assert ours[7] == "partial gain"
    verdict = mercury.locator("tr[data-accelerator=mercury-like] td.verdict")
    assert "lower bound below 1.4 " in (verdict.get_attribute("title") or "")
    assert "not part of it" in mercury.locator(".verdict-note").inner_text()
    assert mercury.locator("tr.headline-row").locator("td").all_inner_texts()[1] == "1.97×"
    head = mercury.locator("thead th").all_inner_texts()
    assert head[2:8] == [
        "Speedup (same array)", "Stall share", "Energy ratio (same array)", "Iso-area speedup",
        "Iso-area energy ratio", "Accuracy (Δ to baseline)",
    ]  # fmt: skip
    assert page.locator(".no-runs").count() == 2
    assert f"experiment #{experiment_id}" in mercury.inner_text()
    page.screenshot(path=str(screenshots / "papers-page-results.png"), full_page=True)
    mercury.screenshot(path=str(screenshots / "papers-page-mercury.png"))
    assert console.errors == []
