"""A design search's sample (GET /searches/{id}/sample) on real PostgreSQL: compact (figures to
seven significant digits, gzip-compressed on the wire) and holding the stored content; a done
search's sample computed once and then served from the cache, a running search's never stale;
and the sample counted among the heavy reads, a few at a time."""

from __future__ import annotations

import asyncio
import gzip
import threading
from typing import Any

import httpx
import numpy as np
from fastapi.testclient import TestClient
from sqlalchemy import event, func, update

from backend.api.app import create_app
from backend.db.models import DesignSearchRow
from backend.db.session import engine_for, session_scope
from backend.settings import Settings
from backend.specs.design_search import DesignSearch
from tests.security.conftest import BASE_URL, World
from tests.security.test_cached_reads import app_statements

LABELS = ("baseline", "sparsetrain")
FIGURES = ("time_s", "energy_j", "area_mm2")
LOADS_THE_RESULT = "design_searches.result"  # the deferred column's own SELECT


def stored_search(designs: int, seed: int) -> dict[str, Any]:
    """A search's stored columns as the search job leaves them: per technique a sample and a
    front of the designs, float64 figures of every magnitude the simulator gives, and the
    searched fields of every design kept (ints, floats, text)."""
    rng = np.random.default_rng(seed)
    index = sorted(rng.choice(10 * designs, size=designs, replace=False).tolist())
    workloads = {}
    for label in LABELS:
        chosen = sorted(rng.choice(index, size=designs // 2, replace=False).tolist())
        front, sample = chosen[:5], chosen[5:]

        def points(kept: list[int]) -> dict[str, Any]:
            figures = np.column_stack(
                [
                    rng.lognormal(-6, 2, len(kept)),
                    rng.lognormal(-12, 3, len(kept)),
                    rng.lognormal(1, 1, len(kept)),
                ]
            )
            return {"index": kept, "figures": figures.tolist()}

        workloads[label] = {
            "evaluated": designs,
            "feasible": designs,
            "front": points(front),
            "sample": points(sample),
        }
    spec = DesignSearch(
        base="edge",
        mode="random",
        samples=designs,
        parameters={
            "rows": {"low": 4, "high": 64},
            "clock_mhz": {"low": 200, "high": 1000},
            "dataflow": {"values": ["os", "ws"]},
        },
    )
    return {
        "spec": spec.model_dump(mode="json"),
        "designs": designs,
        "result": {"objectives": list(spec.objectives), "workloads": workloads},
        "design_fields": {
            "index": index,
            "fields": {
                "rows": rng.integers(4, 65, designs).tolist(),
                "clock_mhz": rng.uniform(200, 1000, designs).tolist(),
                "dataflow": rng.choice(["os", "ws"], designs).tolist(),
            },
        },
    }


def add_search(settings: Settings, world: World, status: str, designs: int = 400) -> int:
    with session_scope(settings.effective_database_url) as db:
        row = DesignSearchRow(
            experiment_id=world.experiment_id,
            created_by=world.alice.id,
            status=status,
            **stored_search(designs, seed=designs),
        )
        db.add(row)
        db.flush()
        return row.id


def sample(client: TestClient, search_id: int, world: World) -> httpx.Response:
    answer = client.get(f"/api/v1/searches/{search_id}/sample", headers=world.alice.auth)
    assert answer.status_code == 200, answer.text
    return answer


def test_the_compact_sample_holds_the_stored_content(
    client: TestClient, accounts_settings: Settings, world: World
) -> None:
    search_id = add_search(accounts_settings, world, "done")
    stored = stored_search(400, seed=400)
    with client.stream(
        "GET", f"/api/v1/searches/{search_id}/sample", headers=world.alice.auth
    ) as answer:
        assert answer.status_code == 200
        assert answer.headers["content-encoding"] == "gzip"
        wire = b"".join(answer.iter_raw())
    body = gzip.decompress(wire)
    assert len(wire) < len(body) / 2
    got = httpx.Response(200, content=body).json()

    table = stored["design_fields"]
    assert got["designs"]["index"] == table["index"]
    assert got["designs"]["fields"] == table["fields"]  # the design itself: exact
    row_of = {index: row for row, index in enumerate(table["index"])}
    for label, workload in stored["result"]["workloads"].items():
        points = {
            i: f
            for part in ("front", "sample")
            for i, f in zip(workload[part]["index"], workload[part]["figures"], strict=True)
        }
        series = got["techniques"][label]
        assert series["row"] == [row_of[i] for i in sorted(points)]
        for column, figure in enumerate(FIGURES):
            expected = [points[i][column] for i in sorted(points)]
            for sent, value in zip(series[figure], expected, strict=True):
                assert float(f"{sent:.7g}") == sent, "at most seven significant digits"
                assert abs(sent - value) <= 5.0000001e-7 * abs(value), (figure, sent, value)
    # The ranges are those of what is sent, so a slider's ends hold every point.
    sent_times = [t for label in LABELS for t in got["techniques"][label]["time_s"]]
    assert got["ranges"]["time_s"] == [min(sent_times), max(sent_times)]
    assert got["ranges"]["clock_mhz"] == [
        min(table["fields"]["clock_mhz"]),
        max(table["fields"]["clock_mhz"]),
    ]


def test_a_done_searchs_sample_is_computed_once_and_a_running_ones_never_stale(
    client: TestClient, accounts_settings: Settings, world: World
) -> None:
    done = add_search(accounts_settings, world, "done")
    running = add_search(accounts_settings, world, "running", designs=200)
    first = sample(client, done, world).json()
    with app_statements(accounts_settings) as statements:
        assert sample(client, done, world).json() == first
    assert statements == [], "the whole answer, from the cache"

    # Another search's progress is a write to design_searches: the whole answer is asked of
    # the app again, which serves the done search's sample without reading its result.
    with session_scope(accounts_settings.effective_database_url) as db:
        db.execute(update(DesignSearchRow).where(DesignSearchRow.id == running).values(designs=201))
    with app_statements(accounts_settings) as statements:
        assert sample(client, done, world).json() == first
    assert statements, "the app ran"
    assert not [s for s in statements if LOADS_THE_RESULT in s]

    # A running search's sample follows what its chunks merged.
    before = sample(client, running, world).json()
    merged = stored_search(300, seed=300)
    with session_scope(accounts_settings.effective_database_url) as db:
        db.execute(
            update(DesignSearchRow)
            .where(DesignSearchRow.id == running)
            .values(result=merged["result"], design_fields=merged["design_fields"])
        )
    after = sample(client, running, world).json()
    assert (
        after["designs"]["index"] == merged["design_fields"]["index"] != before["designs"]["index"]
    )
    with session_scope(accounts_settings.effective_database_url) as db:  # and then it is done
        db.execute(
            update(DesignSearchRow)
            .where(DesignSearchRow.id == running)
            .values(status="done", finished_at=func.now())
        )
    assert sample(client, running, world).json() == {**after, "status": "done"}


def test_samples_are_heavy_reads_taken_a_few_at_a_time(
    accounts_settings: Settings, world: World
) -> None:
    """With one heavy read at a time, a second sample (another caller, so not the first one's
    answer shared) waits while the first computes, and a cheap request is answered meanwhile."""
    search_id = add_search(accounts_settings, world, "running")
    app = create_app(accounts_settings.model_copy(update={"api_heavy_concurrency": 1}))
    engine = engine_for(accounts_settings.effective_database_url)
    computing: list[int] = []
    release = threading.Event()

    def hold(conn, cursor, statement, parameters, context, executemany) -> None:  # type: ignore[no-untyped-def]
        if LOADS_THE_RESULT in statement:
            computing.append(1)
            release.wait(timeout=60)

    async def scenario() -> tuple[int, list[int], list[httpx.Response]]:
        transport = httpx.ASGITransport(app=app)
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=transport, base_url=BASE_URL, timeout=90) as client,
        ):
            path = f"/api/v1/searches/{search_id}/sample"
            samples = [
                asyncio.create_task(client.get(path, headers=person.auth))
                for person in (world.alice, world.carol)
            ]
            while not computing:
                await asyncio.sleep(0.05)
            cheap = await client.get("/api/v1/auth/me", headers=world.bob.auth)
            await asyncio.sleep(0.5)  # time for a second sample to start, were it let in
            while_held = list(computing)
            release.set()
            return cheap.status_code, while_held, list(await asyncio.gather(*samples))

    event.listen(engine, "before_cursor_execute", hold)
    try:
        cheap, while_held, answers = asyncio.run(scenario())
    finally:
        release.set()
        event.remove(engine, "before_cursor_execute", hold)
    assert cheap == 200
    assert while_held == [1], "one sample computed at a time"
    assert [answer.status_code for answer in answers] == [200, 200]
    assert len(computing) == 2
