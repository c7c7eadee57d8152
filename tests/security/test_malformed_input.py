"""Malformed input is answered 4xx, never 5xx: lone UTF-16 surrogates in JSON strings on
every route with a body (the unauthenticated login too), NUL characters in run filters, and an
export that fails once its answer has begun says so instead of ending like a whole file."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.exceptions import RequestValidationError
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from backend.auth.redact import validation_error_handler
from tests.conftest import service_settings
from tests.security.conftest import World, uvicorn_server
from tests.security.test_every_route import operations, request_for

SURROGATE = "\ud800"


def first_string(value: Any, path: tuple[str | int, ...] = ()) -> tuple[str | int, ...] | None:
    """Where the first string leaf of a JSON value is."""
    if isinstance(value, str):
        return path
    items = value.items() if isinstance(value, dict) else enumerate(value or [])
    for key, item in items:
        found = first_string(item, (*path, key))
        if found is not None:
            return found
    return None


def with_surrogate(value: Any, path: tuple[str | int, ...]) -> Any:
    if not path:
        return value + SURROGATE
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = with_surrogate(value[path[0]], path[1:])  # type: ignore[index]
    return copy


def test_lone_surrogates_are_422_naming_the_field_on_every_route(
    client: TestClient, world: World
) -> None:
    checked, wrong = [], []
    for method, path, operation in operations(client):
        if "requestBody" not in operation:
            continue
        request = request_for(method, path, operation, world)
        body = request.pop("json")
        where = first_string(body)
        assert where is not None, f"{method} {path}: its example body has no string"
        # json.dumps escapes the surrogate as \ud800; the body itself is plain ASCII.
        raw = json.dumps(with_surrogate(body, where)).encode("ascii")
        headers = {"Content-Type": "application/json", **world.alice.auth}
        if path == "/api/v1/auth/login":
            headers.pop("Authorization")
        response = client.request(**request, content=raw, headers=headers)
        checked.append(path)
        detail = response.json().get("detail") if response.status_code == 422 else None
        if not detail or detail[0]["loc"] != ["body", *where]:
            wrong.append(f"{method} {path}: {response.status_code} {response.text[:200]}")
    assert wrong == []
    assert {"/api/v1/auth/login", "/api/v1/experiments", "/api/v1/teams"} <= set(checked)


def test_surrogates_in_keys_and_paired_surrogates(client: TestClient, world: World) -> None:
    raw = b'{"name": "ok", "config": {"x\\udfff": 1}}'
    headers = {"Content-Type": "application/json", **world.alice.auth}
    response = client.post("/api/v1/dashboards", content=raw, headers=headers)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "config", "x\\udfff"]
    # A pair is one character (an emoji): accepted and stored whole.
    raw = b'{"name": "rocket \\ud83d\\ude80"}'
    response = client.post("/api/v1/dashboards", content=raw, headers=headers)
    assert response.status_code == 201 and response.json()["name"] == "rocket \U0001f680"


def test_the_validation_handler_never_fails_to_encode_what_it_echoes() -> None:
    error = {"loc": ("body", "name"), "msg": "bad", "type": "value_error", "input": "x\ud800"}
    response = asyncio.run(validation_error_handler(None, RequestValidationError([error])))  # type: ignore[arg-type]
    assert response.status_code == 422
    assert json.loads(response.body)["detail"][0]["input"] == "x\\ud800"


@pytest.mark.parametrize("path", ["/api/v1/runs", "/api/v1/runs/export", "/api/v1/runs/pareto"])
def test_nul_in_a_filter_is_422_naming_it_before_anything_streams(
    client: TestClient, world: World, path: str
) -> None:
    response = client.get(path, params={"technique": "a\x00b"}, headers=world.alice.auth)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", "technique"]
    if path != "/api/v1/runs/pareto":  # the front has its own order
        sort = client.get(path, params={"sort": "nonsense"}, headers=world.alice.auth)
        assert sort.status_code == 422 and "sort" in sort.text


MANY_RUNS = 20_000  # several MB of CSV: more than the socket buffers hold, so the server waits


def add_many_runs(database_url: str, owner_id: int) -> None:
    engine = create_engine(database_url)
    with engine.begin() as db:
        experiment = db.execute(
            text(
                "INSERT INTO experiments (owner_id, name, spec, status) "
                "VALUES (:owner, 'export', '{}', 'done') RETURNING id"
            ),
            {"owner": owner_id},
        ).scalar_one()
        db.execute(
            text(
                "INSERT INTO runs (experiment_id, is_baseline, technique, technique_params, "
                "model, dataset, training_config, accelerator_name, accelerator_config, params, "
                "seed, status, progress, group_key) "
                "SELECT :e, false, 'baseline', '[]', 'mlp', 'digits', '{}', 'edge', '{}', "
                "json_build_object('point', i, 'padding', repeat('x', 300)), 0, 'done', 1, "
                "'one-group' "
                "FROM generate_series(1, :n) AS i"
            ),
            {"e": experiment, "n": MANY_RUNS},
        )
    engine.dispose()


def terminate_export_query(database_url: str) -> int:
    """End the database connection that is streaming the export (as a failover would)."""
    engine = create_engine(database_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as db:
        ended = db.execute(
            text(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                "AND query LIKE 'FETCH FORWARD %'"  # the export's server-side cursor
            )
        ).scalar_one()
    engine.dispose()
    return int(ended)


def test_an_export_failing_midway_is_never_a_clean_200(
    postgres_url: str, redis_db_url: str, tmp_path: Path
) -> None:
    settings = service_settings(postgres_url, redis_db_url, tmp_path)
    received: list[str] = []
    failure: list[BaseException] = []
    # The read cache off: the second export is computed, not the first one's answer (gzipped,
    # it fits the cache's budget).
    with uvicorn_server(settings, ORRERY_SINGLE_USER="true", ORRERY_READ_CACHE_ENTRIES="0") as base:
        local_user = httpx.get(f"{base}/api/v1/auth/me", timeout=30).json()["id"]
        add_many_runs(settings.effective_database_url, local_user)
        whole = httpx.get(f"{base}/api/v1/runs/export", timeout=120)
        assert whole.status_code == 200 and whole.text.count("\n") == MANY_RUNS + 1
        first_chunk = threading.Event()
        go_on = threading.Event()

        def read() -> None:
            try:
                with httpx.stream("GET", f"{base}/api/v1/runs/export", timeout=120) as answer:
                    assert answer.status_code == 200
                    for chunk in answer.iter_text():
                        received.append(chunk)
                        if not first_chunk.is_set():
                            first_chunk.set()
                            go_on.wait(60)
            except httpx.HTTPError as exc:
                failure.append(exc)

        reader = threading.Thread(target=read)
        reader.start()
        assert first_chunk.wait(60)
        assert terminate_export_query(settings.effective_database_url) == 1
        go_on.set()
        reader.join(120)
    body = "".join(received)
    assert body.count("\n") < MANY_RUNS + 1, "the export ran to its end before the failure"
    assert "this file is incomplete" in body
    assert failure and isinstance(failure[0], httpx.RemoteProtocolError), "connection aborted"
