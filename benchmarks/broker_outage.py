"""How fast a submission is answered while the Redis broker is down.

Starts a Redis server of its own on a free local port, an API on it (in process, embedded
SQLite database), stores one experiment, stops Redis, then submits N experiments and prints the
status and latency of each (every one should be 503, with nothing stored). For scale, it then
times one task sent the way submissions sent them before (also subscribing to the result
store) against the way they are sent now.

    python benchmarks/broker_outage.py [--submissions 5]
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import redis
from fastapi.testclient import TestClient

from backend.api.app import create_app
from backend.db import migrate
from backend.delivery.queue import TaskName, make_celery
from backend.delivery.send import SEND_RETRY_POLICY
from backend.settings import Settings

SPEC = {
    "name": "outage",
    "training": {"model": "mlp", "dataset": "digits", "epochs": 1},
    "techniques": [{"name": "mercury"}],
    "accelerators": ["edge"],
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_redis(port: int) -> subprocess.Popen[bytes]:
    server = subprocess.Popen(
        ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "",
         "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    client = redis.Redis(port=port)
    for _ in range(100):
        try:
            client.ping()
            return server
        except redis.ConnectionError:
            time.sleep(0.1)
    raise SystemExit("redis-server did not start")


def timed_send(settings: Settings, ignore_result: bool) -> float:
    celery = make_celery(settings, sender=True)
    started = time.perf_counter()
    with contextlib.suppress(Exception):
        celery.send_task(
            TaskName.TRAIN,
            args=[0],
            retry=True,
            retry_policy=SEND_RETRY_POLICY,
            ignore_result=ignore_result,
        )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=5)
    args = parser.parse_args()

    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    server = start_redis(port)
    with tempfile.TemporaryDirectory() as data_dir:
        settings = Settings(
            data_dir=Path(data_dir),
            broker_url=url,
            result_backend=url,
            single_user=True,
            reconcile_interval=0,
        )
        migrate.upgrade(settings.effective_database_url)
        try:
            with TestClient(create_app(settings)) as api:
                assert api.post("/api/v1/experiments", json=SPEC).status_code == 201
                server.terminate()
                server.wait()
                print(f"Redis on port {port} stopped; {args.submissions} submissions:")
                for number in range(1, args.submissions + 1):
                    started = time.perf_counter()
                    answer = api.post("/api/v1/experiments", json=SPEC)
                    seconds = time.perf_counter() - started
                    print(f"  submission {number}: HTTP {answer.status_code} in {seconds:.3f} s")
                stored = api.get("/api/v1/experiments").json()["total"]
                print(f"experiments stored: {stored} (1 before the outage)")
                now = timed_send(settings, ignore_result=True)
                timed_send(settings, ignore_result=False)  # the first fails fast either way
                before = timed_send(settings, ignore_result=False)
                print(
                    f"one send, Redis down: {now:.3f} s now, {before:.3f} s when it also "
                    f"subscribed to the result store ({before / now:.0f}x)"
                )
        finally:
            if server.poll() is None:
                server.terminate()
                server.wait()


if __name__ == "__main__":
    main()
