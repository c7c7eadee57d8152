"""Through the browser: a design search's page, on a search of 20,000 designs evaluated by the
server's own worker on the stored workloads of a real (tiny) training.

The page follows the search while it runs, draws the kept designs with WebGL (over 20,000
points), each technique's front and its fastest-design-within-area line (checked against the
search's own fronts and a brute-force filter here, and on the screen's pixels), shows a design's
fields on hover, opens the design a real mouse click lands on, and makes it runs. Its bounds
filter in the browser exactly as the Python filter below does, and name the fastest design per
technique within them. A search the user may not see is answered as a missing page.
"""

from __future__ import annotations

import base64
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from playwright.sync_api import Browser, Page

from backend.db.models import DesignSearchRow, Experiment, User
from backend.db.session import session_scope
from backend.numbers import format_value
from backend.specs.accelerator import hardware
from backend.specs.experiment import ExperimentSpec
from tests.browser.conftest import ConsoleLog, Server
from tests.pipeline.conftest import TINY_TRAINING

pytestmark = pytest.mark.browser

DESIGNS = 20_000
SEARCH: dict[str, Any] = {
    "base": "edge",
    "mode": "random",
    "samples": DESIGNS,
    "seed": 3,
    "parameters": {
        "rows": {"low": 4, "high": 64, "log": True},
        "cols": {"low": 4, "high": 64, "log": True},
        "dataflow": {"values": ["os", "ws", "is"]},
        "ifmap_sram_kib": {"low": 8, "high": 512, "log": True},
        "dram_bandwidth": {"low": 1, "high": 32, "log": True},
        "clock_mhz": {"low": 200, "high": 1000},
    },
    "sample_size": 10_000,  # per technique: with the baseline's, over 20,000 points
    "chunk_size": 2_000,
}
SPEC = {
    "name": "design space page",
    "training": TINY_TRAINING,
    "techniques": [{"name": "sparsetrain", "prune_rate": 0.9}],
    "accelerators": ["edge"],
    "search": SEARCH,
}
FIGURES = ("time_s", "energy_j", "area_mm2")
EXPECTED_404 = "the server responded with a status of 404"
HERE = Path(__file__).parent
ISOLATED_FRONT_POINT = (HERE / "isolated_front_point.js").read_text()
COLOUR_PIXELS = (HERE / "colour_pixels.js").read_text()
CHART = "document.getElementById('design-chart')"
# Every status and progress text the page shows, as it changes them.
RECORD_STATUSES = """() => {
  window.statusesSeen = [];
  const summary = document.getElementById('summary');
  new MutationObserver(() => {
    const badge = summary.querySelector('.badge');
    const progress = summary.querySelector('#search-progress');
    if (badge) window.statusesSeen.push([badge.textContent, progress ? progress.textContent : '']);
  }).observe(summary, { childList: true, subtree: true });
}"""


@pytest.fixture(scope="module")
def submitted(server: Server) -> dict[str, int]:
    """The experiment with its search, just submitted: it trains, then searches."""
    experiment = httpx.post(f"{server.url}/api/v1/experiments", json=SPEC, timeout=30)
    assert experiment.status_code == 201, experiment.text
    (search,) = httpx.get(
        f"{server.url}/api/v1/experiments/{experiment.json()['id']}/searches"
    ).json()
    return {"experiment": experiment.json()["id"], "search": search["id"]}


def finished(server: Server, search_id: int, timeout: float = 240) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        search = httpx.get(f"{server.url}/api/v1/searches/{search_id}").json()
        if search["status"] not in ("waiting", "running"):
            assert search["status"] == "done", search
            return search
        time.sleep(1)
    raise AssertionError(f"search {search_id} unfinished after {timeout}s")


def api(server: Server, path: str) -> Any:
    response = httpx.get(f"{server.url}/api/v1{path}", timeout=60)
    assert response.status_code == 200, response.text
    return response.json()


# ---- the Python side: the same data filtered and answered here


def design_of(sample: dict[str, Any], label: str, p: int) -> int:
    return sample["designs"]["index"][sample["techniques"][label]["row"][p]]


