"""Through the browser: specs open in the submit form from a file or a paste, and submit as
written.

Every file of examples/ (the quick start, the paper miniatures and their full versions) is
loaded in the form and submitted; the experiment the server stored holds the spec the file holds
(both normalised by the server's own model, which fills the defaults the file leaves out). What
the form cannot show (a composition other than "all checked techniques", a second custom
accelerator, `sweep.seed`, a key it does not know) is kept, listed, and submitted in its place.
The server runs without a worker: nothing here trains."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from playwright.sync_api import Browser, BrowserContext, Page

from backend.specs.experiment import ExperimentSpec
from tests.browser.conftest import ConsoleLog, Server, serving
from tests.conftest import ROOT, orrery_env

pytestmark = pytest.mark.browser

EXAMPLES = sorted((ROOT / "examples").rglob("*.yaml"))
EXPECTED_422 = "the server responded with a status of 422"
# What the form keeps of each example, and why (every other example it shows whole).
KEPT = {
    "examples/all-techniques.yaml": ["techniques[3]: the composition mercury + sparsetrain"],
    "examples/random-accelerators.yaml": ["sweep.seed = 1: no field of the form holds it"],
    "examples/design-search.yaml": [
        "search: a hardware design search: the form has no fields for it, it is submitted as "
        "written"
    ],
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data_dir = tmp_path_factory.mktemp("orrery-specs")
    with serving(data_dir, orrery_env(ORRERY_DATA_DIR=str(data_dir)), "--no-with-worker") as s:
        yield s


def watched_page(browser: Browser) -> tuple[BrowserContext, Page, ConsoleLog]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    console = ConsoleLog()
    console.watch(page)
    return context, page, console


def normalised(spec: dict[str, Any]) -> dict[str, Any]:
    """A spec as the server stores it: validated, every default filled in."""
    return ExperimentSpec.model_validate(spec).model_dump(mode="json")


def stored_spec(server: Server, experiment_id: str) -> dict[str, Any]:
    answer = httpx.get(f"{server.url}/api/v1/experiments/{experiment_id}", timeout=10)
    assert answer.status_code == 200, answer.text
    return answer.json()["spec"]


def open_submit(page: Page, server: Server) -> None:
    page.goto(f"{server.url}/submit")
    page.wait_for_selector('#spec-form[data-ready="true"]')


def wait_for_preview(page: Page) -> str:
    page.wait_for_function(
        "() => /^\\d+ runs? |refused|fix the marked/.test(document.getElementById('preview')"
        ".textContent)"
    )
    return page.locator("#preview").inner_text()


def kept_notes(page: Page) -> list[str]:
    box = page.locator("#kept")
    return box.locator("li").all_inner_texts() if box.is_visible() else []


def submit(page: Page) -> str:
    page.get_by_role("button", name="Submit experiment").click()
    page.wait_for_url(re.compile(r"/\?experiment_id=\d+"))
    return page.url.rsplit("=", 1)[1]


def paste(page: Page, text: str) -> None:
    page.get_by_role("button", name="Paste YAML or JSON…").click()
    page.get_by_label("Spec (YAML or JSON)").fill(text)
    page.get_by_role("button", name="Open in the form").click()


def test_every_example_opens_in_the_form_and_submits_as_written(
    server: Server, browser: Browser, screenshots: Path
) -> None:
    assert len(EXAMPLES) >= 11  # the quick start, the examples, the miniatures and full ones
    context, page, console = watched_page(browser)
    for path in EXAMPLES:
        name = str(path.relative_to(ROOT))
        written = yaml.safe_load(path.read_text())
        open_submit(page, server)
        page.get_by_label("Load a YAML or JSON file").set_input_files(path)
        page.wait_for_function(
            "() => /^Opened/.test(document.getElementById('notice').textContent)"
        )
        assert re.match(r"\d+ runs ", wait_for_preview(page)), (
            name,
            page.locator("#form-errors").inner_text(),
        )
        # The name as written (" (copy)" is only for a clone), the kept parts listed.
        assert page.get_by_label("Experiment name").input_value() == written["name"], name
        assert kept_notes(page) == KEPT.get(name, []), name
        # The YAML view reads back (as the CLI reads it) to the same spec, once it has redrawn.
        page.wait_for_function(
            "(name) => document.getElementById('spec-text').textContent.includes(name)",
            arg=written["name"],
        )
        shown = yaml.safe_load(page.locator("#spec-text").inner_text())
        assert normalised(shown) == normalised(written), name
        if name == "examples/all-techniques.yaml":
            page.screenshot(path=screenshots / "spec-file-all-techniques.png", full_page=True)
        experiment_id = submit(page)
        assert stored_spec(server, experiment_id) == normalised(written), name
    assert console.errors == []
    context.close()


KEPT_PARTS = """
name: kept parts
training: {model: mlp, dataset: digits, epochs: 1, train_samples: 64, test_samples: 32}
techniques:
  - {name: mercury, signature_bits: 16}
  - {name: adagp}
  - [{name: mercury, signature_bits: 16}, {name: sparsetrain}]
  - {name: sparsetrain, prune_rate: 0.5}
  - {name: sparsetrain, prune_rate: 0.8}
