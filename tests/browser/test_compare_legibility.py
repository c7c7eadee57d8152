"""Through the browser: the compare page stays legible with 50 runs, 6 swept parameters, 12
epochs and ResNet-style layer names: no two text labels of a chart overlap (ticks, legends,
titles, annotations, axis labels); the curves say what their line styles mean; parallel
coordinates order numeric categories by value and give seeds one tick each."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page

from backend.api.security import local_user
from backend.db.models import EpochMetric, Experiment, LayerResult, Run, Training
from backend.db.session import session_scope
from backend.numbers import format_estimate
from tests.browser.conftest import ConsoleLog, Server
from tests.browser.test_dashboard_flow import CHARTS, wait_for_charts

pytestmark = pytest.mark.browser

RUNS = 50
TECHNIQUES = ["baseline", "mercury", "sparsetrain", "adagp", "mercury+sparsetrain"]
LAYERS = [
    "conv1", "layer1.0.conv1", "layer1.0.conv2", "layer2.0.conv1", "layer2.0.conv2",
    "layer2.0.shortcut.0", "layer3.0.conv1", "layer3.0.conv2", "layer3.0.shortcut.0", "fc",
]  # fmt: skip
EPOCHS = 12
PASSES = ["fwd", "bwd_data", "bwd_weight"]


def swept_values(rng: random.Random) -> dict[str, float | int]:
    return {
        "accelerator.rows": rng.choice([8, 16, 32, 64]),
        "accelerator.cols": rng.choice([8, 16, 32, 64]),
        "accelerator.dram_bandwidth": rng.choice([2.0, 4.0, 8.0, 16.0]),
        "accelerator.clock_mhz": rng.choice([200.0, 500.0, 1000.0]),
        "training.learning_rate": rng.choice([0.01, 0.03, 0.1]),
    }


def seed_runs(server: Server) -> list[int]:
    """RUNS finished runs of five techniques on sampled accelerators, each with per-layer
    results, an energy summary and three epochs, as the worker stores them."""
    rng = random.Random(7)
    with session_scope(server.database_url) as db:
        experiment = Experiment(
            owner_id=local_user(db).id, name="legibility", spec={"name": "x"}, status="done"
        )
        db.add(experiment)
        db.flush()
        run_ids = []
        for i in range(RUNS):
            technique = TECHNIQUES[i % len(TECHNIQUES)]
            params: dict[str, float | int] = swept_values(rng)
            if "mercury" in technique:  # the others have no signature (shown as "–")
                params["mercury.signature_bits"] = rng.choice([8, 16, 32])
            training = Training(
                experiment_id=experiment.id, key=f"k{i}", technique=technique,
                technique_params=[], training_config={}, status="done",
            )  # fmt: skip
            db.add(training)
            db.flush()
            accelerator = {
                "name": "sampled",
                "rows": params["accelerator.rows"],
                "cols": params["accelerator.cols"],
                "dataflow": "os",
                "clock_mhz": params["accelerator.clock_mhz"],
                "dram_bandwidth": params["accelerator.dram_bandwidth"],
                "word_bytes": 4,
            }
            cycles = rng.randint(400_000, 2_000_000)
            run = Run(
                experiment_id=experiment.id, training_id=training.id, technique=technique,
                technique_params=[], model="vgg-small", dataset="fashion-mnist",
                training_config={}, accelerator_name="sampled", accelerator_config=accelerator,
                params={"technique": technique, "accelerator": "sampled", "seed": i % 3, **params},
                seed=i % 3, status="done", progress=1.0, is_baseline=technique == "baseline",
                accuracy=rng.uniform(0.82, 0.9), speedup=1_000_000 / cycles,
                energy_ratio=rng.uniform(0.5, 1.2), total_cycles=cycles,
                seconds=cycles / (params["accelerator.clock_mhz"] * 1e6),
                compute_cycles=cycles // 2, stall_cycles=cycles - cycles // 2,
                energy_pj=rng.uniform(1e8, 5e8), macs_algorithmic=10**9,
                macs_actual=rng.randint(3 * 10**8, 10**9), macs_skipped=rng.randint(0, 10**8),
                macs_overhead=rng.randint(0, 10**8), dram_bytes=rng.randint(10**6, 10**7),
                summary={
                    "energy_by_level": {"mac": 1e8, "register": 5e7, "sram": 8e7, "dram": 2e8},
                    "energy_by_operand": {"ifmap": 1e8, "filter": 6e7, "ofmap": 7e7},
                },
            )  # fmt: skip
            db.add(run)
            db.flush()
            for position, (layer, pass_) in enumerate(
                (layer, pass_) for layer in LAYERS for pass_ in PASSES
            ):
                db.add(
                    LayerResult(
                        run_id=run.id, position=position, layer=layer, training_pass=pass_,
                        role="compute", macs_algorithmic=10**7, macs_actual=10**7,
                        macs_skipped=0, macs_overhead=0, compute_cycles=rng.randint(10**4, 10**5),
                        stall_cycles=rng.randint(0, 10**5), total_cycles=2 * 10**5,
                        utilization=0.5, mapping_efficiency=0.9, dram_bytes=10**5,
                        energy_pj=1e6, details={},
                    )
                )  # fmt: skip
            for epoch in range(1, EPOCHS + 1):
                db.add(
                    EpochMetric(
                        training_id=training.id, epoch=epoch, train_loss=1 / epoch,
                        test_loss=1.1 / epoch, train_accuracy=0.8 + epoch / (6 * EPOCHS),
                        test_accuracy=0.78 + epoch / (6 * EPOCHS), per_layer={},
                    )
                )  # fmt: skip
            run_ids.append(run.id)
        return run_ids


OVERLAPS = (Path(__file__).parent / "label_overlaps.js").read_text()


def overlapping_labels(page: Page, chart: str) -> tuple[int, list[str]]:
    found = page.evaluate(OVERLAPS, chart)
    return found["count"], found["clashes"]


def test_fifty_runs_six_sweep_parameters_no_label_overlaps(
    server: Server, browser: Browser, screenshots: Path
) -> None:
    run_ids = seed_runs(server)
    console = ConsoleLog()
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    console.watch(page)
    page.goto(f"{server.url}/compare?ids={','.join(map(str, run_ids))}")
    wait_for_charts(page, len(CHARTS))
    page.screenshot(path=screenshots / "11-compare-50-runs.png", full_page=True)
    # The summary names the fastest and the most efficient design point.
    leaders = page.locator("#design-point-leaders").inner_text()
    assert leaders.startswith("Fastest: ") and "s for the training." in leaders
    assert "Most efficient: " in leaders and "µJ" in leaders
    problems = {}
    for chart in CHARTS:
        count, clashes = overlapping_labels(page, chart)
        assert count > 0, f"{chart}: no text labels found"
        if clashes:
            problems[chart] = clashes[:5] + (
                [f"... {len(clashes)} in all"] if len(clashes) > 5 else []
            )
    assert problems == {}, "\n".join(f"{k}: {v}" for k, v in problems.items())

    legend = page.locator('.chart-card[data-chart="curves"] g.legend').text_content()
    assert "train (solid)" in legend and "test (dotted)" in legend
    axes = page.evaluate(
        """() => Object.fromEntries(document
            .querySelector('.chart-card[data-chart="parallel"] .plot').data[0].dimensions
            .map((d) => [d.label, d.ticktext || null]))"""
    )
    assert axes["signature_bits (mercury)"] == ["8", "16", "32", "–"]
    assert axes["seed"] == ["0", "1", "2"]
    assert axes["rows (accelerator)"] is None  # a measured quantity stays continuous
    assert console.errors == []
    context.close()


# Design points of the Pareto test: (technique, accelerator) -> (speedups of seeds 0-2, accuracy
# drops in points). The baselines (speedup 1, no drop) would dominate both SparseTrain points;
# among the technique points only SparseTrain on tpu-like is dominated (by MERCURY on tpu-like).
DESIGNS = {
    ("mercury", "edge"): ((1.45, 1.5, 1.55), 2.0),
    ("mercury", "tpu-like"): ((1.15, 1.2, 1.25), 1.0),
    ("sparsetrain", "edge"): ((0.78, 0.8, 0.82), 0.5),
    ("sparsetrain", "tpu-like"): ((0.88, 0.9, 0.92), 3.0),
}
T_975_2 = 4.302652729911275  # Student's t, 97.5% quantile, 2 degrees of freedom
DENSE = {"rows": 16, "cols": 18, "ifmap_sram_kib": 24, "filter_sram_kib": 24,
         "ofmap_sram_kib": 12, "area_mm2": 2.5, "seconds": 0.5, "energy_pj": 1e8}  # fmt: skip
ISO_AREA = {"area_budget_mm2": 2.6, "candidates": 384, "within_area": 90, "fastest": DENSE,
            "lowest_energy": DENSE}  # fmt: skip


def seed_design_points(server: Server) -> list[int]:
    """Three seeds of each design point above, each seed with its baseline on its accelerator."""
    with session_scope(server.database_url) as db:
        experiment = Experiment(
            owner_id=local_user(db).id, name="pareto", spec={"name": "p"}, status="done"
        )
        db.add(experiment)
        db.flush()
        training = Training(
            experiment_id=experiment.id, key="p", technique="x", technique_params=[],
            training_config={}, status="done",
        )  # fmt: skip
        db.add(training)
        db.flush()

        def run(technique: str, accelerator: str, seed: int, **figures: object) -> Run:
            added = Run(
                experiment_id=experiment.id, training_id=training.id, technique=technique,
                technique_params=[] if technique == "baseline" else [{"name": technique}],
                model="lenet5", dataset="digits", training_config={"seed": seed},
                accelerator_name=accelerator,
                accelerator_config={"name": accelerator, "rows": 16, "cols": 16},
                params={"technique": technique, "accelerator": accelerator, "seed": seed},
                seed=seed, status="done", progress=1.0, is_baseline=technique == "baseline",
                energy_pj=1e8, **figures,
            )  # fmt: skip
            db.add(added)
            db.flush()
            return added

        run_ids = []
        for accelerator in ("edge", "tpu-like"):
            for seed in range(3):
                base = run("baseline", accelerator, seed, speedup=1.0, accuracy=0.9 + seed / 100,
                           stall_share=0.5)  # fmt: skip
                run_ids.append(base.id)
                for (technique, on), (speedups, drop) in DESIGNS.items():
                    if on == accelerator:
                        accuracy = base.accuracy - drop / 100
                        made = run(technique, accelerator, seed, speedup=speedups[seed],
                                   accuracy=accuracy, baseline_run_id=base.id, stall_share=0.3,
                                   iso_area_speedup=0.9 * speedups[seed],
                                   iso_area_energy_ratio=1.1, iso_area=ISO_AREA)  # fmt: skip
                        run_ids.append(made.id)
        return run_ids


TRACES = """() => document.querySelector('.chart-card[data-chart=pareto] .plot').data.map(t => ({
  name: t.name, meta: t.meta || null, x: t.x, y: t.y, legendgroup: t.legendgroup || null,
  symbol: t.marker.symbol, colour: t.marker.color,
  error_x: t.error_x ? t.error_x.array : null, error_y: t.error_y ? t.error_y.array : null,
}))"""


def test_pareto_plots_design_points_shaped_by_accelerator_baselines_apart(
    server: Server, browser: Browser, screenshots: Path
) -> None:
    run_ids = seed_design_points(server)
    console = ConsoleLog()
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    console.watch(page)
    page.goto(f"{server.url}/compare?ids={','.join(map(str, run_ids))}")
    page.wait_for_selector('.chart-card[data-chart=pareto][data-rendered="true"]')
    traces = page.evaluate(TRACES)
    page.locator(".chart-card[data-chart=pareto]").screenshot(
        path=screenshots / "compare-pareto-design-points.png"
    )

    points = [t for t in traces if t["meta"]]
    # One point per design point (3 seeds each), one trace per (technique or baseline, accelerator).
    assert sorted((t["meta"]["technique"], t["meta"]["accelerator"]) for t in points) == sorted(
        [*DESIGNS, ("baseline", "edge"), ("baseline", "tpu-like")]
    )
    assert all(len(t["x"]) == 1 for t in points)
    # Shaped by accelerator: one symbol per accelerator, baselines the open form of it.
    symbols = {t["meta"]["accelerator"]: t["symbol"] for t in points if not t["meta"]["baseline"]}
    assert len(set(symbols.values())) == 2
    for trace in points:
        own = symbols[trace["meta"]["accelerator"]]
        assert trace["symbol"] == (f"{own}-open" if trace["meta"]["baseline"] else own)
    # Coloured by technique, whatever the accelerator; baselines in a colour of their own.
    colours = {(t["meta"]["technique"], t["meta"]["baseline"]): t["colour"] for t in points}
    assert len(set(colours.values())) == 3
    for trace in points:
        assert trace["colour"] == colours[(trace["meta"]["technique"], trace["meta"]["baseline"])]
    # Means over the seeds, with their 95% intervals as error bars.
    for trace in points:
        if trace["meta"]["baseline"]:
            assert trace["x"] == [1.0] and trace["error_x"] == [0]
            continue
        speedups, _ = DESIGNS[(trace["meta"]["technique"], trace["meta"]["accelerator"])]
        mean = sum(speedups) / 3
        sd = (sum((s - mean) ** 2 for s in speedups) / 2) ** 0.5
        assert trace["x"][0] == pytest.approx(mean)
        assert trace["error_x"][0] == pytest.approx(T_975_2 * sd / 3**0.5)
        # Accuracy: the seeds' baselines reach 90, 91 and 92%: a sample sd of 1 point.
        assert trace["error_y"][0] == pytest.approx(T_975_2 * 1.0 / 3**0.5)
    # The front: the technique points nothing else beats; no baseline, though they dominate.
    front = next(t for t in traces if t["name"] == "Pareto front")
    expected = sorted(sum(DESIGNS[d][0]) / 3 for d in DESIGNS if d != ("sparsetrain", "tpu-like"))
    assert front["x"] == pytest.approx(expected)
    assert 1.0 not in front["x"]
    # The legend explains colour and shape apart: techniques and baseline, then accelerators.
    legend = [(t["legendgroup"], t["name"]) for t in traces if t["x"] == [None]]
    assert legend == [
        ("technique", "mercury"), ("technique", "sparsetrain"), ("technique", "baseline"),
        ("accelerator", "edge"), ("accelerator", "tpu-like"),
    ]  # fmt: skip

    # The summary beside the chart: both comparisons and both stall shares per design point.
    table = page.locator("#group-summary table")
    head = table.locator("thead th").all_inner_texts()
    row = table.locator("tbody tr").filter(has_text="mercury").filter(has_text="edge")
    cells = dict(
        zip((h.rstrip(" ▲▼") for h in head), row.locator("td").all_inner_texts(), strict=True)
    )
    speedups, _ = DESIGNS[("mercury", "edge")]
    mean = sum(speedups) / 3
    half = T_975_2 * (sum((s - mean) ** 2 for s in speedups) / 2) ** 0.5 / 3**0.5
    assert cells["Speedup, same array"] == format_estimate(mean, half, "×")
    assert cells["Iso-area speedup"] == format_estimate(0.9 * mean, 0.9 * half, "×")
    assert cells["Iso-area energy ratio"].startswith("1.1")
    assert cells["Stall share"].startswith("30") and cells["Stall share"].endswith("%")
    assert cells["Baseline stall share"].startswith("50")
    assert cells["Iso-area dense designs"] == (
        "fastest, least energy: 16×18, 24/24/12 KiB, 2.50 mm²"
    )
    page.locator("#group-summary").screenshot(path=screenshots / "compare-summary-iso-area.png")
    assert console.errors == []
    context.close()
