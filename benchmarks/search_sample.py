"""What the design-space page's sample costs: GET /searches/{id}/sample of one done search, its
size on the wire and its time, per source tree in one run (loopback only, bounded).

On a fresh PostgreSQL database, one done search of --designs random designs (design_search.py's
eight searched fields, their values drawn by the search's own `design_table`) keeps per
technique (a baseline and one technique) a sample of --sample-size designs and a front; its
figures are float64 of the simulator's magnitudes (lognormal, every digit significant, as
computed figures are). One API server per source tree (`--code NAME=FOLDER,...`, default this
tree alone) serves the same database; each is asked --repeat times with gzip accepted and once
without. Printed per tree: bytes on the wire (and uncompressed), the first request's time (a
fresh process, nothing cached) and the median and minimum of the rest, wall time and the
server's CPU time per request (read from /proc: on a shared machine wall time mostly measures
the neighbours).

    python benchmarks/search_sample.py \\
        --admin-url postgresql+psycopg://postgres@127.0.0.1:5432/postgres \\
        --code before=OLD_TREE,after=.

Measured so (one run, 2-core machine shared with other work, load average 8-12), before: every
figure written whole, no compression, no cache; after: figures to seven significant digits,
gzip, a done search's sample cached. Before: 2,441,302 bytes on the wire, 218-318 ms wall and
90-100 ms of server CPU per request. After: 1,869,255 bytes of JSON, 826,772 on the wire (the
searched fields, written exactly, are 1.3 MB of the JSON: five of them continuous floats), 54-56
ms wall (the client reading it) and under one 10 ms CPU tick of the server per request. The
first request of a fresh process, computing it: 675 ms before, 788 ms after.
"""

from __future__ import annotations

import argparse
import gzip
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import numpy as np
from api_load import SPEC, free_port, wait_until_up  # this folder, when run as a script
from design_search import PARAMETERS
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from backend.db.models import DesignSearchRow
from backend.db.session import engine_for, session_scope
from backend.sim.design_search import design_table
from backend.specs.design_search import DesignSearch

LABELS = ("baseline", "sparsetrain")
FRONT = 60  # designs on each technique's front


