"""Each paper's headline next to what this installation measures on the paper's miniature.

Runs `examples/papers/{mercury,adagp,sparsetrain}.yaml` (with --full, the larger 3-seed,
>= 10-epoch versions in `examples/papers/full/`, every `<paper>*.yaml` there: ADA-GP's has a
LeNet-5 and a BatchNorm model) through the real pipeline: `orrery serve` on
embedded defaults in a scratch folder (or a running server given with --url), one submission
per paper, then reads the stored runs. Nothing here is tuned: every knob value is in the
example file, and the figures are the simulator's on what the trainings really did.

Printed per paper and per (technique, accelerator): speedup and energy ratio against the run's
baseline, and the accuracy change paired by seed (run minus its own seed's baseline), each as
the mean over seeds ± the half-width of its 95% confidence interval (Student's t, n - 1 degrees
of freedom; it covers the seeds only, not the preset's assumptions), the stall share (stall
cycles / cycles, the runs' `stall_share`) of the runs and of their baselines, the iso-area
speedup and energy ratio (against the fastest and the lowest-energy dense designs of equal or
smaller area, backend/sim/iso_area.py) with the designs of the group's first run, and the verdict
with its reason (backend/analysis/verdict.py, the papers page's too). Next to them, what the
technique did, from the runs' per-epoch figures (mean over seeds), the figure each paper's entry
names: ADA-GP's GP fraction (GP batches over all batches, warm-up included), MERCURY's hit rate
over the training (every layer's rows, a layer whose reuse is off counting as zero), SparseTrain's
last-epoch backward density.

    python benchmarks/paper_check.py [--full] [--only mercury adagp sparsetrain]
                                     [--url URL] [--reuse] [--data-dir DIR]

--reuse reads the newest finished experiment of the same name on the server instead of
submitting again (for re-printing, or after a --url run).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import yaml

from backend.analysis.groups import estimate
from backend.analysis.papers import PAPERS, summary_line
from backend.analysis.verdict import verdict
from backend.client import OrreryClient
from backend.specs.techniques import BY_NAME, EPOCH_FIGURES
from backend.techniques.entry import Figure

ROOT = Path(__file__).resolve().parents[1]


def fmt(values: list[float], pattern: str, signed: bool = False) -> str:
    """Mean ± the half-width of its 95% Student-t interval (the same statistics as the API's
    seed groups); a single value has no interval. `signed` puts a sign on the mean only."""
    found = estimate(values)
    if found is None:
        return "-"
    mean = ("{:+" + pattern.removeprefix("{:")).format(found.mean) if signed else None
    text = mean or pattern.format(found.mean)
    if found.ci_high is None:
        return text
    return f"{text} ± {pattern.format(found.ci_high - found.mean)}"


def dense_design(design: dict) -> str:
    """rows x cols, ifmap/filter/ofmap KiB of an iso-area design."""
    srams = "/".join(str(design[f"{kind}_sram_kib"]) for kind in ("ifmap", "filter", "ofmap"))
    return f"{design['rows']}x{design['cols']} {srams} KiB"


def iso_area_designs(runs: list[dict]) -> str:
    """The fastest and the lowest-energy dense designs of the first run that has them."""
    iso = next((run["iso_area"] for run in runs if run.get("iso_area")), None)
    if iso is None:
        return "-"
    return f"{dense_design(iso['fastest'])} | {dense_design(iso['lowest_energy'])}"


def values(runs: list[dict], key: str) -> list[float]:
    return [run[key] for run in runs if run.get(key) is not None]


@contextlib.contextmanager
def embedded_server(data_dir: Path) -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORRERY_")}
    env.update(ORRERY_DATA_DIR=str(data_dir), ORRERY_API_PORT=str(port))
    log = (data_dir / "serve.log").open("w")
    orrery = str(Path(sys.executable).with_name("orrery"))
    server = subprocess.Popen(
        [orrery, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/api/v1/health", timeout=2).status_code == 200:
                    break
            if server.poll() is not None:
                raise SystemExit(f"orrery serve exited; see {log.name}")
            time.sleep(0.5)
        yield url
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
        log.close()


def experiment_runs(client: OrreryClient, spec: dict[str, Any], reuse: bool) -> list[dict]:
    if reuse:
        page = client.experiments(limit=500)
        matching = [e for e in page["items"] if e["name"] == spec["name"]]
        if not matching:
            raise SystemExit(f"--reuse: no experiment named '{spec['name']}' on the server")
        experiment = matching[0]
    else:
        experiment = client.submit(spec)
        print(f"  submitted experiment {experiment['id']}: {experiment['total_runs']} runs",
              flush=True)  # fmt: skip
        started = time.monotonic()
        client.wait(experiment["id"], poll=5)
        print(f"  finished in {time.monotonic() - started:.0f} s", flush=True)
    return list(client.iter_runs(experiment_id=[experiment["id"]], sort="id"))


def paper_figure(technique: str) -> Figure | None:
    """The figure that says what a technique did (its paper's), for a run's technique label."""
    entry = BY_NAME.get(technique)
    if entry is None or entry.paper is None:
        return None
    return next(figure for figure in EPOCH_FIGURES if figure.key == entry.paper.figure)


def technique_figures(client: OrreryClient, runs: list[dict]) -> dict[int, float]:
    """Per training (the presets of one seed share it, so its epochs are read once)."""
    figures: dict[int, float] = {}
    for run in runs:
        figure = paper_figure(run["technique"])
        if figure is None or run["status"] != "done" or run["training_id"] in figures:
            continue
        epochs = client.run(run["id"])["epochs"]
        value = figure.of_training([epoch.get(figure.key) for epoch in epochs])
        if value is not None:
            figures[run["training_id"]] = value
    return figures


def report(paper: str, runs: list[dict], client: OrreryClient) -> None:
    by_id = {run["id"]: run for run in runs}
    failed = [run for run in runs if run["status"] != "done"]
    print(f"\n{summary_line(PAPERS[paper])}")
    if failed:
        print(f"  {len(failed)} run(s) did not finish: {[(r['id'], r['error']) for r in failed]}")
    groups: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
    for run in runs:
        if run["status"] == "done" and not run["is_baseline"]:
            swept = ", ".join(
                f"{k}={v}" for k, v in sorted(run["params"].items())
                if k not in ("technique", "accelerator", "seed")
            )  # fmt: skip
            groups[(run["technique"], run["accelerator_name"], swept)].append(run)
    figures = technique_figures(client, runs)
    header = ("technique", "accelerator", "setting", "seeds", "speedup", "stall share",
              "baseline stall", "energy ratio", "iso-area speedup", "iso-area energy",
              "iso-area designs (fastest | least energy)", "accuracy", "Δ accuracy (pt)",
              "verdict", "what it did", "why")  # fmt: skip
    rows = [header]
    for (technique, accelerator, swept), members in sorted(groups.items()):
        speedups, energies = values(members, "speedup"), values(members, "energy_ratio")
        accuracies = [100 * r["accuracy"] for r in members if r["accuracy"] is not None]
        deltas = [
            100 * (r["accuracy"] - by_id[r["baseline_run_id"]]["accuracy"])
            for r in members
            if r["accuracy"] is not None
            and r["baseline_run_id"] in by_id
            and by_id[r["baseline_run_id"]]["accuracy"] is not None
        ]
        did = [figures[r["training_id"]] for r in members if r["training_id"] in figures]
        label = figure.label if (figure := paper_figure(technique)) else ""
        baselines = [by_id[r["baseline_run_id"]] for r in members if r["baseline_run_id"] in by_id]
        judged = verdict(estimate(speedups), estimate(deltas), PAPERS[paper].speedup)
        rows.append((technique, accelerator, swept or "-", str(len(members)),
                     fmt(speedups, "{:.3f}x"), fmt(values(members, "stall_share"), "{:.2f}"),
                     fmt(values(baselines, "stall_share"), "{:.2f}"), fmt(energies, "{:.3f}"),
                     fmt(values(members, "iso_area_speedup"), "{:.3f}x"),
                     fmt(values(members, "iso_area_energy_ratio"), "{:.3f}"),
                     iso_area_designs(members), fmt(accuracies, "{:.2f}"),
                     fmt(deltas, "{:.2f}", signed=True), judged.outcome,
                     f"{label} {statistics.fmean(did):.3f}" if did else "-",
                     judged.why))  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        print("  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="the 3-seed, >= 10-epoch versions")
    parser.add_argument("--only", nargs="+", choices=list(PAPERS), default=list(PAPERS))
    parser.add_argument("--url", help="a running server (default: a scratch embedded one)")
    parser.add_argument("--token", default=os.environ.get("ORRERY_TOKEN"))
    parser.add_argument("--reuse", action="store_true", help="read stored runs, submit nothing")
    parser.add_argument("--data-dir", type=Path, help="keep the scratch server's data here")
    args = parser.parse_args()
    folder = ROOT / "examples" / "papers" / ("full" if args.full else "")
    specs = [
        (paper, yaml.safe_load(path.read_text()))
        for paper in args.only
        for path in sorted(
            folder.glob(f"{paper}*.yaml") if args.full else [folder / f"{paper}.yaml"]
        )
    ]

    with contextlib.ExitStack() as stack:
        url = args.url
        if url is None:
            data_dir = args.data_dir or Path(stack.enter_context(tempfile.TemporaryDirectory()))
            data_dir.mkdir(parents=True, exist_ok=True)
            url = stack.enter_context(embedded_server(data_dir))
            print(f"embedded server at {url}, data in {data_dir}")
        client = stack.enter_context(OrreryClient(url, token=args.token, timeout=120))
        for paper, spec in specs:
            print(f"\n== {paper}: {spec['name']}", flush=True)
            report(paper, experiment_runs(client, spec, args.reuse), client)


if __name__ == "__main__":
    main()
