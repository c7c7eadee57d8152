"""How fast the runs page opens with 10,000 runs in the table, in headless Chromium.

Seeds a fresh embedded (SQLite) data dir, or the PostgreSQL database given with
`--database-url`, with one experiment of 10,000 finished runs; starts `orrery serve` without a
worker; then opens the runs page in Debian's Chromium and times, from navigation start, until the
table shows its first page and the total count. It repeats this for the default sort and for a
sort by speedup, and also times the /runs API call the page makes.

Prints the median and worst of each; the goal is under 2 s to a usable page.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from playwright.sync_api import Browser, sync_playwright
from sqlalchemy import insert

from backend.api.security import local_user
from backend.db import migrate
from backend.db.models import Experiment, Run
from backend.db.session import session_scope

ROOT = Path(__file__).resolve().parents[1]
ORRERY = str(Path(sys.executable).parent / "orrery")
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
GOAL_SECONDS = 2.0
TECHNIQUES = ["baseline", "mercury", "adagp", "sparsetrain", "mercury+sparsetrain"]
ACCELERATORS = ["edge", "tpu-like", "eyeriss-like"]


def seed(database_url: str, runs: int) -> None:
    migrate.upgrade(database_url)
    rng = random.Random(0)
    with session_scope(database_url) as db:
        owner = local_user(db)
        experiment = Experiment(
            owner_id=owner.id, name="10k benchmark", spec={"name": "10k"}, status="done"
        )
        db.add(experiment)
        db.flush()
        rows = []
        for i in range(runs):
            technique = TECHNIQUES[i % len(TECHNIQUES)]
            cycles = rng.randint(200_000, 2_000_000)
            rows.append(
                {
                    "experiment_id": experiment.id,
                    "technique": technique,
                    "technique_params": [],
                    "model": "lenet5",
                    "dataset": "digits",
                    "training_config": {},
                    "accelerator_name": ACCELERATORS[i % len(ACCELERATORS)],
                    "accelerator_config": {},
                    "params": {"technique": technique, "mercury.signature_bits": 8 + i % 25},
                    "seed": i % 4,
                    "status": "done",
                    "progress": 1.0,
                    "is_baseline": technique == "baseline",
                    "accuracy": rng.uniform(0.8, 0.99),
                    "total_cycles": cycles,
                    "energy_pj": rng.uniform(1e6, 9e6),
                    "speedup": rng.uniform(0.8, 3.0),
                    "energy_ratio": rng.uniform(0.3, 1.1),
                }
            )
        db.execute(insert(Run), rows)


def serve(data_dir: Path, database_url: str | None, port: int) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORRERY_")}
    env["ORRERY_DATA_DIR"] = str(data_dir)
    if database_url:
        env.update(ORRERY_DATABASE_URL=database_url, ORRERY_SINGLE_USER="true")
    process = subprocess.Popen(
        [ORRERY, "serve", "--host", "127.0.0.1", "--port", str(port), "--no-with-worker"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/v1/health", timeout=2).status_code == 200:
                return process
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    process.terminate()
    raise SystemExit("the server did not start")


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def time_page(browser: Browser, url: str, runs: int, repeats: int) -> list[float]:
    expected = f"of {runs:,} runs"
    seconds = []
    for _ in range(repeats):
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        start = time.perf_counter()
        page.goto(url)
        page.wait_for_function(
            "(expected) => document.querySelectorAll('#run-table tbody tr').length > 0 && "
            "document.querySelector('.page-info')?.textContent.includes(expected)",
            arg=expected,
            timeout=30_000,
        )
        seconds.append(time.perf_counter() - start)
        context.close()
    return seconds


def time_api(base: str, params: dict[str, str], repeats: int) -> list[float]:
    seconds = []
    with httpx.Client(base_url=base, timeout=30) as client:
        for _ in range(repeats):
            start = time.perf_counter()
            client.get("/api/v1/runs", params=params).raise_for_status()
            seconds.append(time.perf_counter() - start)
    return seconds


def report(label: str, seconds: list[float]) -> None:
    print(f"{label:<44} median {statistics.median(seconds):6.3f} s   worst {max(seconds):6.3f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--database-url", help="PostgreSQL URL (default: embedded SQLite)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp)
        database_url = args.database_url or f"sqlite:///{data_dir / 'orrery.db'}"
        started = time.perf_counter()
        seed(database_url, args.runs)
        print(f"seeded {args.runs:,} runs in {time.perf_counter() - started:.1f} s")
        port = free_port()
        server = serve(data_dir, args.database_url, port)
        base = f"http://127.0.0.1:{port}"
        try:
            report("API /runs?limit=50 (newest first)", time_api(base, {"limit": "50"}, 10))
            report(
                "API /runs?limit=50&sort=-speedup",
                time_api(base, {"limit": "50", "sort": "-speedup"}, 10),
            )
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
                )
                time_page(browser, f"{base}/", args.runs, 1)  # warm caches (plotly not needed)
                first = time_page(browser, f"{base}/", args.runs, args.repeats)
                sorted_page = time_page(browser, f"{base}/?sort=-speedup", args.runs, args.repeats)
                filtered = time_page(
                    browser,
                    f"{base}/?technique=mercury&sort=-accuracy",
                    args.runs // 5,
                    args.repeats,
                )
                browser.close()
            report(f"runs page, {args.runs:,} runs, to a usable table", first)
            report("runs page sorted by speedup", sorted_page)
            report("runs page filtered (technique) and sorted", filtered)
            worst = max(first + sorted_page + filtered)
            verdict = "within" if worst < GOAL_SECONDS else "OVER"
            print(f"worst page load {worst:.3f} s: {verdict} the {GOAL_SECONDS:.0f} s goal")
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
