"""GET /runs answers cached per database change marker: reused while nothing they show is
written, never stale, never shown to another user or past the caller's own validity; concurrent
misses computed once; markers read once for many requests, never older than a request; each
cached read names the tables it reads; a worker's progress and heartbeats, written by its own
code in another process, reach exactly the reads that show them; and API tokens that do not
write on every request."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import httpx
from fastapi.testclient import TestClient
from sqlalchemy import event, select, update
from sqlalchemy.ext.asyncio import create_async_engine

from backend.api.app import CACHED_READS, create_app
from backend.api.marker_reader import MarkerReader
from backend.auth.secrets import digest, new_secret
from backend.auth.sessions import SESSION_COOKIE
from backend.db import migrate
from backend.db.change_log import LIVENESS, PROGRESS
from backend.db.models import ApiToken, Base, Run, Training, User, UserSession
from backend.db.session import engine_for, session_scope
from backend.settings import Settings
from tests.conftest import ROOT, orrery_env
from tests.security.conftest import BASE_URL, World

QUERY = {"sort": "-accuracy", "limit": 5}


def runs_page(client: TestClient, headers: dict[str, str]) -> dict:
    response = client.get("/api/v1/runs", params=QUERY, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


@contextmanager
def app_statements(settings: Settings) -> Iterator[list[str]]:
    """The SQL statements the app runs on its own (synchronous) connections meanwhile."""
    statements: list[str] = []
    engine = engine_for(settings.effective_database_url)

    def record(conn, cursor, statement, parameters, context, executemany) -> None:  # type: ignore[no-untyped-def]
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield statements
    finally:
        event.remove(engine, "before_cursor_execute", record)


def test_a_hit_is_answered_before_the_app_runs(
    client: TestClient, accounts_settings: Settings, world: World
) -> None:
    first = runs_page(client, world.alice.auth)
    with app_statements(accounts_settings) as statements:
        assert runs_page(client, world.alice.auth) == first
    assert statements == []


def test_errors_are_not_cached(
    client: TestClient, accounts_settings: Settings, world: World
) -> None:
    for _ in range(2):
        with app_statements(accounts_settings) as statements:
            response = client.get(
                "/api/v1/runs", params={"sort": "nonsense"}, headers=world.alice.auth
            )
        assert response.status_code == 422
        assert statements, "each refusal was computed by the app"


def test_an_expired_session_is_refused_though_its_answer_is_cached(
    client: TestClient, accounts_settings: Settings, world: World
) -> None:
    secret = new_secret()
    expires = datetime.now(UTC) + timedelta(seconds=2)
    with session_scope(accounts_settings.effective_database_url) as db:
        db.add(UserSession(user_id=world.alice.id, token_hash=digest(secret), expires_at=expires))
    client.cookies.set(SESSION_COOKIE, secret)
    try:
        first = client.get("/api/v1/runs", params=QUERY)
        assert first.status_code == 200, first.text
        with app_statements(accounts_settings) as statements:
            assert client.get("/api/v1/runs", params=QUERY).json() == first.json()
        assert statements == []
        time.sleep(max(0.0, (expires - datetime.now(UTC)).total_seconds()) + 0.1)
        assert client.get("/api/v1/runs", params=QUERY).status_code == 401
    finally:
        client.cookies.clear()


def test_concurrent_misses_of_one_query_are_computed_once(
    accounts_settings: Settings, world: World
) -> None:
    app = create_app(accounts_settings)

    async def ask_together() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client,
        ):
            # the token's first use is recorded (a write): get that out of the way
            await client.get("/api/v1/runs", headers=world.alice.auth)
            return await asyncio.gather(
                *(
                    client.get("/api/v1/runs", params=QUERY, headers=world.alice.auth)
                    for _ in range(8)
                )
            )

    with app_statements(accounts_settings) as statements:
        answers = asyncio.run(ask_together())
    assert {response.status_code for response in answers} == {200}
    assert len({response.content for response in answers}) == 1
    pages = [s for s in statements if "ORDER BY" in s and "LIMIT" in s]
    assert len(pages) == 2, "one page for the first request, one for the eight together"


def test_concurrent_misses_share_one_answer_though_a_write_kept_it_from_the_cache(
    accounts_settings: Settings, world: World
) -> None:
    """A write committed while the first of several concurrent misses computes: the answer is
    not cached (it may predate the write), yet the misses that waited take it rather than each
    computing the page again; the next request computes afresh and shows the write."""
    app = create_app(accounts_settings)
    engine = engine_for(accounts_settings.effective_database_url)
    written: list[bool] = []

    def write_meanwhile(conn, cursor, statement, parameters, context, executemany) -> None:  # type: ignore[no-untyped-def]
        if "ORDER BY" in statement and "LIMIT" in statement and not written:
            written.append(True)
            with session_scope(accounts_settings.effective_database_url) as db:
                db.execute(update(Run).where(Run.id == world.run_ids[0]).values(accuracy=0.999))

    async def scenario() -> tuple[list[httpx.Response], httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client,
        ):
            await client.get("/api/v1/runs", headers=world.alice.auth)  # token use recorded
            event.listen(engine, "before_cursor_execute", write_meanwhile)
            try:
                together = await asyncio.gather(
                    *(
                        client.get("/api/v1/runs", params=QUERY, headers=world.alice.auth)
                        for _ in range(8)
                    )
                )
            finally:
                event.remove(engine, "before_cursor_execute", write_meanwhile)
            return together, await client.get(
                "/api/v1/runs", params=QUERY, headers=world.alice.auth
            )

    with app_statements(accounts_settings) as statements:
        together, next_one = asyncio.run(scenario())
    assert written == [True]
    assert {response.status_code for response in together} == {200}
    assert len({response.content for response in together}) == 1
    pages = [s for s in statements if "ORDER BY" in s and "LIMIT" in s]
    assert len(pages) == 3, "the warm-up, one for the eight together, one for the next"
    assert next_one.json()["items"][0] == {
        **next_one.json()["items"][0],
        "id": world.run_ids[0],
        "accuracy": 0.999,
    }


def test_repeated_query_is_served_from_the_cache_until_a_write(
    client: TestClient, accounts_settings: Settings, world: World
) -> None:
    cache = client.app.state.read_cache
    first = runs_page(client, world.alice.auth)
    hits = cache.hits
    assert runs_page(client, world.alice.auth) == first
    assert cache.hits == hits + 1

    with session_scope(accounts_settings.effective_database_url) as db:
        db.execute(update(Run).where(Run.id == world.run_ids[0]).values(accuracy=0.99))
    after = runs_page(client, world.alice.auth)
    assert after["items"][0]["id"] == world.run_ids[0]
    assert after["items"][0]["accuracy"] == 0.99


def test_a_cached_answer_is_never_served_to_another_user(
    client: TestClient, accounts_settings: Settings, world: World
) -> None:
    assert runs_page(client, world.alice.auth)["total"] == len(world.run_ids)
    assert runs_page(client, world.carol.auth)["total"] == len(world.run_ids)
    assert runs_page(client, world.bob.auth) == {
        "total": 0,
        "limit": 5,
        "offset": 0,
        "items": [],
    }

    removed = client.delete(
        f"/api/v1/teams/{world.team_id}/members/{world.carol.id}", headers=world.alice.auth
    )
    assert removed.status_code == 204, removed.text
    assert runs_page(client, world.carol.auth)["total"] == 0


def test_sqlite_answers_are_always_computed(embedded_settings: Settings) -> None:
    migrate.upgrade(embedded_settings.effective_database_url)
    with TestClient(create_app(embedded_settings)) as client:
        for _ in range(3):
            assert client.get("/api/v1/runs", params=QUERY).status_code == 200
        assert client.app.state.read_cache.hits == 0


def test_token_use_is_recorded_to_the_minute_not_on_every_request(
    client: TestClient, accounts_settings: Settings, world: World
) -> None:
    def last_used() -> datetime | None:
        with session_scope(accounts_settings.effective_database_url) as db:
            return db.scalar(
                select(ApiToken.last_used_at).where(ApiToken.id == world.alice_token_id)
            )

    runs_page(client, world.alice.auth)
    recorded = last_used()
    assert recorded is not None
    runs_page(client, world.alice.auth)
    assert last_used() == recorded

    earlier = datetime.now(UTC) - timedelta(minutes=2)
    with session_scope(accounts_settings.effective_database_url) as db:
        db.execute(
            update(ApiToken).where(ApiToken.id == world.alice_token_id).values(last_used_at=earlier)
        )
    runs_page(client, world.alice.auth)
    now = last_used()
    assert now is not None and now > earlier + timedelta(minutes=1)


def test_marker_reads_are_shared_by_concurrent_requests_and_never_older_than_them(
    postgres_url: str,
) -> None:
    migrate.upgrade(postgres_url)

    async def scenario() -> tuple[int, set[object], object, object]:
        engine = create_async_engine(postgres_url, isolation_level="AUTOCOMMIT")
        queries: list[str] = []
        event.listen(
            engine.sync_engine, "before_cursor_execute", lambda *args: queries.append(args[2])
        )
        reader = MarkerReader(engine)
        try:
            together = set(await asyncio.gather(*(reader.current() for _ in range(20))))
            sent = len(queries)
            # While a query is out (the lock held), callers wait for the next one, which must
            # see what was committed after they called.
            async with reader._one_at_a_time:
                before = await reader._query()
                waiting = asyncio.gather(reader.current(), reader.current())
                await asyncio.sleep(0.05)
                with session_scope(postgres_url) as db:
                    db.add(User(email="meanwhile@example.com", display_name="meanwhile"))
            after = set(await waiting)
        finally:
            await engine.dispose()
        assert len(after) == 1
        return sent, together, before, after.pop()

    sent, together, before, after = asyncio.run(scenario())
    assert sent <= 2, "twenty concurrent callers share one or two queries"
    assert len(together) == 1 and None not in together
    assert before is not None and after is not None and after != before


def test_groups_and_dashboard_data_are_cached_until_a_write_and_per_user(
    client: TestClient, accounts_settings: Settings, world: World
) -> None:
    """The heavy reads a dashboard repeats (seed groups, a dashboard's chart data) are cached
    like /runs: answered with no SQL while nothing is written, computed again after a write,
    and never given to another user."""
    made = client.post(
        "/api/v1/dashboards",
        json={"name": "d", "config": {"filters": {"sort": "-accuracy"}}},
        headers=world.alice.auth,
    )
    assert made.status_code == 201, made.text
    paths = ["/api/v1/runs/groups", f"/api/v1/dashboards/{made.json()['id']}/data"]
    first = {path: client.get(path, headers=world.alice.auth).json() for path in paths}
    with app_statements(accounts_settings) as statements:
        assert {path: client.get(path, headers=world.alice.auth).json() for path in paths} == first
    assert statements == []
    assert client.get(paths[0], headers=world.bob.auth).json() == []  # sees no runs

    with session_scope(accounts_settings.effective_database_url) as db:
        db.execute(update(Run).where(Run.id == world.run_ids[0]).values(accuracy=0.99))
    charted = client.get(paths[1], headers=world.alice.auth).json()["runs"]
    assert {run["id"]: run["accuracy"] for run in charted}[world.run_ids[0]] == 0.99


def tables_read(statements: list[str]) -> set[str]:
    return {
        name
        for statement in statements
        for name in re.findall(r'\b(?:FROM|JOIN)\s+"?([a-z_]+)"?', statement)
    }


def test_each_cached_read_names_every_table_it_reads(
    client: TestClient, accounts_settings: Settings, world: World
) -> None:
    """A cached answer lasts until a write to a table its endpoint names (`cached_read`): a
    table it reads and does not name would leave it stale. Each cached read is asked here with
    the options that read the most (extra columns of every group, filters, a sort, both export
    formats) and must have named every table its statements read."""
    columns = client.get("/api/v1/runs/columns", headers=world.alice.auth).json()
    one_per_group = {column["group"]: column["key"] for column in columns}
    made = client.post(
        "/api/v1/dashboards",
        json={"name": "d", "config": {"filters": {"sort": "-accuracy"}}},
        headers=world.alice.auth,
    )
    assert made.status_code == 201, made.text
    filters = {"technique": "sparsetrain", "range": "accuracy:0:", "sort": "-speedup"}
    asked = {
        "/api/v1/runs": {**filters, "column": list(one_per_group.values())},
        "/api/v1/runs/compare": {"ids": world.run_ids},
        "/api/v1/runs/pareto": filters,
        "/api/v1/runs/groups": filters,
        "/api/v1/runs/summary": {**filters, "by": ["technique", "param:seed"]},
        "/api/v1/runs/export": filters,
        f"/api/v1/dashboards/{made.json()['id']}/data": {},
        f"/api/v1/searches/{world.ids['search_id']}/sample": {},
    }
    reads = CACHED_READS
    for path, params in asked.items():
        named = next(topics for read, topics in reads if read.fullmatch(path))
        assert set(named) <= set(Base.metadata.tables) | {PROGRESS, LIVENESS}, path
        for extra in ({}, {"format": "json"}) if path.endswith("export") else ({},):
            with app_statements(accounts_settings) as statements:
                answer = client.get(path, params={**params, **extra}, headers=world.alice.auth)
            assert answer.status_code == 200, (path, answer.text)
            assert statements, f"{path} was computed, not served from the cache"
            assert tables_read(statements) - {"change_log"} <= set(named), path
    assert len(asked) == len(reads)


def in_another_process(settings: Settings, code: str) -> None:
    """Run `code` (with `url`, the database) in a fresh Python process, as a worker would."""
    subprocess.run(
        [sys.executable, "-c", f"url = {settings.effective_database_url!r}\n{code}"],
        env=orrery_env(),
        cwd=ROOT,
        check=True,
        timeout=120,
    )


def test_a_workers_writes_reach_the_reads_that_show_them_and_no_other(
    client: TestClient, accounts_settings: Settings, world: World
) -> None:
    """The worker's own code, in another process, saying nothing to any cache: a lease
    renewal ends no cached answer; a progress report ends the run list's (which shows it) and
    not the seed groups' (which do not); the run finishing ends both."""
    run_id = world.run_ids[0]
    with session_scope(accounts_settings.effective_database_url) as db:
        run = db.get(Run, run_id)
        assert run is not None
        training_id = run.training_id
        db.execute(
            update(Training)
            .where(Training.id == training_id)
            .values(status="running", attempts=1, progress=0.0)
        )
        db.execute(update(Run).where(Run.id == run_id).values(status="running", progress=0.0))
    paths = ("/api/v1/runs", "/api/v1/runs/groups")

    def computed(path: str) -> tuple[bool, object]:
        with app_statements(accounts_settings) as statements:
            answer = client.get(path, headers=world.alice.auth)
        assert answer.status_code == 200, answer.text
        return bool(statements), answer.json()

    first = {path: computed(path)[1] for path in paths}
    from_the_cache = {path: (False, first[path]) for path in paths}
    assert {path: computed(path) for path in paths} == from_the_cache

    in_another_process(
        accounts_settings,
        "from backend.delivery.claims import TrainingLease\n"
        f"TrainingLease(url, {training_id}, 1, 60.0).renew()",
    )
    assert {path: computed(path) for path in paths} == from_the_cache

    in_another_process(
        accounts_settings,
        "from backend.delivery.claims import report_progress\n"
        f"report_progress(url, {training_id}, 1, 0.5)",
    )
    recomputed, runs = computed("/api/v1/runs")
    assert recomputed
    assert {item["id"]: item["progress"] for item in runs["items"]}[run_id] > 0  # type: ignore[index]
    assert computed("/api/v1/runs/groups") == (False, first["/api/v1/runs/groups"])

    in_another_process(
        accounts_settings,
        "from sqlalchemy import update\n"
        "from backend.db.models import Run\n"
        "from backend.db.session import session_scope\n"
        "with session_scope(url) as db:\n"
        f"    db.execute(update(Run).where(Run.id == {run_id})"
        ".values(status='done', accuracy=0.5))",
    )
    recomputed, groups = computed("/api/v1/runs/groups")
    assert recomputed and groups != first["/api/v1/runs/groups"]