def within(sample: dict[str, Any], label: str, limits: dict[str, float | None]) -> list[int]:
    """Positions of `label`'s points meeting every bound."""
    series = sample["techniques"][label]

    def value(bound: str, p: int) -> float:
        if bound == "sram_kib":
            return sample["designs"]["sram_kib"][series["row"][p]]
        return series[bound][p]

    bounds = {b: v for b, v in limits.items() if v is not None}
    return [
        p for p in range(len(series["row"])) if all(value(b, p) <= v for b, v in bounds.items())
    ]


def fastest(sample: dict[str, Any], label: str, positions: list[int]) -> int:
    series = sample["techniques"][label]
    return min(
        positions,
        key=lambda p: (*(series[f][p] for f in FIGURES), design_of(sample, label, p)),
    )


def time_area_front(
    sample: dict[str, Any], label: str, positions: list[int]
) -> set[tuple[float, float]]:
    """(area, time) of every point no other point is at least as good as in both: each point
    against every other (numpy, a block of points at a time)."""
    series = sample["techniques"][label]
    area = np.array([series["area_mm2"][p] for p in positions])
    time_s = np.array([series["time_s"][p] for p in positions])
    kept = []
    for start in range(0, len(positions), 1000):
        a, t = area[start : start + 1000, None], time_s[start : start + 1000, None]
        dominated = ((area <= a) & (time_s <= t) & ((area < a) | (time_s < t))).any(axis=1)
        kept += [i for i, d in enumerate(dominated, start) if not d]
    return {(float(area[i]), float(time_s[i])) for i in kept}


# ---- reading the page


def traces(page: Page) -> list[dict[str, Any]]:
    """The chart's traces as Plotly holds them: kind, label, type, points."""
    return page.evaluate(
        f"""() => {CHART}.data.map((t) => ({{
            name: t.name, type: t.type, meta: t.meta || {{}}, x: t.x, y: t.y,
            customdata: t.customdata || [], visible: t.visible }}))"""
    )


def trace(all_traces: list[dict[str, Any]], label: str, kind: str) -> dict[str, Any]:
    (found,) = [t for t in all_traces if t["name"] == f"{label}: {kind}"]
    return found


def toggle(page: Page, name: str, visible: bool | str) -> None:
    """Click a trace's legend entry (which shows or hides it) and wait for it to be `visible`
    (before the next click: two clicks in a row would be the legend's double click)."""
    text = page.locator("text.legendtext", has_text=name)
    page.locator("#design-chart g.traces", has=text).locator("rect.legendtoggle").click()
    page.wait_for_function(
        f"([name, visible]) => {CHART}.data.find((t) => t.name === name).visible === visible",
        arg=[name, visible],
    )


def wait_redrawn(page: Page, before: str) -> None:
    page.wait_for_function(f"(before) => {CHART}.dataset.drawn !== before", arg=before)


def drawn_count(page: Page) -> str:
    return page.evaluate(f"() => {CHART}.dataset.drawn")


