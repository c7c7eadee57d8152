"""Load on the API from concurrent clients, loopback only, bounded in count and time.

Starts `orrery serve` (API only) on a free local port, stores N runs, then measures
- submission throughput: POST /api/v1/experiments from concurrent clients;
- for scale, the latency of GET /api/v1/auth/me (authentication and a small answer), then
- latency of GET /api/v1/runs (pages, sorted, filtered) with C concurrent clients: first a mix
  of five queries asked again and again, as dashboards do (answered from the read cache until
  a table they show is written; timed after a short warm-up in which each API process computes
  each page once), then the same mix with every page new (computed each time).

    python benchmarks/api_load.py                                   # embedded SQLite
    python benchmarks/api_load.py \
        --database-url postgresql+psycopg://postgres@127.0.0.1:5432/bench \
        --broker-url redis://127.0.0.1:6379/9

`--writer` also starts a Celery worker and, before the reads, submits an experiment of several
small trainings (MLP on digits, one per seed) for it: while the clients read, the worker
reports progress about once a second and stores results, so the database changes under the
readers as it does in use. Each read phase then prints how many transactions wrote anywhere in
the database cluster meanwhile (PostgreSQL).

`--writer-nice 0,10` starts one server per niceness of the writer (the same code) and sets the
writer's niceness before each server's turn: the same writer, in and out of the API's way.

`--mix` replaces the /runs read phases with what a user opens, the issue's "holds under load"
mix: the seven routes below, round robin (`MIX_ROUTES`), every client going through them in turn
(`/auth/me`, run table page 1, a filtered and sorted page, `/runs/groups` over every run, a run
detail, a CSV export of about 1,000 rows and a dashboard's chart data). It prints, in one run:
`/auth/me` alone, then the mix with each route's throughput and p50/p95/p99, then /runs pages
never asked before, and whether the targets are met (the mix at >= 50 requests/s with p99 < 2 s,
/auth/me p99 < 200 ms during it, new pages at >= 50% of the /auth/me-alone throughput).

    python benchmarks/api_load.py --mix --writer --max-seconds 60 --requests 1000000 \
        --database-url postgresql+psycopg://postgres@127.0.0.1:5432/bench \
        --broker-url redis://127.0.0.1:6379/14

Measured on a 2-core machine shared with other work (load average 10-14 meanwhile), PostgreSQL,
`--mix --writer`, 50 clients, 60 s: before the seed groups moved into the database and the heavy
reads were limited, 3.1 requests/s with p50 12-23 s on every route, /auth/me included; after, with
`--workers 2`, 12.2 requests/s (/auth/me alone: 273/s), cheap routes p50 0.1-0.2 s and heavy
ones 6.5-8.8 s, waiting their turn. `heavy_reads.py` gives each route's CPU cost alone.

`--code before=DIR,after=DIR` starts one server per source tree on the same database (the
oldest schema first: it migrates, the next migrates further) and runs every phase against each
in turn, `--rounds` turns each, so that both see the same data, writer and neighbours:

    python benchmarks/api_load.py --mix --writer --max-seconds 60 --requests 1000000 \
        --workers 2 --rounds 3 --code before=OLD_TREE,after=. \
        --database-url postgresql+psycopg://postgres@127.0.0.1:5432/bench \
        --broker-url redis://127.0.0.1:6379/13

Read answers keyed on the cluster's snapshot (before) against the per-table change log with
shared misses (after), one such run at load average 15-21: the mix 149 -> 186 requests/s, p99
2.26 -> 1.86 s (groups 2.42 -> 1.85 s, export 2.61 -> 2.13 s, chart data 2.68 -> 2.51 s);
/auth/me in the mix p99 0.94 -> 1.02 s; new pages 60 -> 65 requests/s, 24-26% of /auth/me
alone. A second run (load average 3 at its start, 12-16 by its end): 163.5 -> 170.6 requests/s,
p99 2.05 -> 1.91 s (groups 2.83 -> 2.15 s, export 2.61 -> 2.28 s, chart data 3.12 -> 2.25 s),
/auth/me in the mix p99 0.97 -> 0.98 s, new pages 61 -> 59 requests/s. In both the writer
committed 0.8 progress, 0.7 trainings, 0.6 epoch and 0.2 runs transactions a second.
Pages read off an index (visibility as a semi-join on runs, one statement per page, descending
NULLS LAST indexes on the headline figures: backend/db/sort_indexes.py) against the tree before,
the same command with 40 s per server, at load average 4 rising to 16 (a paper check training
beside it): the mix 281.6 -> 330.2 requests/s, p99 1.34 -> 0.99 s; /auth/me in the mix p99 628
-> 574 ms; new pages 95.1 -> 106.8 requests/s, 23% -> 27% of /auth/me alone (410 and 391/s).
Measured per request, sequentially (API and PostgreSQL CPU time read from /proc), a new page at
offset 1,000-1,400 cost 13.8 ms of CPU before and 11.9 ms after; /auth/me 2.5-3 ms.
Tried against that tree in the same way and left out, no gain: a GIL switch interval of 1 ms
(mix 326 -> 297 requests/s, /auth/me in the mix p99 565 -> 692 ms) and one heavy read at a
time per process instead of two (308 -> 301 requests/s, p99 656 -> 741 ms). In every one of
these runs /auth/me alone, with nothing else asked, had a p99 of 390-540 ms: 50 clients driven
from one process on the same two cores as the servers, the writer and PostgreSQL.
Measured later on a quieter machine (load average 1-11), one run each:
- The stored runs are now given `VACUUM ANALYZE` before the phases (`settle`). Before, the
  phases began on an empty table's statistics: the planner expected 5 visible experiments (101
  were) and sorted whole result sets, so new pages cost 15-50 ms in PostgreSQL until autovacuum
  caught up. With it, the tree of the index change above: new pages 162 requests/s, 20% of
  /auth/me alone (793/s); without it, in the run before, 65-68 requests/s (10-12%).
- Tried and left out: admission cheapest first (a slot that frees goes to a waiting cheap
  request, then a page, then a heavy read), at 16 and at 4 slots per process, against the tree
  before in one run (`--code before=...,prio16=...,prio4=...`): the mix 408 / 317 / 269
  requests/s, /auth/me in the mix p99 378 / 312 / 403 ms, /auth/me alone p99 225 / 201 / 210
  ms. Heavy reads already wait for a heavy turn before they ask for a slot, so the gate only put
  pages behind cheap requests; it cost the mix throughput and did not bring /auth/me below what
  it is alone.
- Tried and left out: page indexes carrying `experiment_id` and `technique` (`INCLUDE`), both
  directions and on id, so a deep page is walked in the index alone (EXPLAIN ANALYZE at offset
  3,000: 5.7 -> 1.7 ms). Under load, one API process, the two index sets swapped between 10 s
  turns, three turns each: new pages 105.8 against 101.6 requests/s, PostgreSQL CPU per page
  2.7 against 3.3 ms. Five more indexes on runs for 4%: not kept.
- Where a page's time goes, one API process, CPU read from /proc over 10 s of 50 clients: a new
  page costs the API 6.6 ms and PostgreSQL 2.3 ms; /auth/me 2.7 ms and 0.5 ms. The API process
  is the bottleneck (0.9 of a core). Sampled while it holds the interpreter lock (py-spy
  `--gil`), a page is list_runs 33% (its 50 rows validated 10%, executing its statements 18%),
  dependencies 13% (the user's lookup 9%), the change marker 6%, and HTTP parsing, middleware
  and sending the rest. For new pages at 50% of /auth/me, a page would have to cost at most
  twice a request that only authenticates, while its own query and rows already cost about as
  much as that whole request.
- The writer yields the CPU (worker/cpu_priority.py): `--writer-nice 0,10`, one run, the same
  code and writer, its niceness set before each server's turn: the mix 309.0 -> 520.5
  requests/s, p99 1.13 -> 0.70 s (groups p95 713 -> 130 ms, export p95 948 -> 285 ms), /auth/me
  in the mix p99 414 -> 373 ms, new pages 124.8 -> 149.3 requests/s (25% -> 30% of /auth/me
  alone); /auth/me alone 504 and 501 requests/s, p99 364 and 365 ms either way.
- /auth/me alone is bounded by the server, not by this client: against the same two API
  processes with nothing else running, wrk (C, one thread, 50 connections, 10 s) measured 626
  requests/s with p50 83 ms and p99 245 ms, this script 609 requests/s. With 50 clients always
  waiting, the mean latency is 50 / throughput (80 ms at 625/s), so a p99 under 200 ms for
  /auth/me amid heavier requests needs either many more requests per second from two cores or
  /auth/me served ahead of them (tried above, left out).
Runs of the same command spread widely with the neighbours' load. Earlier
runs with one topic for every table's writes (so epochs and dispatch ended every cached answer)
measured the snapshot against the log at 19.5 vs 18.1 requests/s (misses not yet shared; the
cluster's other databases writing 4-5 transactions a second), 121 vs 106 (misses shared) and
149 vs 151 (and the t quantiles remembered): only with the split by table did the log come
out ahead (one run each, so indicative). The first seed-group request of a fresh API process
cost 940 ms of CPU before (importing scipy.stats) and 47 ms once that import moved to start-up.

`--open-loop RATE --writer` offers the mix at a fixed arrival rate instead of from a fixed
number of clients: request i is sent at start + i / RATE whether or not earlier ones were
answered (open loop: a slow server meets more requests in flight, not fewer requests), the
seven `MIX_ROUTES` in equal shares, round robin. A send that leaves more than `LATE_AFTER` after
its time (this process fell behind, or `--max-in-flight` requests were already out) is counted
late and reported; latency runs from the scheduled time, so a late send's wait counts too. Each
turn lasts `--max-seconds / --rounds`, sends at most RATE x its seconds requests, then waits
at most CLIENT_TIMEOUT for the answers still out (counted as given up after that). Turns
alternate with turns of no reads at all, of the same length: the writer's trainings (one
training per seed of `WRITER_SPEC`, its Celery worker beside the servers) are measured in both
as trainings completed per minute, counting a running training's reported progress as the
fraction of a training it is. Printed per server: every route's p50 and p99, the late sends
and those given up, trainings per minute against the no-read rate, and the targets (every
route's p99 under 500 ms; trainings at >= 50% of their no-read rate). With `--read-cache
on,off` each setting gets its turns in the same run, against the same no-read turns:

    python benchmarks/api_load.py --open-loop 100 --writer --writer-trainings 200 \
        --read-cache on,off --rounds 3 --max-seconds 120 --workers 2 \
        --database-url postgresql+psycopg://postgres@127.0.0.1:5432/bench \
        --broker-url redis://127.0.0.1:6379/14

The writer needs trainings for the whole run: (1 + servers) x --max-seconds of training.

`--read-cache on,off` (PostgreSQL) starts one API server per setting of the read cache
(`ORRERY_READ_CACHE_ENTRIES`, 0 for off) on the same database, and runs every read phase
against them in turn, alternating, `--rounds` times each: both see the same data and the same
writer. The figures per phase and setting are requests/s and p50/p95/p99 latency.
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
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import httpx
from sqlalchemy import create_engine, insert, select, text
from sqlalchemy.pool import NullPool

from backend.db.change_log import MARKER_QUERY
from backend.db.models import Run
from backend.db.session import session_scope

WRITER_SPEC = {
    "name": "writer",
    "training": {"model": "mlp", "dataset": "digits", "epochs": 4},
    "techniques": [{"name": "mercury"}],
    "accelerators": ["edge"],
}
CACHE_ENTRIES = {"on": "256", "off": "0"}
CLIENT_TIMEOUT = 60  # seconds; a request not answered by then is counted as given up
LATE_AFTER = 0.010  # seconds after its scheduled time: an open-loop send counted late
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


def settle(database_url: str) -> None:
    """On PostgreSQL, what autovacuum does to a table that grew over days and the bulk copy has
    not yet had: the planner's statistics and the visibility map index-only scans read. Without
    it the phases start on an empty table's statistics (the planner guessed 5 visible
    experiments, not 101, and sorted whole result sets: deep pages cost 15-50 ms in PostgreSQL
    instead of 2-8) until autovacuum catches up, part way through a phase."""
    if not database_url.startswith("postgresql"):
        return
    engine = create_engine(database_url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.execute(text("VACUUM ANALYZE"))
    engine.dispose()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def hammer(
    base: str,
    clients: int,
    requests: int,
    make,
    deadline: float,
    routes: dict[str, list[float]] | None = None,
) -> list[float]:
    """`requests` calls spread over `clients` concurrent clients; latency of each, seconds.
    With `routes`, each latency is also added to the list of its request's label (`make` then
    returns a fourth item, the label).

    The load comes from aiohttp, which spends about a third of httpx's CPU per request: on a
    small machine the load generator shares the cores with the server, and a heavy client
    would be measured as server latency.
    """
    latencies: list[float] = []
    counter = iter(range(requests))
    timeouts: dict[str, int] = {}

    async def client_loop(session: aiohttp.ClientSession) -> None:
        for i in counter:
            if time.monotonic() > deadline:
                return
            method, path, kwargs, *label = make(i)
            started = time.perf_counter()
            try:
                async with session.request(method, path, **kwargs) as response:
                    body = await response.read()
            except TimeoutError:  # counted, not a latency: the client gave up at the timeout
                timeouts[label[0] if label else path] = (
                    timeouts.get(label[0] if label else path, 0) + 1
                )
                continue
            latencies.append(time.perf_counter() - started)
            if routes is not None:
                routes.setdefault(label[0], []).append(latencies[-1])
            if response.status >= 400:
                raise RuntimeError(f"{method} {path}: HTTP {response.status} {body[:200]!r}")

    connector = aiohttp.TCPConnector(limit=clients)
    timeout = aiohttp.ClientTimeout(total=CLIENT_TIMEOUT)
    async with aiohttp.ClientSession(base, connector=connector, timeout=timeout) as session:
        await asyncio.gather(*(client_loop(session) for _ in range(clients)))
    if timeouts:
        print(f"  requests given up after {CLIENT_TIMEOUT} s: {timeouts}")
    return latencies


def report(label: str, latencies: list[float], seconds: float, note: str = "") -> None:
    if not latencies:
        print(f"{label:<60} no request finished")
        return
    print(
        f"{label:<60} {len(latencies):>6} requests  {len(latencies) / seconds:8.1f} req/s  "
        f"p50 {statistics.median(latencies) * 1000:7.1f} ms  "
        f"p95 {percentile(latencies, 0.95) * 1000:7.1f} ms  "
        f"p99 {percentile(latencies, 0.99) * 1000:7.1f} ms{note}"
    )


def phase(
    label: str, base: str, clients: int, requests: int, make, max_seconds: float
) -> list[float]:
    """Run one load phase and print its figures; the latencies, seconds."""
    started = time.perf_counter()
    latencies = asyncio.run(hammer(base, clients, requests, make, time.monotonic() + max_seconds))
    report(f"{label} ({clients} clients)", latencies, time.perf_counter() - started)
    return latencies


def next_transaction_id(database_url: str) -> int | None:
    """The id the cluster's next writing transaction gets (PostgreSQL; None elsewhere): the
    difference over a phase is how many transactions wrote meanwhile, anywhere in the cluster."""
    if not database_url.startswith("postgresql"):
        return None
    engine = create_engine(database_url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            return int(connection.scalar(text("SELECT pg_snapshot_xmax(pg_current_snapshot())")))
    finally:
        engine.dispose()


def compared_phase(
    label: str,
    bases: dict[str, str],
    args: argparse.Namespace,
    make,
    database_url: str,
) -> None:
    """One read phase against every server in turn, `args.rounds` times, each turn
    `args.max_seconds / args.rounds` long; then the figures per server over its turns."""
    latencies: dict[str, list[float]] = {name: [] for name in bases}
    seconds: dict[str, float] = dict.fromkeys(bases, 0.0)
    writes: dict[str, int] = dict.fromkeys(bases, 0)
    turn = args.max_seconds / args.rounds
    for _ in range(args.rounds):
        for name, base in bases.items():
            xid = next_transaction_id(database_url)
            started = time.perf_counter()
            latencies[name] += asyncio.run(
                hammer(base, args.clients, args.requests, make, time.monotonic() + turn)
            )
            seconds[name] += time.perf_counter() - started
            if xid is not None:
                writes[name] += (next_transaction_id(database_url) or xid) - xid
    for name in bases:
        note = (
            f"  ({writes[name] / seconds[name]:.1f} writing transactions/s in the cluster)"
            if database_url.startswith("postgresql")
            else ""
        )
        report(f"{label}, read cache {name} ({args.clients} clients)", latencies[name],
               seconds[name], note)  # fmt: skip


def committed_writes(database_url: str) -> dict[str, int]:
    """Per change topic, the writing transactions committed so far in this database (its
    change log, db/change_log.py; empty where there is none)."""
    if not database_url.startswith("postgresql"):
        return {}
    engine = create_engine(database_url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            if connection.scalar(text("SELECT to_regclass('change_log')")) is None:
                return {}
            return {topic: total for topic, total, _ in connection.execute(MARKER_QUERY)}
    finally:
        engine.dispose()


def wait_until_up(base: str) -> None:
    for _ in range(100):
        try:
            if httpx.get(f"{base}/api/v1/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise SystemExit(f"the server at {base} did not start")


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
    parser.add_argument(
        "--writer", action="store_true", help="a Celery worker trains while the clients read"
    )
    parser.add_argument(
        "--writer-trainings", type=int, default=30, help="trainings (seeds) the writer has to do"
    )
    parser.add_argument(
        "--writer-processes", type=int, default=1, help="the writer's training processes"
    )
    parser.add_argument(
        "--writer-nice",
        help="N or N,M: the writer's CPU niceness (ORRERY_WORKER_NICE); with two, one server "
        "per value (same code, same writer), the writer reniced before each server's turn",
    )
    parser.add_argument(
        "--read-cache",
        help="'on,off' (or one of them): one server per setting, read phases alternate",
    )
    parser.add_argument(
        "--code",
        help="NAME=FOLDER,...: one server per source tree (oldest schema first: the first "
        "migrates), read phases alternate between them; the writer runs the last tree's code",
    )
    parser.add_argument(
        "--rounds", type=int, default=2, help="turns per server in each compared phase"
    )
    parser.add_argument(
        "--mix", action="store_true", help="the issue's mix of what a user opens (MIX_ROUTES)"
    )
    parser.add_argument(
        "--open-loop",
        type=float,
        metavar="RATE",
        help="the mix at RATE requests/s on schedule, alternating with turns of no reads "
        "(needs --writer: trainings per minute with and without the reads)",
    )
    parser.add_argument(
        "--max-in-flight", type=int, default=1000, help="open loop: requests out at once, at most"
    )
    args = parser.parse_args()
    settings = args.read_cache.split(",") if args.read_cache else []
    if any(name not in CACHE_ENTRIES for name in settings):
        raise SystemExit(f"--read-cache: each setting is one of {', '.join(CACHE_ENTRIES)}")
    trees = dict(item.split("=", 1) for item in args.code.split(",")) if args.code else {}
    nice = [int(n) for n in args.writer_nice.split(",")] if args.writer_nice else []
    if sum(map(bool, (settings, trees, len(nice) > 1))) > 1:
        raise SystemExit("--read-cache, --code and two --writer-nice: one comparison at a time")
    if nice and not args.writer:
        raise SystemExit("--writer-nice needs --writer")
    if args.open_loop is not None and (not args.writer or args.open_loop <= 0):
        raise SystemExit("--open-loop: needs --writer and a rate above 0 requests/s")

    data_dir = Path(tempfile.mkdtemp(prefix="orrery-bench-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORRERY_")}
    env.update(ORRERY_DATA_DIR=str(data_dir), ORRERY_SINGLE_USER="true")
    if args.database_url:
        env["ORRERY_DATABASE_URL"] = args.database_url
    if args.broker_url:
        env["ORRERY_BROKER_URL"] = env["ORRERY_RESULT_BACKEND"] = args.broker_url
    if nice:
        env["ORRERY_WORKER_NICE"] = str(min(nice))
    database_url = args.database_url or f"sqlite:///{data_dir / 'orrery.db'}"
    orrery = str(Path(sys.executable).parent / "orrery")
    bases: dict[str, str] = {}
    processes: list[subprocess.Popen[bytes]] = []
    if trees:  # the writer and this script's own database writes use the newest code
        env["PYTHONPATH"] = str(Path(list(trees.values())[-1]).resolve())
    try:
        niced = {f"writer nice {n}": n for n in nice} if len(nice) > 1 else {}
        for name in settings or list(trees) or list(niced) or ["default"]:
            port = free_port()
            server_env = dict(env)
            if name in CACHE_ENTRIES:
                server_env["ORRERY_READ_CACHE_ENTRIES"] = CACHE_ENTRIES[name]
            if name in trees:
                server_env["PYTHONPATH"] = str(Path(trees[name]).resolve())
            processes.append(subprocess.Popen(
                [orrery, "serve", "--no-with-worker", "--port", str(port),
                 "--workers", str(args.workers)],
                env=server_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            ))  # fmt: skip
            bases[name] = f"http://127.0.0.1:{port}"
            wait_until_up(bases[name])  # one at a time: the first migrates the database
        base = next(iter(bases.values()))

        print(
            f"server: {database_url.split('://')[0]}, {args.workers} API process(es) per server, "
            f"{args.clients} clients, loopback only"
            + (f"; read cache {' and '.join(settings)}, one server each" if settings else "")
            + (f"; code {', '.join(f'{k} ({v})' for k, v in trees.items())}" if trees else "")
            + ("; one server per writer niceness, same code" if niced else "")
        )
        if args.writer:
            processes.append(subprocess.Popen(
                [orrery, "worker", "--concurrency", str(args.writer_processes),
                 "--loglevel", "WARNING"],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            ))  # fmt: skip
            if niced:
                writer = processes[-1].pid
                args.before_turn = lambda name: renice_tree(writer, niced[name])
            spec = {**WRITER_SPEC, "seeds": list(range(args.writer_trainings))}
            answer = httpx.post(f"{base}/api/v1/experiments", json=spec, timeout=30)
            answer.raise_for_status()
            args.writer_experiment = answer.json()["id"]
            print(
                f"writer: a Celery worker ({args.writer_processes} process(es)) training "
                f"experiment {answer.json()['id']}, {args.writer_trainings} trainings of "
                f"{WRITER_SPEC['training']}"
            )
        phase("POST /experiments", base, 10, args.submissions,
              lambda i: ("POST", "/api/v1/experiments", {"json": {**SPEC, "name": f"load {i}"}}),
              args.max_seconds)  # fmt: skip

        seed_runs(database_url, args.runs)
        settle(database_url)
        total = httpx.get(f"{base}/api/v1/runs", params={"limit": 1}).json()["total"]
        print(f"stored runs: {total}")
        if args.open_loop is not None:
            open_loop_mix(bases, args, database_url)
            return
        if settings:
            compare_read_cache(bases, args, database_url)
            return
        if args.mix:
            user_mix(bases, args)
            return
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
        phase("GET /runs, every query new", *load, new_query, args.max_seconds)
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:  # still at work on requests the clients gave up
                process.kill()
                process.wait()


MIX_ROUTES = (
    "/auth/me",
    "/runs page 1",
    "/runs filtered, sorted",
    "/runs/groups",
    "/runs/{id}",
    "/runs/export (csv)",
    "/dashboards/{id}/data",
)


def mix_requests(base: str) -> tuple[int, object]:
    """What the mix asks (a dashboard charting the 200 fastest runs is created here), and the
    number of rows its export has."""
    api = f"{base}/api/v1"
    # The export: the ~1,000 runs of highest speedup (the 1,000th run's speedup as the bound).
    at = httpx.get(f"{api}/runs", params={"sort": "-speedup", "limit": 1, "offset": 999}).json()
    threshold = at["items"][0]["speedup"]
    export = {"format": "csv", "range": f"speedup:{threshold}:", "sort": "-speedup"}
    rows = httpx.get(f"{api}/runs", params={"range": export["range"], "limit": 1}).json()["total"]
    run_ids = [
        item["id"] for item in httpx.get(f"{api}/runs", params={"limit": 500}).json()["items"]
    ]
    config = {"filters": {"sort": "-speedup"}}
    answer = httpx.post(f"{api}/dashboards", json={"name": "load", "config": config}, timeout=30)
    answer.raise_for_status()
    dashboard = answer.json()["id"]
    asked: list[tuple[str, dict]] = [
        ("/api/v1/auth/me", {}),
        ("/api/v1/runs", {"params": {"limit": 50}}),
        ("/api/v1/runs", {"params": {"limit": 50, "technique": "mercury", "sort": "-speedup"}}),
        ("/api/v1/runs/groups", {}),
        ("", {}),  # a run detail, a different run each time
        ("/api/v1/runs/export", {"params": export}),
        (f"/api/v1/dashboards/{dashboard}/data", {}),
    ]

    def make(i: int) -> tuple[str, str, dict, str]:
        # Round robin: the i-th request (over all clients) asks route i % 7.
        route = i % len(MIX_ROUTES)
        path, kwargs = asked[route]
        if not path:
            path = f"/api/v1/runs/{run_ids[(i // len(MIX_ROUTES)) % len(run_ids)]}"
        return "GET", path, kwargs, MIX_ROUTES[route]

    return rows, make


@dataclass
class Turns:
    """One server's requests over its turns of a phase: latencies (all, and per route) and
    the seconds its turns lasted."""

    latencies: list[float] = field(default_factory=list)
    routes: dict[str, list[float]] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.seconds if self.seconds else 0.0


def renice_tree(pid: int, niceness: int) -> None:
    """Set the niceness of every thread of a process and of its descendants (on Linux
    niceness is per thread). Lowering it needs the right to (root)."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (FileNotFoundError, ProcessLookupError):
            continue  # a process that ended meanwhile
    tree, queue = [], [pid]
    while queue:
        tree.append(queue.pop())
        queue += [child for child, parent in parents.items() if parent == tree[-1]]
    for process in tree:
        for task in Path(f"/proc/{process}/task").glob("*"):
            try:
                os.setpriority(os.PRIO_PROCESS, int(task.name), niceness)
            except (ProcessLookupError, FileNotFoundError):
                continue  # a thread that ended meanwhile
            except PermissionError as exc:
                raise SystemExit(f"--writer-nice: cannot set niceness {niceness}: {exc}") from exc


