"""The largest design search against a running API: POST and cancel latency, and the API's memory.

Starts `orrery serve` (API only, one process) on a free local port, submits a small experiment
and trains it here (no worker), then, against the server over loopback:
- POSTs a search of 10^6 designs with `chunk_size` 1 (refused: too many chunks) and with the
  smallest allowed chunk size (10^6 / 1,000 chunks), timing each answer;
- cancels each search started, right after its POST and while another 10^6-design search is
  being started, timing each cancel;
- samples the API process's resident memory (RSS) every 20 ms throughout and prints its peak;
- then leaves --waiting-searches such searches running (their chunks waiting their turn) and
  times the fair dispatcher's choice of the next messages (`next_messages`, run here on the
  same database) among all those chunks, then cancels them.

    python benchmarks/search_start.py \
        --database-url postgresql+psycopg://postgres@127.0.0.1:5432/bench_searches

Measured on a 2-core machine shared with other work (load average 7-15), PostgreSQL: chunk_size
1 refused in 50-370 ms; a 10^6-design search in 1,000 chunks answered its POST in 0.1-0.4 s
(once 1.5 s at load 15); cancel in 30-250 ms, 60-130 ms while another such search was starting;
the API process at 198 MiB idle, 202-207 MiB at its peak; the next 8 messages chosen among
99,992 waiting chunks of 100 running searches in 20-28 ms. Before chunks were bounded and
inserted in one statement, chunk_size 1 with 10^6 designs grew each API process past 3 GB.

The database must exist and is used as it is (migrated by the server). No worker runs, so the
chunks sent stay in the broker: by default the embedded SQLite broker in a temporary folder,
else a Redis database of its own (`--broker-url`).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from api_load import free_port, wait_until_up
from sqlalchemy import func, select, text

from backend.db.models import SearchChunk, Training
from backend.db.session import session_scope
from backend.delivery.dispatch import next_messages
from backend.specs.design_search import MAX_DESIGNS, smallest_chunk_size
from worker.jobs import run_training_job

SPEC = {
    "name": "search start",
    "training": {
        "model": "mlp",
        "dataset": "digits",
        "epochs": 1,
        "batch_size": 32,
        "train_samples": 256,
        "test_samples": 128,
    },
    "techniques": [{"name": "sparsetrain", "prune_rate": 0.9}],
    "accelerators": ["edge"],
}
SEARCH = {
    "base": "edge",
    "mode": "random",
    "parameters": {"rows": {"low": 4, "high": 256}, "dram_bandwidth": {"low": 1, "high": 64}},
    "samples": MAX_DESIGNS,
    "sample_size": 1000,
}


def rss_mib(pid: int) -> float:
    """Resident memory of a process and its children, MiB."""
    pids = [pid]
    children = Path(f"/proc/{pid}/task/{pid}/children")
    if children.exists():
        pids += [int(p) for p in children.read_text().split()]
    total = 0
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except FileNotFoundError:
            pass
    return total / 1024


class MemoryWatch(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak = 0.0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.peak = max(self.peak, rss_mib(self.pid))
            time.sleep(0.02)


def timed(
    client: httpx.Client, method: str, path: str, **kwargs: object
) -> tuple[float, httpx.Response]:
    began = time.perf_counter()
    response = client.request(method, path, **kwargs)  # type: ignore[arg-type]
    return time.perf_counter() - began, response


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", required=True, help="PostgreSQL, an existing database")
    parser.add_argument("--broker-url", help="default: the embedded SQLite broker")
    parser.add_argument("--rounds", type=int, default=5, help="searches started and cancelled")
    parser.add_argument(
        "--waiting-searches", type=int, default=100, help="running searches for the dispatch"
    )
    args = parser.parse_args()

    data_dir = Path(tempfile.mkdtemp(prefix="orrery-bench-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORRERY_")}
    env.update(
        ORRERY_DATA_DIR=str(data_dir),
        ORRERY_SINGLE_USER="true",
        ORRERY_DATABASE_URL=args.database_url,
        ORRERY_RECONCILE_INTERVAL="0",
        ORRERY_MAX_ACTIVE_SEARCHES_PER_USER="1000",
    )
    if args.broker_url:
        env["ORRERY_BROKER_URL"] = env["ORRERY_RESULT_BACKEND"] = args.broker_url
    port = free_port()
    orrery = str(Path(sys.executable).parent / "orrery")
    server = subprocess.Popen(
        [orrery, "serve", "--no-with-worker", "--port", str(port), "--workers", "1"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(base)
        with httpx.Client(base_url=f"{base}/api/v1", timeout=120) as client:
            experiment = client.post("/experiments", json=SPEC)
            experiment.raise_for_status()
            experiment_id = experiment.json()["id"]
            with session_scope(args.database_url) as db:
                trainings = list(
                    db.scalars(select(Training.id).where(Training.experiment_id == experiment_id))
                )
            for training_id in trainings:
                run_training_job(args.database_url, training_id, task_id="benchmark")
            watch = MemoryWatch(server.pid)
            idle = rss_mib(server.pid)
            watch.start()
            path = f"/experiments/{experiment_id}/searches"

            seconds, refused = timed(client, "POST", path, json={**SEARCH, "chunk_size": 1})
            print(
                f"POST 10^6 designs, chunk_size 1: {refused.status_code} in {seconds * 1000:.0f} ms"
                f" ({refused.json()['detail'][0]['msg']})"
            )
            smallest = {**SEARCH, "chunk_size": smallest_chunk_size(MAX_DESIGNS)}
            posts, cancels, cancels_during = [], [], []
            for _ in range(args.rounds):
                seconds, made = timed(client, "POST", path, json=smallest)
                assert made.status_code == 201, made.text
                posts.append(seconds)
                chunks = made.json()["progress"]["chunks_total"]
                seconds, cancelled = timed(client, "POST", f"/searches/{made.json()['id']}/cancel")
                assert cancelled.json()["status"] == "cancelled", cancelled.text
                cancels.append(seconds)
            # Cancel one search while the next one is being started.
            with (
                ThreadPoolExecutor(2) as pool,
                httpx.Client(base_url=f"{base}/api/v1", timeout=120) as other,
            ):
                for _ in range(args.rounds):
                    made = client.post(path, json=smallest).json()
                    starting = pool.submit(timed, other, "POST", path, json=smallest)
                    seconds, cancelled = timed(client, "POST", f"/searches/{made['id']}/cancel")
                    assert cancelled.json()["status"] == "cancelled", cancelled.text
                    cancels_during.append(seconds)
                    _, started = starting.result()
                    client.post(f"/searches/{started.json()['id']}/cancel")
            running = [
                client.post(path, json=smallest).json()["id"] for _ in range(args.waiting_searches)
            ]
            with session_scope(args.database_url) as db:
                db.execute(text("ANALYZE search_chunks"))
                waiting = db.scalar(
                    select(func.count())
                    .select_from(SearchChunk)
                    .where(SearchChunk.status == "queued", SearchChunk.sent_at.is_(None))
                )
                picks = []
                for _ in range(5):
                    began = time.perf_counter()
                    next_messages(db, 8)
                    picks.append(time.perf_counter() - began)
            for search_id in running:
                client.post(f"/searches/{search_id}/cancel")
            watch.stop.set()
            watch.join()
        print(
            f"POST 10^6 designs, chunk_size {smallest['chunk_size']:,} ({chunks:,} chunks, "
            f"started at once): max {max(posts) * 1000:.0f} ms, median "
            f"{sorted(posts)[len(posts) // 2] * 1000:.0f} ms over {len(posts)}"
        )
        print(
            f"cancel right after: max {max(cancels) * 1000:.0f} ms; while another 10^6-design "
            f"search starts: max {max(cancels_during) * 1000:.0f} ms"
        )
        print(f"API process RSS: {idle:.0f} MiB idle, peak {watch.peak:.0f} MiB")
        print(
            f"fair dispatch among {waiting:,} waiting chunks of {len(running)} running searches: "
            f"next 8 messages chosen in {min(picks) * 1000:.0f}-{max(picks) * 1000:.0f} ms"
        )
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