def test_the_page_follows_the_search_draws_its_designs_and_opens_a_clicked_one(
    server: Server, browser: Browser, screenshots: Path, submitted: dict[str, int]
) -> None:
    search_id = submitted["search"]
    console = ConsoleLog()
    page = browser.new_context(viewport={"width": 1500, "height": 1100}).new_page()
    console.watch(page)

    # From the experiment's page, its search's link, while the search waits for the trainings.
    page.goto(f"{server.url}/experiments/{submitted['experiment']}")
    page.get_by_role("link", name=f"design search #{search_id}").click()
    page.wait_for_selector("#summary .badge")
    assert page.url == f"{server.url}/searches/{search_id}"
    status = page.locator("#summary .badge").inner_text()
    assert status in ("waiting", "running"), status
    assert page.get_by_role("button", name="Cancel search").is_visible()
    page.evaluate(RECORD_STATUSES)
    page.screenshot(path=str(screenshots / "design-space-waiting.png"), full_page=True)

    # Followed by the page itself (no reload): running with its progress, then done, its
    # designs drawn with WebGL.
    page.wait_for_selector("#summary .badge.running", timeout=240_000)
    page.screenshot(path=str(screenshots / "design-space-running.png"), full_page=True)
    page.wait_for_selector("#summary .badge.done", timeout=240_000)
    seen = page.evaluate("() => window.statusesSeen")
    assert any(s == "running" and "chunks" in progress for s, progress in seen), seen
    finished(server, search_id)
    sample = api(server, f"/searches/{search_id}/sample")
    fronts = api(server, f"/searches/{search_id}/fronts")["fronts"]
    page.wait_for_function(
        f"""(n) => ({CHART}.data || []).filter((t) => t.name.endsWith(': designs'))
            .reduce((s, t) => s + t.x.length, 0) === n""",
        arg=sum(len(series["row"]) for series in sample["techniques"].values()),
        timeout=60_000,
    )
    assert page.get_by_role("button", name="Cancel search").count() == 0
    labels = sorted(sample["techniques"])
    assert labels == ["baseline", "sparsetrain"]
    shown = traces(page)
    designs_drawn = sum(len(trace(shown, label, "designs")["x"]) for label in labels)
    assert designs_drawn >= 20_000, designs_drawn
    assert {t["type"] for t in shown} == {"scattergl"}
    assert page.locator("#design-chart canvas").count() >= 1
    legend = page.locator("#design-chart .legendtext").all_text_contents()
    for label in labels:
        # Its front: the search's front, every design of it; its line: the time-area front.
        front = {p["index"] for p in fronts[label]}
        assert set(trace(shown, label, "front")["customdata"]) == front
        line = trace(shown, label, "fastest within area")
        everything = list(range(len(sample["techniques"][label]["row"])))
        assert set(zip(line["x"], line["y"], strict=True)) == time_area_front(
            sample, label, everything
        )
        assert f"{label}: front" in legend and f"{label}: fastest within area" in legend
    # On the screen: with the designs hidden (their legend entries clicked), the fronts' and
    # lines' colours are there.
    colours = page.evaluate(
        f"() => {CHART}._fullData.filter((t) => t.mode === 'lines').map((t) => t.line.color)"
    )
    before = page.locator("#design-chart").screenshot()
    for label in labels:
        toggle(page, f"{label}: designs", "legendonly")
    page.wait_for_timeout(300)
    after = page.locator("#design-chart").screenshot()
    counts = page.evaluate(COLOUR_PIXELS, [base64.b64encode(after).decode(), colours])
    assert all(n > 200 for n in counts), (colours, counts)
    (screenshots / "design-space-fronts.png").write_bytes(after)
    (screenshots / "design-space.png").write_bytes(before)
    for label in labels:
        toggle(page, f"{label}: designs", True)

    # The answer beside the chart, over every design: the fastest per technique.
    rows = page.locator("#fastest-table tbody tr")
    for label in labels:
        p = fastest(sample, label, list(range(len(sample["techniques"][label]["row"]))))
        row = page.locator(f"#fastest-table tbody tr[data-technique='{label}']")
        assert row.get_attribute("data-design") == str(design_of(sample, label, p))
        cells = row.locator("td").all_inner_texts()
        series = sample["techniques"][label]
        assert cells[1:4] == [
            format_value(series["time_s"][p], "s"),
            format_value(series["energy_j"][p] * 1e12, "pJ"),
            format_value(series["area_mm2"][p], "mm²"),
        ]
    assert rows.count() == len(labels)

    # Hover and a real click on a sparsetrain front point no other design is near.
    page.locator("#design-chart").scroll_into_view_if_needed()
    target = page.evaluate(ISOLATED_FRONT_POINT, "sparsetrain")
    assert target and target["gap"] > 6, target
    page.mouse.move(target["x"], target["y"])
    hover = page.locator("#design-chart .hoverlayer .hovertext")
    hover.wait_for()
    hover_text = hover.text_content() or ""
    assert f"design #{target['index']}" in hover_text
    for field in SEARCH["parameters"]:
        assert f"{field}:" in hover_text
    page.screenshot(path=str(screenshots / "design-space-hover.png"))
    page.mouse.click(target["x"], target["y"])
    page.wait_for_selector("#design:not([hidden])")
    assert page.locator("#design-title").inner_text() == f"Design #{target['index']}"
    assert page.url.endswith(f"#design-{target['index']}")
    assert "On the front of" in page.locator("#design-front").inner_text()
    row = sample["designs"]["index"].index(target["index"])
    fields = page.locator("#design-fields").inner_text()
    # Each field in the unit AcceleratorConfig declares for it (the page reads the JSON schema).
    for path in ("rows", "clock_mhz", "dram_bandwidth"):
        value = sample["designs"]["fields"][path][row]
        assert f"{path}\n{format_value(value)} {hardware(path).unit}" in fields
    assert hardware("ifmap_sram_kib").unit == "KiB"
    sram = sample["designs"]["fields"]["ifmap_sram_kib"][row]
    assert f"ifmap_sram_kib\n{format_value(sram * 1024, 'bytes')}" in fields

    # Made into runs: one per training, on the design's accelerator.
    page.get_by_role("button", name="Make runs of this design").click()
    page.wait_for_selector(".design-message a[href^='/runs/']")
    assert page.locator(".design-message").inner_text().startswith("Made 2 runs")
    runs = httpx.get(
        f"{server.url}/api/v1/runs",
        params={"experiment_id": submitted["experiment"], "limit": 100},
    ).json()["items"]
    named = [r for r in runs if r["accelerator_name"] == f"search {search_id} #{target['index']}"]
    assert len(named) == 2
    # Or saved as the user's own accelerator, under a name of theirs.
    page.get_by_label("Name", exact=True).fill("fast corner")
    page.get_by_role("button", name="Save as my accelerator").click()
    page.wait_for_selector(".design-message:has-text('fast corner')")
    (saved,) = api(server, "/accelerators")
    assert saved["name"] == "fast corner" and saved["design_index"] == target["index"]
    page.screenshot(path=str(screenshots / "design-space-opened.png"), full_page=True)
    assert console.errors == []