def alternating(bases: dict[str, str], args: argparse.Namespace, make) -> dict[str, Turns]:
    """One phase against every server in turn, `args.rounds` turns each, `args.max_seconds`
    in all per server (one turn for a single server). A server's request numbers go on from
    one of its turns to the next, so that phases asking "new" pages never repeat one.
    `args.before_turn(name)`, where given, runs before each turn (the writer's niceness)."""
    before_turn = getattr(args, "before_turn", lambda name: None)
    rounds = args.rounds if len(bases) > 1 else 1
    turns = {name: Turns() for name in bases}
    asked = dict.fromkeys(bases, 0)
    for _ in range(rounds):
        for name, base in bases.items():

            def numbered(i: int, name: str = name, start: int = asked[name]):
                asked[name] = max(asked[name], start + i + 1)
                return make(start + i)

            before_turn(name)
            began = time.perf_counter()
            turns[name].latencies += asyncio.run(
                hammer(base, args.clients, args.requests, numbered,
                       time.monotonic() + args.max_seconds / rounds, turns[name].routes)
            )  # fmt: skip
            turns[name].seconds += time.perf_counter() - began
    return turns


def labelled(make):
    """`make` with a label (its path) on each request, as `hammer`'s routes need."""

    def with_label(i: int) -> tuple[str, str, dict, str]:
        method, path, kwargs = make(i)
        return method, path, kwargs, path

    return with_label