accelerators:
  - {name: wide, rows: 64, cols: 16}
  - edge
  - {name: narrow, rows: 8, cols: 8}
sweep:
  mode: random
  samples: 3
  seed: 7
  parameters:
    accelerator.dram_bandwidth: {low: 1, high: 16, log: true}
"""


def test_a_pasted_spec_keeps_what_the_form_cannot_show(
    server: Server, browser: Browser, screenshots: Path
) -> None:
    context, page, console = watched_page(browser)
    open_submit(page, server)

    # Not YAML: the dialog says where, and stays open with the text.
    paste(page, "name: [unclosed\ntechniques: x")
    error = page.locator("#paste-error")
    error.wait_for()
    assert error.inner_text().startswith("not YAML or JSON:"), error.inner_text()
    assert page.locator("#paste-dialog").is_visible()
    page.get_by_role("button", name="Cancel").click()

    paste(page, KEPT_PARTS)
    assert re.match(r"\d+ runs ", wait_for_preview(page)), page.locator("#form-errors").inner_text()
    assert not page.locator("#paste-dialog").is_visible()
    assert kept_notes(page) == [
        "techniques[2]: the composition mercury + sparsetrain",
        "techniques[4] (sparsetrain): a second sparsetrain, with its own knobs",
        "accelerators[2] (narrow): a second custom accelerator",
        "sweep.seed = 7: no field of the form holds it",
    ]
    # The form shows the rest: the first custom accelerator, the single techniques' knobs.
    assert page.get_by_label("Custom accelerator", exact=True).is_checked()
    assert page.locator("#f-accelerator-rows").input_value() == "64"
    assert page.get_by_label("ADA-GP", exact=True).is_checked()
    assert not page.get_by_label("Also run the checked techniques composed in one run").is_checked()
    page.screenshot(path=screenshots / "spec-paste-kept.png", full_page=True)
    experiment_id = submit(page)
    assert stored_spec(server, experiment_id) == normalised(yaml.safe_load(KEPT_PARTS))

    # A key the form does not know is kept too, so the server names it and nothing is lost.
    open_submit(page, server)
    paste(page, "name: typo\ntechniques: [{name: adagp}]\nseed: 3\n")
    assert wait_for_preview(page) == "the server refused this spec"
    assert kept_notes(page) == ["seed: not a field the form knows"]
    assert "seed: Extra inputs are not permitted" in page.locator("#form-errors").inner_text()
    page.get_by_role("button", name="Leave them out").click()
    assert re.match(r"\d+ runs ", wait_for_preview(page))
    assert "seed: 3" not in page.locator("#spec-text").inner_text()
    assert [e for e in console.errors if EXPECTED_422 not in e] == []
    context.close()


def test_fields_have_human_titles_and_no_team_picker_in_single_user_mode(
    server: Server, browser: Browser, screenshots: Path
) -> None:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    open_submit(page, server)
    labels = page.locator("#form-body label").all_inner_texts()
    for title in ["BatchNorm recalibration images", "Learning rate schedule", "Batch size",
                  "Ifmap SRAM (KiB)", "Clock (MHz)", "DRAM bandwidth", "Predictor learning rate",
                  "Min GP batches"]:  # fmt: skip
        assert title in labels, title
    raw = [label for label in labels if re.search(r"\b(Bn|Lr|Id|Dram|Sram|Mhz|Kib)\b", label)]
    assert raw == []
    assert not page.locator("#f-team_id").is_visible()
    assert "Team" not in " ".join(page.locator("#form-body label:visible").all_inner_texts())
    page.locator("#form-body fieldset").first.screenshot(path=screenshots / "spec-titles.png")
    page.close()
