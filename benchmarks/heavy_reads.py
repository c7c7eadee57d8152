"""What each read of the "holds under load" mix costs the API process alone: CPU per request.

On a fresh PostgreSQL database of about 10,000 runs (100 experiments submitted, then copies
with varied metrics, as `api_load.py` seeds them), one client (the app in-process, read cache
off) asks each route seven times; the figure is the process CPU time per request (API and
client; the database's own work is not in it), median and minimum. CPU time, not wall time:
on a shared machine the wall time mostly measures the neighbours.

    python benchmarks/heavy_reads.py --admin-url postgresql+psycopg://postgres@127.0.0.1:5432/postgres
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from api_load import SPEC, seed_runs  # this folder, when run as a script
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from backend.api.app import create_app
from backend.db import migrate
from backend.db.session import engine_for
from backend.settings import Settings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--admin-url", required=True, help="creates and drops the database")
    parser.add_argument("--broker-url", default="redis://127.0.0.1:6379/14")
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    name = f"orrery_bench_heavy_{uuid.uuid4().hex[:8]}"
    admin = create_engine(args.admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(args.admin_url).set(database=name).render_as_string(hide_password=False)
    try:
        migrate.upgrade(url)
        settings = Settings(
            data_dir=Path(tempfile.mkdtemp(prefix="orrery-bench-")),
            database_url=url,
            broker_url=args.broker_url,
            result_backend=args.broker_url,
            single_user=True,
            reconcile_interval=0,
            read_cache_entries=0,
        )
        with TestClient(create_app(settings)) as api:
            measure(api, url, args)
    finally:
        engine_for(url).dispose()
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def measure(api: TestClient, url: str, args: argparse.Namespace) -> None:
    for i in range(100):
        api.post("/api/v1/experiments", json={**SPEC, "name": f"load {i}"}).raise_for_status()
    seed_runs(url, args.runs)
    at = api.get("/api/v1/runs", params={"sort": "-speedup", "limit": 1, "offset": 999}).json()
    export = {"format": "csv", "range": f"speedup:{at['items'][0]['speedup']}:"}
    config = {"filters": {"sort": "-speedup"}}
    dashboard = api.post("/api/v1/dashboards", json={"name": "d", "config": config}).json()["id"]
    run_id = api.get("/api/v1/runs", params={"limit": 1}).json()["items"][0]["id"]
    routes = {
        "/auth/me": ("/api/v1/auth/me", {}),
        "/runs page 1": ("/api/v1/runs", {"limit": 50}),
        "/runs/groups (every run)": ("/api/v1/runs/groups", {}),
        "/runs/{id}": (f"/api/v1/runs/{run_id}", {}),
        "/runs/export (1,000 rows)": ("/api/v1/runs/export", export),
        "/dashboards/{id}/data": (f"/api/v1/dashboards/{dashboard}/data", {}),
    }
    print(f"{args.runs} runs; CPU time of this process per request, {args.repeat} requests each")
    for label, (path, params) in routes.items():
        times = []
        for _ in range(args.repeat):
            started = time.process_time()
            answer = api.get(path, params=params)
            times.append(time.process_time() - started)
            answer.raise_for_status()
        print(
            f"{label:<28} median {statistics.median(times) * 1000:7.1f} ms  "
            f"min {min(times) * 1000:7.1f} ms  ({len(answer.content)} bytes)"
        )


if __name__ == "__main__":
    main()