def test_bounds_filter_in_the_browser_as_python_does(
    server: Server, browser: Browser, screenshots: Path, submitted: dict[str, int]
) -> None:
    search_id = submitted["search"]
    finished(server, search_id)
    sample = api(server, f"/searches/{search_id}/sample")
    labels = sorted(sample["techniques"])
    console = ConsoleLog()
    page = browser.new_context(viewport={"width": 1500, "height": 1100}).new_page()
    console.watch(page)
    page.goto(f"{server.url}/searches/{search_id}")
    page.wait_for_selector("#design-chart[data-drawn]", timeout=60_000)

    def quantile(values: list[float], q: float) -> float:
        return float(f"{sorted(values)[int(q * (len(values) - 1))]:.3g}")

    every = {key: [v for s in sample["techniques"].values() for v in s[key]] for key in FIGURES}
    limits: dict[str, float | None] = {
        "area_mm2": quantile(every["area_mm2"], 0.3),
        "time_s": None,
        "energy_j": quantile(every["energy_j"], 0.6),
        "sram_kib": quantile(sample["designs"]["sram_kib"], 0.8),
    }

    def check(limits: dict[str, float | None]) -> None:
        shown = traces(page)
        total = 0
        for label in labels:
            expected = within(sample, label, limits)
            drawn = trace(shown, label, "designs")["customdata"]
            assert sorted(drawn) == sorted(design_of(sample, label, p) for p in expected)
            total += len(expected)
            best = fastest(sample, label, expected)
            row = page.locator(f"#fastest-table tbody tr[data-technique='{label}']")
            assert row.get_attribute("data-design") == str(design_of(sample, label, best))
        points = sum(len(s["row"]) for s in sample["techniques"].values())
        assert page.locator("#bounds-count").inner_text() == (
            f"{format_value(total)} of {format_value(points)} points meet the bounds"
        )

    for bound, value in limits.items():
        if value is not None:
            before = drawn_count(page)
            page.locator(f"#bound-{bound}").fill(str(value))
            wait_redrawn(page, before)
    check(limits)
    assert "area_mm2=" in page.url and "energy_j=" in page.url and "sram_kib=" in page.url
    answer = page.locator("#answer").inner_text()
    assert answer.startswith(f"Within area ≤ {format_value(limits['area_mm2'], 'mm²')}")
    page.screenshot(path=str(screenshots / "design-space-bounds.png"), full_page=True)

    # The area slider's last position is no bound.
    before = drawn_count(page)
    page.locator("#slider-area_mm2").focus()
    page.keyboard.press("End")
    wait_redrawn(page, before)
    assert page.locator("#bound-area_mm2").input_value() == ""
    check({**limits, "area_mm2": None})

    # The same view from its address.
    page.goto(page.url)
    page.wait_for_selector("#design-chart[data-drawn]", timeout=60_000)
    check({**limits, "area_mm2": None})
    assert console.errors == []