def tree_cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of a process and its descendants so far."""
    ticks = os.sysconf("SC_CLK_TCK")
    stats = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        stats[int(stat.parent.name)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
    tree, queue = [], [pid]
    while queue:
        tree.append(queue.pop())
        queue += [child for child, (parent, _) in stats.items() if parent == tree[-1]]
    return sum(stats[p][1] for p in tree if p in stats) / ticks


def store_search(url: str, experiment_id: int, designs: int, sample_size: int) -> int:
    """A done search as the search job leaves one: result (fronts, samples) and the searched
    fields of every design kept."""
    spec = DesignSearch(
        base="edge", mode="random", samples=designs, seed=3, parameters=PARAMETERS,
        sample_size=sample_size,
    )  # fmt: skip
    rng = np.random.default_rng(0)
    workloads, kept = {}, set()
    for label in LABELS:
        chosen = rng.choice(designs, size=min(designs, sample_size + FRONT), replace=False)
        front, sample = np.sort(chosen[:FRONT]), np.sort(chosen[FRONT:])
        kept.update(chosen.tolist())

        def points(index: np.ndarray) -> dict:
            figures = np.column_stack(
                [
                    rng.lognormal(-7, 1.5, len(index)),
                    rng.lognormal(-9, 1.5, len(index)),
                    rng.lognormal(1.5, 1, len(index)),
                ]
            )
            return {"index": index.tolist(), "figures": figures.tolist()}

        workloads[label] = {
            "evaluated": designs, "feasible": designs, "front": points(front),
            "sample": points(sample),
        }  # fmt: skip
    index = np.array(sorted(kept))
    table = design_table(spec, 0, designs)
    with session_scope(url) as db:
        row = DesignSearchRow(
            experiment_id=experiment_id,
            spec=spec.model_dump(mode="json"),
            status="done",
            designs=designs,
            result={"objectives": list(spec.objectives), "workloads": workloads},
            design_fields={
                "index": index.tolist(),
                "fields": {path: values[index].tolist() for path, values in table.items()},
            },
            front_designs={},
        )
        db.add(row)
        db.flush()
        return row.id


def ask(base: str, path: str, compressed: bool) -> tuple[float, int, int]:
    """Wall seconds, bytes on the wire, bytes of the JSON."""
    headers = {"Accept-Encoding": "gzip" if compressed else "identity"}
    started = time.perf_counter()
    with httpx.stream("GET", base + path, headers=headers, timeout=120) as answer:
        answer.raise_for_status()
        wire = b"".join(answer.iter_raw())
        seconds = time.perf_counter() - started
        encoded = answer.headers.get("content-encoding") == "gzip"
    return seconds, len(wire), len(gzip.decompress(wire) if encoded else wire)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--admin-url", required=True, help="creates and drops the database")
    parser.add_argument("--broker-url", default="redis://127.0.0.1:6379/14")
    parser.add_argument("--designs", type=int, default=20_000)
    parser.add_argument("--sample-size", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--code", default="this=.", help="NAME=FOLDER,...: one server per tree")
    args = parser.parse_args()
    trees = dict(item.split("=", 1) for item in args.code.split(","))
    name = f"orrery_bench_sample_{uuid.uuid4().hex[:8]}"
    admin = create_engine(args.admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(args.admin_url).set(database=name).render_as_string(hide_password=False)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORRERY_")}
    env.update(
        ORRERY_DATA_DIR=tempfile.mkdtemp(prefix="orrery-bench-"), ORRERY_SINGLE_USER="true",
        ORRERY_DATABASE_URL=url, ORRERY_BROKER_URL=args.broker_url,
        ORRERY_RESULT_BACKEND=args.broker_url, ORRERY_RECONCILE_INTERVAL="0",
    )  # fmt: skip
    orrery = str(Path(sys.executable).parent / "orrery")
    servers: dict[str, tuple[str, subprocess.Popen[bytes]]] = {}
    try:
        for tree, folder in trees.items():  # one at a time: the first migrates
            port = free_port()
            process = subprocess.Popen(
                [orrery, "serve", "--no-with-worker", "--port", str(port), "--workers", "1"],
                env={**env, "PYTHONPATH": str(Path(folder).resolve())},
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            servers[tree] = (f"http://127.0.0.1:{port}", process)
            wait_until_up(servers[tree][0])
        first = next(iter(servers.values()))[0]
        made = httpx.post(f"{first}/api/v1/experiments", json=SPEC, timeout=30)
        made.raise_for_status()
        search_id = store_search(url, made.json()["id"], args.designs, args.sample_size)
        path = f"/api/v1/searches/{search_id}/sample"
        print(
            f"one done search of {args.designs} designs, a sample of {args.sample_size} and a "
            f"front of {FRONT} per technique ({', '.join(LABELS)}); PostgreSQL, loopback"
        )
        for tree, (base, process) in servers.items():
            plain = ask(base, path, compressed=False)  # first: computed by a fresh process
            times, cpu = [], []
            for _ in range(args.repeat):
                before = tree_cpu_seconds(process.pid)
                seconds, wire, size = ask(base, path, compressed=True)
                cpu.append(tree_cpu_seconds(process.pid) - before)
                times.append(seconds)
            print(
                f"[{tree}] {size:,} bytes of JSON, {wire:,} on the wire with gzip "
                f"({plain[1]:,} without); first request {plain[0] * 1000:.0f} ms; then wall "
                f"median {statistics.median(times) * 1000:.0f} ms (min {min(times) * 1000:.0f}), "
                f"server CPU median {statistics.median(cpu) * 1000:.0f} ms "
                f"(min {min(cpu) * 1000:.0f}; /proc counts 10 ms ticks) per request"
            )
    finally:
        for _, process in servers.values():
            process.terminate()
        for _, process in servers.values():
            process.wait(timeout=60)
        engine_for(url).dispose()
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


if __name__ == "__main__":
    main()