def user_mix(bases: dict[str, str], args: argparse.Namespace) -> None:
    """/auth/me alone, the mix per route, then pages never asked before, on each server (in
    alternating turns when there are several); and the targets per server."""
    print(f"load average before the phases: {os.getloadavg()}")
    if len(bases) > 1:
        print(f"each phase: {args.rounds} turns per server of {args.max_seconds / args.rounds:.0f}"
              f" s, alternating ({args.max_seconds:.0f} s per server)")  # fmt: skip
    me = labelled(lambda i: ("GET", "/api/v1/auth/me", {}))
    alone = alternating(bases, args, me)
    for name, turns in alone.items():
        report(f"[{name}] GET /auth/me alone ({args.clients} clients)", turns.latencies,
               turns.seconds)  # fmt: skip
    makes = {}
    for name, base in bases.items():
        rows, makes[name] = mix_requests(base)
    print(f"mix: {', '.join(MIX_ROUTES)} round robin; the export has {rows} rows")
    mixed: dict[str, Turns] = {name: Turns() for name in bases}
    rounds = args.rounds if len(bases) > 1 else 1
    writes, began = committed_writes(args.database_url or ""), time.perf_counter()
    for _ in range(rounds):
        for name, base in bases.items():
            one = alternating({name: base}, args_with(args, args.max_seconds / rounds),
                              makes[name])[name]  # fmt: skip
            mixed[name].latencies += one.latencies
            mixed[name].seconds += one.seconds
            for route, latencies in one.routes.items():
                mixed[name].routes.setdefault(route, []).extend(latencies)
    for name, turns in mixed.items():
        for route in MIX_ROUTES:
            report(f"  [{name}] mix: GET {route}", turns.routes.get(route, []), turns.seconds)
        report(f"[{name}] mix, all routes ({args.clients} clients)", turns.latencies,
               turns.seconds)  # fmt: skip
    print(f"load average after the mix: {os.getloadavg()}")
    seconds = time.perf_counter() - began
    after = committed_writes(args.database_url or "")
    if after:
        rates = ", ".join(f"{t} {(n - writes.get(t, 0)) / seconds:.1f}" for t, n in after.items())
        print(f"writing transactions committed during the mix, per second by topic: {rates}")
    new = alternating(bases, args, labelled(new_query))
    for name, turns in new.items():
        report(f"[{name}] GET /runs, pages never asked before ({args.clients} clients)",
               turns.latencies, turns.seconds)  # fmt: skip
    for name in bases:
        latencies, me_in_mix = mixed[name].latencies, mixed[name].routes.get(MIX_ROUTES[0], [])
        checks = {
            "mix >= 50 requests/s": mixed[name].rate >= 50,
            "mix p99 < 2 s": bool(latencies) and percentile(latencies, 0.99) < 2.0,
            "/auth/me p99 < 200 ms during the mix": bool(me_in_mix)
            and percentile(me_in_mix, 0.99) < 0.2,
            "new pages >= 50% of /auth/me alone": new[name].rate >= 0.5 * alone[name].rate,
        }
        verdicts = "; ".join(f"{k}: {'met' if ok else 'NOT met'}" for k, ok in checks.items())
        share = new[name].rate / alone[name].rate
        print(f"[{name}] new pages at {share:.0%} of /auth/me alone; targets: {verdicts}")


