"""Malformed input to every write endpoint: only 4xx answers, never 5xx, nothing stored changes.

Two generators: schemathesis draws schema-violating requests (negative mode) for each write
operation of the OpenAPI schema; a hypothesis strategy posts random bytes, JSON of the wrong
shape and valid bodies broken by one unknown key or one wrong-typed value to each endpoint
that takes a body. Together well over 1,000 requests, as an authenticated user whose team,
experiment, runs, dashboard and share link exist (so path ids resolve).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from sqlalchemy import select

from backend.db.models import Base
from backend.db.session import session_scope
from backend.settings import Settings
from tests.security.conftest import (  # noqa: F401  (fixtures)
    accounts_settings,
    client,
    world,
)
from tests.security.test_every_route import body_for, operations, request_for

WRITE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}
# Bookkeeping that a request may legitimately touch: when a token was last used.
VOLATILE = {("api_tokens", "last_used_at")}
SCHEMATHESIS_EXAMPLES = 40
HYPOTHESIS_EXAMPLES = 600
FUZZ = settings(
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)


def snapshot(settings_: Settings) -> dict[str, list[tuple[Any, ...]]]:
    """Every stored row of every table, minus volatile bookkeeping columns."""
    with session_scope(settings_.effective_database_url) as db:
        tables = {}
        for table in Base.metadata.sorted_tables:
            columns = [c for c in table.columns if (table.name, c.name) not in VOLATILE]
            rows = db.execute(select(*columns).order_by(*table.primary_key.columns))
            tables[table.name] = [tuple(map(repr, row)) for row in rows]
        return tables


def fuzz(strategy: Any, send_one: Any, label: str) -> None:
    @settings(FUZZ, max_examples=SCHEMATHESIS_EXAMPLES)
    @given(case=strategy)
    def run(case: Any) -> None:
        send_one(case, label)

    run()


def test_schemathesis_negative_cases_get_4xx_and_change_nothing(
    client: TestClient,  # noqa: F811
    world: Any,  # noqa: F811
    accounts_settings: Settings,  # noqa: F811
) -> None:
    before = snapshot(accounts_settings)
    schema = schemathesis.openapi.from_asgi("/api/openapi.json", client.app)
    sent: dict[str, int] = {}
    failures: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.method.upper() not in WRITE_METHODS:
            continue
        label = f"{operation.method.upper()} {operation.path}"
        strategy = operation.as_strategy(generation_mode=GenerationMode.NEGATIVE)

        def send_one(case: Any, label: str) -> None:
            kwargs = case.as_transport_kwargs(base_url="https://testserver")
            kwargs["headers"] = {**(kwargs.get("headers") or {}), **world.alice.auth}
            for name, value in kwargs.pop("cookies", {}).items():
                kwargs["headers"]["Cookie"] = f"{name}={value}"
            if "data" in kwargs and not isinstance(kwargs["data"], dict):
                kwargs["content"] = kwargs.pop("data")
            response = client.request(**kwargs)
            sent[label] = sent.get(label, 0) + 1
            if not 400 <= response.status_code < 500:
                failures.append(f"{label}: {response.status_code} {response.text[:200]}")

        try:
            fuzz(strategy, send_one, label)
        except Exception as exc:  # an operation with nothing to violate (no parameters or body)
            if "Unsatisfiable" not in type(exc).__name__ and "unsatisfiable" not in str(exc):
                raise
    assert failures == []
    assert sum(sent.values()) >= 500, sent
    print(f"schemathesis sent {sum(sent.values())} negative requests: {sent}")
    assert snapshot(accounts_settings) == before


def _valid_body(method: str, path: str, people: Any) -> dict[str, Any]:
    return json.loads(json.dumps(body_for(method, path, people)))


json_values = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=False) | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def _not_json(data: bytes) -> bool:
    try:
        json.loads(data)
    except ValueError:
        return True
    return False


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


def _set(body: Any, path: tuple[Any, ...], value: Any) -> Any:
    target = body
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return body


@st.composite
def malformed_body(draw: st.DrawFn, valid: dict[str, Any]) -> bytes:
    kind = draw(st.sampled_from(["bytes", "shape", "unknown key", "wrong value"]))
    if kind == "bytes":
        return draw(st.binary(max_size=512).filter(_not_json))
    if kind == "shape":  # valid JSON, but not an object
        value = draw(json_values.filter(lambda v: not isinstance(v, dict)))
        return json.dumps(value).encode()
    body = json.loads(json.dumps(valid))
    if kind == "unknown key":  # every input model forbids unknown fields
        key = draw(st.text(min_size=1, max_size=12).filter(lambda k: k not in body))
        body[key] = draw(json_values)
        return json.dumps(body).encode()
    # A dict under a key no model accepts, where a scalar, list or known mapping belongs.
    path = draw(st.sampled_from(_paths(body)))
    return json.dumps(_set(body, path, {"$not a field": draw(json_values)})).encode()


def test_random_bytes_and_broken_specs_get_4xx_and_change_nothing(
    client: TestClient,  # noqa: F811
    world: Any,  # noqa: F811
    accounts_settings: Settings,  # noqa: F811
) -> None:
    targets = [
        (request_for(method, path, operation, world), _valid_body(method, path, world))
        for method, path, operation in operations(client)
        if method in WRITE_METHODS and "requestBody" in operation
    ]
    assert len(targets) >= 8
    before = snapshot(accounts_settings)
    failures: list[str] = []
    sent: list[int] = []

    @settings(FUZZ, max_examples=HYPOTHESIS_EXAMPLES)
    @given(data=st.data())
    def send(data: st.DataObject) -> None:
        request, valid = data.draw(st.sampled_from(targets))
        body = data.draw(malformed_body(valid))
        response = client.request(
            request["method"],
            request["url"],
            content=body,
            headers={**world.alice.auth, "Content-Type": "application/json"},
        )
        sent.append(response.status_code)
        if not 400 <= response.status_code < 500:
            failures.append(
                f"{request['method']} {request['url']} {body[:100]!r}: {response.text[:200]}"
            )

    send()
    assert failures == []
    assert len(sent) >= HYPOTHESIS_EXAMPLES // 2, len(sent)
    assert snapshot(accounts_settings) == before


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded"])
def test_a_valid_spec_under_the_wrong_content_type_is_refused(
    client: TestClient,  # noqa: F811
    world: Any,  # noqa: F811
    accounts_settings: Settings,  # noqa: F811
    content_type: str,
) -> None:
    before = snapshot(accounts_settings)
    body = json.dumps(_valid_body("POST", "/api/v1/experiments", world))
    response = client.post(
        "/api/v1/experiments",
        content=body,
        headers={**world.alice.auth, "Content-Type": content_type},
    )
    assert response.status_code == 422
    assert snapshot(accounts_settings) == before