def test_without_webgl_the_page_draws_the_same_points_as_svg(
    server: Server, browser: Browser, screenshots: Path, submitted: dict[str, int]
) -> None:
    search_id = submitted["search"]
    finished(server, search_id)
    sample = api(server, f"/searches/{search_id}/sample")
    page = browser.new_context(viewport={"width": 1500, "height": 1100}).new_page()
    # A browser without WebGL: no canvas gives a WebGL context.
    page.add_init_script(
        """const getContext = HTMLCanvasElement.prototype.getContext;
        HTMLCanvasElement.prototype.getContext = function (kind, ...rest) {
          return /webgl/.test(kind) ? null : getContext.call(this, kind, ...rest);
        };"""
    )
    limits = {"area_mm2": 1.5, "time_s": None, "energy_j": None, "sram_kib": None}
    page.goto(f"{server.url}/searches/{search_id}?area_mm2=1.5")
    page.wait_for_selector("#design-chart[data-drawn]", timeout=60_000)
    shown = traces(page)
    assert {t["type"] for t in shown} == {"scatter"}
    for label in sample["techniques"]:
        expected = within(sample, label, limits)
        assert len(expected) > 0
        drawn = trace(shown, label, "designs")["customdata"]
        assert sorted(drawn) == sorted(design_of(sample, label, p) for p in expected)
    assert page.locator("#design-chart .scatterlayer .point").count() > 0
    assert "no WebGL" in page.locator("#chart-note").inner_text()
    page.screenshot(path=str(screenshots / "design-space-svg.png"), full_page=True)


def test_a_search_of_someone_elses_experiment_is_a_missing_page(
    server: Server, browser: Browser, screenshots: Path
) -> None:
    with session_scope(server.database_url) as db:
        other = User(email="someone@example.org", display_name="Someone")
        db.add(other)
        db.flush()
        experiment = Experiment(
            owner_id=other.id, name="theirs", spec={"name": "theirs"}, status="done"
        )
        db.add(experiment)
        db.flush()
        search = DesignSearchRow(
            experiment_id=experiment.id,
            created_by=other.id,
            spec=ExperimentSpec.model_validate(SPEC).search.model_dump(mode="json"),
            status="cancelled",
        )
        db.add(search)
        db.flush()
        search_id = search.id
    assert httpx.get(f"{server.url}/api/v1/searches/{search_id}").status_code == 404
    console = ConsoleLog()
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    console.watch(page)
    page.goto(f"{server.url}/searches/{search_id}")
    page.wait_for_function("() => document.getElementById('page-errors').textContent")
    errors = page.locator("#page-errors").inner_text()
    assert f"Cannot show design search {search_id}" in errors and "404" in errors, errors
    assert page.locator("main h2:visible, main h3:visible").count() == 0
    page.screenshot(path=str(screenshots / "design-space-not-found.png"), full_page=True)
    assert [e for e in console.errors if EXPECTED_404 not in e] == []
    page.close()