@dataclass
class OpenLoop:
    """One server's open-loop turns: latencies per route (from each request's scheduled
    time), sends counted late, requests given up or refused, seconds of the turns, and the
    trainings the writer completed meanwhile."""

    routes: dict[str, list[float]] = field(default_factory=dict)
    sent: int = 0
    late: int = 0
    given_up: int = 0
    errors: int = 0
    sending: float = 0.0  # seconds spent sending
    seconds: float = 0.0  # and waiting for the last answers
    trainings: float = 0.0

    @property
    def trainings_per_minute(self) -> float:
        return 60 * self.trainings / self.seconds if self.seconds else 0.0


async def send_on_schedule(
    base: str, rate: float, seconds: float, make, max_in_flight: int, into: OpenLoop
) -> None:
    """Request i at start + i / rate for `seconds`, each on its own task; then wait for the
    answers still out, at most CLIENT_TIMEOUT."""
    in_flight = asyncio.Semaphore(max_in_flight)

    async def one(session: aiohttp.ClientSession, i: int, due: float) -> None:
        method, path, kwargs, label = make(i)
        try:
            async with session.request(method, path, **kwargs) as response:
                await response.read()
            if response.status >= 400:
                into.errors += 1
            else:
                into.routes.setdefault(label, []).append(time.monotonic() - due)
        except TimeoutError:
            into.given_up += 1
        except aiohttp.ClientError:  # the server dropped the connection: refused, in effect
            into.errors += 1
        finally:
            in_flight.release()

    connector = aiohttp.TCPConnector(limit=max_in_flight)
    timeout = aiohttp.ClientTimeout(total=CLIENT_TIMEOUT)
    tasks = []
    async with aiohttp.ClientSession(base, connector=connector, timeout=timeout) as session:
        start = time.monotonic()
        for i in range(int(rate * seconds)):
            due = start + i / rate
            if due > time.monotonic():
                await asyncio.sleep(due - time.monotonic())
            await in_flight.acquire()
            if time.monotonic() - due > LATE_AFTER:
                into.late += 1
            tasks.append(asyncio.create_task(one(session, i, due)))
            into.sent += 1
        into.sending += time.monotonic() - start
        await asyncio.gather(*tasks)


