"""Load on the API from concurrent clients, loopback only, bounded in count and time.

Starts `orrery serve` (API only) on a free local port, stores N runs, then measures
- submission throughput: POST /api/v1/experiments from concurrent clients;
- for scale, the latency of GET /api/v1/auth/me (authentication and a small answer), then
- latency of GET /api/v1/runs (pages, sorted, filtered) with C concurrent clients: first a mix
  of five queries asked again and again, as dashboards do (answered from the server's snapshot
  cache while nothing is written; timed after a short warm-up in which each API process computes
  each page once), then the same mix with every page new (computed each time).

    python benchmarks/api_load.py                                   # embedded SQLite
    python benchmarks/api_load.py \
        --database-url postgresql+psycopg://postgres@127.0.0.1:5432/bench \
        --broker-url redis://127.0.0.1:6379/9
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import httpx
from sqlalchemy import insert, select

from backend.db.models import Run
from backend.db.session import session_scope

SPEC = {
    "name": "load",
    "training": {"model": "mlp", "dataset": "digits", "epochs": 1},
    "techniques": [{"name": "mercury"}, {"name": "sparsetrain"}],
    "accelerators": ["edge", "tpu-like"],
}
QUERIES = [
    {"limit": 50},
    {"limit": 50, "sort": "-speedup"},
    {"limit": 50, "sort": "accuracy", "technique": "mercury"},
    {"limit": 50, "offset": 5000, "sort": "-id"},
    {"limit": 50, "range": "speedup:1.2:", "sort": "-energy_pj"},
]


def repeated_query(i: int) -> tuple[str, str, dict]:
    return "GET", "/api/v1/runs", {"params": QUERIES[i % len(QUERIES)]}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def seed_runs(database_url: str, count: int) -> None:
    """Copy the stored runs with varied metrics until `count` runs exist."""
    rng = random.Random(0)
    with session_scope(database_url) as db:
        templates = list(db.scalars(select(Run)))
        columns = [c.key for c in Run.__table__.columns if c.key not in ("id", "created_at")]
        rows = []
        for i in range(count - len(templates)):
            row = {name: getattr(templates[i % len(templates)], name) for name in columns}
            row.update(
                status="done",
                accuracy=rng.uniform(0.5, 0.99),
                speedup=rng.uniform(0.7, 2.5),
                energy_pj=rng.uniform(1e8, 1e10),
                total_cycles=rng.randrange(10**5, 10**8),
            )
            rows.append(row)
        for start in range(0, len(rows), 1000):
            db.execute(insert(Run), rows[start : start + 1000])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def hammer(base: str, clients: int, requests: int, make, deadline: float) -> list[float]:
    """`requests` calls spread over `clients` concurrent clients; latency of each, seconds.

    The load comes from aiohttp, which spends about a third of httpx's CPU per request: on a
    small machine the load generator shares the cores with the server, and a heavy client
    would be measured as server latency.
    """
    latencies: list[float] = []
    counter = iter(range(requests))

    async def client_loop(session: aiohttp.ClientSession) -> None:
        for i in counter:
            if time.monotonic() > deadline:
                return
            method, path, kwargs = make(i)
            started = time.perf_counter()
            async with session.request(method, path, **kwargs) as response:
                body = await response.read()
            latencies.append(time.perf_counter() - started)
            if response.status >= 400:
                raise RuntimeError(f"{method} {path}: HTTP {response.status} {body[:200]!r}")

    connector = aiohttp.TCPConnector(limit=clients)
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(base, connector=connector, timeout=timeout) as session:
        await asyncio.gather(*(client_loop(session) for _ in range(clients)))
    return latencies


def report(label: str, latencies: list[float], seconds: float) -> None:
    print(
        f"{label:<52} {len(latencies):>6} requests  {len(latencies) / seconds:8.1f} req/s  "
        f"p50 {statistics.median(latencies) * 1000:7.1f} ms  "
        f"p99 {percentile(latencies, 0.99) * 1000:7.1f} ms"
    )


def phase(
    label: str, base: str, clients: int, requests: int, make, max_seconds: float
) -> list[float]:
    """Run one load phase and print its figures; the latencies, seconds."""
    started = time.perf_counter()
    latencies = asyncio.run(hammer(base, clients, requests, make, time.monotonic() + max_seconds))
    report(f"{label} ({clients} clients)", latencies, time.perf_counter() - started)
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", help="default: a SQLite file in a temporary folder")
    parser.add_argument("--broker-url", help="default: the embedded SQLite broker")
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--submissions", type=int, default=100)
    parser.add_argument("--max-seconds", type=float, default=120, help="stop each phase by then")
    parser.add_argument("--workers", type=int, default=1, help="API processes")
    args = parser.parse_args()

    data_dir = Path(tempfile.mkdtemp(prefix="orrery-bench-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORRERY_")}
    env.update(ORRERY_DATA_DIR=str(data_dir), ORRERY_SINGLE_USER="true")
    if args.database_url:
        env["ORRERY_DATABASE_URL"] = args.database_url
    if args.broker_url:
        env["ORRERY_BROKER_URL"] = env["ORRERY_RESULT_BACKEND"] = args.broker_url
    database_url = args.database_url or f"sqlite:///{data_dir / 'orrery.db'}"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    orrery = str(Path(sys.executable).parent / "orrery")
    server = subprocess.Popen(
        [orrery, "serve", "--no-with-worker", "--port", str(port), "--workers", str(args.workers)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for _ in range(100):
            try:
                if httpx.get(f"{base}/api/v1/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        else:
            raise SystemExit("the server did not start")

        print(
            f"server: {database_url.split('://')[0]}, {args.workers} API process(es), "
            f"{args.clients} clients, loopback only"
        )
        phase("POST /experiments", base, 10, args.submissions,
              lambda i: ("POST", "/api/v1/experiments", {"json": {**SPEC, "name": f"load {i}"}}),
              args.max_seconds)  # fmt: skip

        seed_runs(database_url, args.runs)
        total = httpx.get(f"{base}/api/v1/runs", params={"limit": 1}).json()["total"]
        print(f"stored runs: {total}")
        # The floor of the stack on this machine: the same server, routing and authentication,
        # and a two-query answer about the caller instead of a page of runs.
        load = (base, args.clients, args.requests)
        phase("GET /auth/me, for scale", *load, lambda i: ("GET", "/api/v1/auth/me", {}),
              args.max_seconds)  # fmt: skip
        # A dashboard asks its queries again and again: the first asking of each, in each API
        # process, computes the page (the phase after next times that); this one is the rest.
        phase("GET /runs, repeated queries: warm-up", base, args.clients, 10 * len(QUERIES),
              repeated_query, args.max_seconds)  # fmt: skip
        latencies = phase("GET /runs, repeated queries", *load,
                          repeated_query, args.max_seconds)  # fmt: skip
        target = percentile(latencies, 0.99) < 0.100
        print(f"target p99 < 100 ms at {args.clients} clients: {'met' if target else 'NOT met'}")
        # Every request a page never asked before: no answer can come from the server's
        # snapshot cache, so this is the cost of computing each page.
        phase("GET /runs, every query new", *load,
              lambda i: ("GET", "/api/v1/runs",
                         {"params": {**QUERIES[i % len(QUERIES)], "offset": i}}),
              args.max_seconds)  # fmt: skip
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
