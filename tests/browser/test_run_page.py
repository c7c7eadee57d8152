"""Through the browser: a run's own page shows its spec, its baseline (a link to it), its status
and failure reason, the per-layer-per-pass figures and the training curves of a real run."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, expect

from backend.api.security import local_user
from backend.db.models import Experiment, Run
from backend.db.session import session_scope
from tests.browser.conftest import ConsoleLog, Server
from tests.pipeline.conftest import TINY_TRAINING

pytestmark = pytest.mark.browser

SPEC = {
    "name": "run page",
    "training": TINY_TRAINING,
    # min_hit_rate 1: every reused layer misses some rows, so the rule switches each one off
    "techniques": [{"name": "mercury", "signature_bits": 8, "min_hit_rate": 1.0}],
    "accelerators": ["edge"],
}


def finished_runs(server: Server, experiment_id: int, timeout: float = 240) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = httpx.get(
            f"{server.url}/api/v1/runs", params={"experiment_id": experiment_id, "sort": "id"}
        ).json()["items"]
        if runs and all(r["status"] in ("done", "failed") for r in runs):
            return runs
        time.sleep(1)
    raise AssertionError(f"runs unfinished after {timeout}s")


def test_run_page_shows_a_real_run_and_links_its_baseline(
    server: Server, browser: Browser, screenshots: Path
) -> None:
    experiment = httpx.post(f"{server.url}/api/v1/experiments", json=SPEC).json()
    baseline, run = finished_runs(server, experiment["id"])
    assert baseline["is_baseline"] and run["technique"] == "mercury"
    detail = httpx.get(f"{server.url}/api/v1/runs/{run['id']}").json()

    console = ConsoleLog()
    page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    console.watch(page)
    page.goto(f"{server.url}/runs/{run['id']}")
    page.wait_for_selector("#layer-table")
    assert page.locator("h1").inner_text() == f"Run #{run['id']}: mercury on edge"
    summary = page.locator("#summary").inner_text()
    assert "done" in summary and f"experiment #{experiment['id']}" in summary
    assert f"run #{baseline['id']}" in summary and "every extension off" in summary
    # Time and area, as the API stores them.
    assert "s for the training" in summary and "s a step (at 200 MHz)" in summary
    assert detail["seconds"] > 0 and detail["area_mm2"] > 0
    assert "mm² (45 nm, its extensions included)" in summary
    # Every layer-pass the API stores is a row, in order.
    rows = page.locator("#layer-table tbody tr")
    assert rows.count() == len(detail["layers"]) > 0
    first = rows.nth(0).locator("td")
    assert first.nth(0).inner_text() == detail["layers"][0]["layer"]
    assert first.nth(1).inner_text() == detail["layers"][0]["training_pass"]
    # The spec, as stored: training, the technique's knobs, the accelerator.
    spec = page.locator("#spec").inner_text()
    assert "signature_bits" in spec and "learning_rate" in spec and "dram_bandwidth" in spec
    # What the training ran with, since the same seed is bit-identical only under the same.
    trained_with = page.locator("#spec table", has_text="Trained with").inner_text()
    assert "intra_op_threads" in trained_with
    assert detail["training_environment"]["torch"] in trained_with
    # Curves drawn by Plotly, and MERCURY's per-layer hit rate per epoch in its table.
    page.wait_for_selector("#curves .main-svg")
    headers = page.locator("#layer-epoch-table thead").inner_text()
    assert "hit rate" in headers
    # When and why MERCURY switched a layer's reuse off: served per layer, said on the page.
    switched = {
        layer: figures["hit_rate"]
        for layer, figures in detail["epochs"][0]["per_layer"].items()
        if figures.get("reuse_off_below") == 1.0
    }
    assert switched and all(rate < 1.0 for rate in switched.values())
    notes = page.locator("#reuse-switched-off li")
    assert notes.count() == len(switched)
    for layer in switched:
        note = page.locator(f"#reuse-switched-off li[data-layer='{layer}']").inner_text()
        assert f"switched reuse off in layer {layer} after epoch 1" in note
        assert "fell below min_hit_rate 100" in note and "pay for its signatures" in note
    page.screenshot(path=str(screenshots / "run-page.png"), full_page=True)

    # Tags and notes, saved from the page, kept, and found by the run table's search.
    page.get_by_label("Tags", exact=True).fill("figure-3, odd")
    page.get_by_label("Notes", exact=True).fill("hit rate dips in layer 3")
    page.get_by_role("button", name="Save tags and notes").click()
    page.wait_for_selector("form.annotations [role=status]:text('saved')")
    page.reload()
    page.wait_for_selector("#layer-table")
    assert page.get_by_label("Tags", exact=True).input_value() == "figure-3, odd"
    assert page.get_by_label("Notes", exact=True).input_value() == "hit rate dips in layer 3"
    page.goto(f"{server.url}/?q=FIGURE-3")
    page.wait_for_selector("#run-table tbody tr")
    rows = page.locator("#run-table tbody tr")
    assert rows.count() == 1 and rows.nth(0).get_attribute("data-run-id") == str(run["id"])
    assert "figure-3" in rows.nth(0).locator(".tags").inner_text()
    page.get_by_label("Search").fill("layer 3 dips")
    page.get_by_role("button", name="Apply filters").click()
    page.wait_for_function(
        "() => /1 of 1 runs/.test(document.querySelector('.page-info').textContent)"
    )
    page.screenshot(path=str(screenshots / "run-table-search.png"), full_page=True)
    page.goto(f"{server.url}/runs/{run['id']}")
    page.wait_for_selector("#layer-table")

    page.get_by_role("link", name=f"run #{baseline['id']}").click()
    page.wait_for_selector("#layer-table")
    assert page.url.endswith(f"/runs/{baseline['id']}")
    assert "itself: a baseline" in page.locator("#summary").inner_text()

    # Its experiment's page: counts, both runs linked, the spec as submitted.
    page.get_by_role("link", name=f"experiment #{experiment['id']}").click()
    page.wait_for_selector("#run-table tbody tr")
    assert page.locator("h1").inner_text() == f"Experiment #{experiment['id']}: run page"
    assert "2 (2 done, 0 running" in page.locator("#summary").inner_text()
    assert page.locator("#run-table tbody tr").count() == 2
    spec_text = page.locator("#spec").inner_text()
    assert "name: run page" in spec_text and "signature_bits: 8" in spec_text
    page.screenshot(path=str(screenshots / "experiment-page.png"), full_page=True)
    # Clone: the submit form filled from the stored spec, ready to change and submit.
    page.get_by_role("link", name="Clone to the submit form").click()
    page.wait_for_selector("#spec-form[data-ready=true]")
    assert page.get_by_label("Experiment name").input_value() == "run page (copy)"
    assert page.get_by_label("MERCURY", exact=True).is_checked()
    assert not page.get_by_label("SparseTrain", exact=True).is_checked()
    assert page.get_by_label("edge", exact=True).is_checked()
    assert not page.get_by_label("tpu-like", exact=True).is_checked()
    assert page.get_by_label("Train samples", exact=True).input_value() == "256"
    page.wait_for_function("() => /2 runs/.test(document.getElementById('preview').textContent)")
    cloned = page.locator("#spec-text").inner_text()
    assert "signature_bits: 8" in cloned and "train_samples: 256" in cloned
    page.screenshot(path=str(screenshots / "submit-cloned.png"), full_page=True)
    page.go_back()
    page.wait_for_selector("#run-table tbody tr")
    page.get_by_role("link", name=f"#{run['id']}", exact=True).click()
    page.wait_for_selector("#layer-table")
    assert page.url.endswith(f"/runs/{run['id']}")

    # Delete, confirmed in place: the baseline is refused while the run still refers to it.
    page.goto(f"{server.url}/runs/{baseline['id']}")
    page.wait_for_selector("#layer-table")
    page.get_by_role("button", name="Delete run").click()
    page.get_by_role("button", name="Keep").click()  # changed one's mind: nothing happens
    page.get_by_role("button", name="Delete run").click()
    page.get_by_role("button", name="Yes, delete").click()
    page.wait_for_function(
        "() => /baseline of 1 other run/.test(document.getElementById('page-errors').textContent)"
    )
    page.goto(f"{server.url}/runs/{run['id']}")
    page.wait_for_selector("#layer-table")
    page.get_by_role("button", name="Delete run").click()
    page.get_by_role("button", name="Yes, delete").click()
    page.wait_for_url(f"{server.url}/experiments/{experiment['id']}")
    page.wait_for_selector("#run-table tbody tr")
    assert page.locator("#run-table tbody tr").count() == 1
    page.get_by_role("button", name="Delete experiment").click()
    page.screenshot(path=str(screenshots / "experiment-delete-confirm.png"), full_page=True)
    page.get_by_role("button", name="Yes, delete").click()
    page.wait_for_url(f"{server.url}/")
    assert httpx.get(f"{server.url}/api/v1/experiments/{experiment['id']}").status_code == 404
    errors = [e for e in console.errors if "409" not in e]  # the refused delete, on purpose
    assert errors == []


def test_run_page_shows_why_a_run_failed(
    server: Server, browser: Browser, screenshots: Path
) -> None:
    reason = "dataset_path: no idx files under the folder"
    with session_scope(server.database_url) as db:
        experiment = Experiment(
            owner_id=local_user(db).id, name="failed", spec={"name": "failed"}, status="failed"
        )
        db.add(experiment)
        db.flush()
        run = Run(
            experiment_id=experiment.id,
            technique="baseline",
            technique_params=[{"name": "baseline"}],
            model="mlp",
            dataset="idx-dir",
            training_config={**TINY_TRAINING, "dataset": "idx-dir"},
            accelerator_name="edge",
            accelerator_config={"name": "edge"},
            params={},
            is_baseline=True,
            status="failed",
            error=reason,
        )
        db.add(run)
        db.flush()
        run_id = run.id
    console = ConsoleLog()
    page = browser.new_context(viewport={"width": 1400, "height": 800}).new_page()
    console.watch(page)
    page.goto(f"{server.url}/runs/{run_id}")
    page.wait_for_selector(".failure-reason")
    assert page.locator(".failure-reason").inner_text() == reason
    # The layer section fills from its own request, after the summary.
    expect(page.locator("#layers")).to_contain_text("no results yet (failed)")
    page.screenshot(path=str(screenshots / "run-page-failed.png"), full_page=True)
    assert console.errors == []


def test_a_failed_run_is_retried_from_its_page_and_keeps_its_first_attempt(
    server: Server, browser: Browser, screenshots: Path
) -> None:
    missing = {**TINY_TRAINING, "dataset": "idx-dir", "dataset_path": "not-there"}
    spec = {**SPEC, "name": "retried", "training": missing, "techniques": [{"name": "baseline"}]}
    experiment = httpx.post(f"{server.url}/api/v1/experiments", json=spec).json()
    [run] = finished_runs(server, experiment["id"])
    assert run["status"] == "failed"
    console = ConsoleLog()
    page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
    console.watch(page)
    page.goto(f"{server.url}/runs/{run['id']}")
    page.wait_for_selector("#attempts p")
    assert page.locator("#attempts").inner_text() == "This is the run's first attempt."
    page.get_by_role("button", name="Retry run").click()
    assert "as attempt 2 (this attempt is kept)?" in page.locator("#run-actions").inner_text()
    with page.expect_navigation():
        page.get_by_role("button", name="Yes, retry").click()
    page.wait_for_selector("#attempt-table")
    cells = page.locator("#attempt-table tbody tr").first.locator("td").all_inner_texts()
    assert cells[:3] == ["1", "failed", run["error"]]
    summary = page.locator("#summary").inner_text()
    assert "2 (earlier ones below)" in summary

    [again] = finished_runs(server, experiment["id"])  # the data is still missing
    assert (again["status"], again["attempt"]) == ("failed", 2)
    page.reload()
    page.wait_for_selector("#attempt-table")
    assert page.get_by_role("button", name="Retry run").is_visible()
    page.screenshot(path=str(screenshots / "run-page-retried.png"), full_page=True)
    assert console.errors == []