def training_progress(database_url: str, experiment_id: int) -> float:
    """Trainings of the experiment done, plus the reported fraction of each still running."""
    engine = create_engine(database_url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            return float(connection.scalar(
                text("SELECT coalesce(sum(CASE WHEN status = 'done' THEN 1 "
                     "WHEN status = 'running' THEN progress ELSE 0 END), 0) "
                     "FROM trainings WHERE experiment_id = :id"),
                {"id": experiment_id},
            ))  # fmt: skip
    finally:
        engine.dispose()


def open_loop_mix(bases: dict[str, str], args: argparse.Namespace, database_url: str) -> None:
    """The mix on schedule against each server in turn, alternating with turns of no reads;
    per server every route's p50/p99 and the writer's trainings per minute against the
    no-read rate, with the targets."""
    rate, turn = args.open_loop, args.max_seconds / args.rounds
    makes = {name: mix_requests(base)[1] for name, base in bases.items()}
    print(
        f"open loop: {rate:g} requests/s ({', '.join(MIX_ROUTES)}, equal shares), "
        f"{args.rounds} turns of {turn:.0f} s per server, alternating with as many turns of "
        f"no reads; load average {os.getloadavg()}"
    )
    quiet, turns = OpenLoop(), {name: OpenLoop() for name in bases}
    done = training_progress(database_url, args.writer_experiment)
    for _ in range(args.rounds):
        for name in [None, *bases]:  # None: a turn of no reads
            into = quiet if name is None else turns[name]
            began = time.monotonic()
            if name is None:
                time.sleep(turn)
            else:
                asyncio.run(send_on_schedule(bases[name], rate, turn, makes[name],
                                             args.max_in_flight, into))  # fmt: skip
            into.seconds += time.monotonic() - began
            now = training_progress(database_url, args.writer_experiment)
            into.trainings, done = into.trainings + now - done, now
    if done >= args.writer_trainings:
        print("  the writer ran out of trainings: its rates are low bounds (--writer-trainings)")
    print(f"load average after: {os.getloadavg()}")
    print(f"no reads: trainings {quiet.trainings_per_minute:.2f}/min over {quiet.seconds:.0f} s")
    for name, result in turns.items():
        answered = sum(len(latencies) for latencies in result.routes.values())
        print(
            f"[{name}] {result.sent} sent ({result.sent / result.sending:.1f}/s over "
            f"{result.sending:.0f} s; {result.seconds:.0f} s with the last answers, over which "
            f"trainings are counted), {answered} answered, {result.late} sent late "
            f"(> {LATE_AFTER * 1000:.0f} ms), {result.given_up} given up, {result.errors} refused"
        )
        for route in MIX_ROUTES:
            latencies = result.routes.get(route, [])
            figures = (
                f"p50 {statistics.median(latencies) * 1000:7.1f} ms  "
                f"p99 {percentile(latencies, 0.99) * 1000:7.1f} ms"
                if latencies
                else "no answer"
            )
            print(f"  [{name}] GET {route:<24} {len(latencies):>6} answered  {figures}")
        share = (
            result.trainings_per_minute / quiet.trainings_per_minute
            if quiet.trainings_per_minute
            else 0.0
        )
        slow = [
            route
            for route in MIX_ROUTES
            if not result.routes.get(route) or percentile(result.routes[route], 0.99) >= 0.5
        ]
        print(
            f"[{name}] trainings {result.trainings_per_minute:.2f}/min, {share:.0%} of the "
            f"no-read rate; targets: every route's p99 < 500 ms: "
            f"{'met' if not slow else 'NOT met (' + ', '.join(slow) + ')'}; trainings >= 50%: "
            f"{'met' if share >= 0.5 else 'NOT met'}"
        )


def args_with(args: argparse.Namespace, max_seconds: float) -> argparse.Namespace:
    return argparse.Namespace(**{**vars(args), "max_seconds": max_seconds, "rounds": 1})


def new_query(i: int) -> tuple[str, str, dict]:
    return "GET", "/api/v1/runs", {"params": {**QUERIES[i % len(QUERIES)], "offset": i}}


def compare_read_cache(bases: dict[str, str], args: argparse.Namespace, database_url: str) -> None:
    """The benchmark's read mix against each read-cache setting, alternating."""
    print(
        f"each phase: {args.rounds} turns per setting, {args.max_seconds / args.rounds:.0f} s "
        f"each ({args.max_seconds:.0f} s per setting), kept short on a shared machine"
    )
    for base in bases.values():  # each page computed once per server before timing
        asyncio.run(hammer(base, args.clients, 10 * len(QUERIES), repeated_query,
                           time.monotonic() + args.max_seconds))  # fmt: skip
    compared_phase("GET /auth/me, for scale", bases, args,
                   lambda i: ("GET", "/api/v1/auth/me", {}), database_url)  # fmt: skip
    compared_phase("GET /runs, repeated queries", bases, args, repeated_query, database_url)
    compared_phase("GET /runs, every query new", bases, args, new_query, database_url)


if __name__ == "__main__":
    main()
