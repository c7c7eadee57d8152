"""The login limit under real concurrency, per (account, client address), with growing delays.

Run against PostgreSQL (the production database) and SQLite (the embedded one): 40 wrong
passwords sent at once for one account from one address get exactly `login_max_failures`
401s and 429 for the rest, since each attempt takes its place in line before its password is
checked. A right password from another address is never refused, so nobody can lock an
account out for others.
"""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update

from backend.api.app import create_app
from backend.db import migrate
from backend.db.models import LoginThrottle
from backend.db.session import session_scope
from backend.settings import Settings
from tests.conftest import embedded_server
from tests.security.conftest import BASE_URL, PASSWORD, make_person

PARALLEL = 40


def login(client: TestClient, email: str, password: str) -> int:
    body = {"email": email, "password": password}
    return client.post("/api/v1/auth/login", json=body).status_code


def wrong_passwords_at_once(client: TestClient, email: str) -> Counter[int]:
    start = threading.Barrier(PARALLEL)

    def attempt(i: int) -> int:
        start.wait()
        return login(client, email, f"guess number {i}")

    with ThreadPoolExecutor(PARALLEL) as pool:
        return Counter(pool.map(attempt, range(PARALLEL)))


def test_parallel_guesses_on_postgresql_get_only_the_free_attempts(
    client: TestClient, accounts_settings: Settings
) -> None:
    person = make_person(accounts_settings, "alice")
    answers = wrong_passwords_at_once(client, person.email)
    limit = accounts_settings.login_max_failures
    assert answers == {401: limit, 429: PARALLEL - limit}


@pytest.fixture
def sqlite_settings(tmp_path: Path) -> Settings:
    settings = Settings(data_dir=tmp_path / "data", single_user=False, secret_key="test-secret")
    settings.ensure_data_dir()
    migrate.upgrade(settings.effective_database_url)
    return settings


def test_parallel_guesses_on_sqlite_get_only_the_free_attempts(sqlite_settings: Settings) -> None:
    person = make_person(sqlite_settings, "alice")
    with TestClient(create_app(sqlite_settings), base_url=BASE_URL) as client:
        answers = wrong_passwords_at_once(client, person.email)
        limit = sqlite_settings.login_max_failures
        assert answers == {401: limit, 429: PARALLEL - limit}
        assert login(client, person.email, PASSWORD) == 429


def test_another_address_is_not_locked_out(accounts_settings: Settings) -> None:
    person = make_person(accounts_settings, "alice")
    app = create_app(accounts_settings)
    with (
        TestClient(app, base_url=BASE_URL, client=("203.0.113.7", 4000)) as attacker,
        TestClient(app, base_url=BASE_URL, client=("198.51.100.2", 5000)) as owner,
    ):
        for _ in range(accounts_settings.login_max_failures):
            assert login(attacker, person.email, "guess") == 401
        assert login(attacker, person.email, PASSWORD) == 429
        # The account's owner, elsewhere, logs in; a wrong guess there counts only there.
        assert login(owner, person.email, "typo") == 401
        assert login(owner, person.email, PASSWORD) == 200
        assert login(attacker, person.email, PASSWORD) == 429
        # One address trying other accounts is not refused for them either.
        other = make_person(accounts_settings, "bob")
        assert login(attacker, other.email, PASSWORD) == 200


def test_each_delay_after_the_free_attempts_doubles(
    client: TestClient, accounts_settings: Settings
) -> None:
    person = make_person(accounts_settings, "alice")
    limit, base = accounts_settings.login_max_failures, accounts_settings.login_delay_seconds
    for _ in range(limit):
        assert login(client, person.email, "guess") == 401
    delays = []
    for _ in range(4):
        refused = client.post(
            "/api/v1/auth/login", json={"email": person.email, "password": PASSWORD}
        )
        assert refused.status_code == 429
        with session_scope(accounts_settings.effective_database_url) as db:
            (row,) = db.scalars(select(LoginThrottle))
            delay = (row.blocked_until - row.last_attempt_at).total_seconds()
            # The delay passes (the row's clock is moved, nobody sleeps) ...
            row.blocked_until = None
        delays.append(delay)
        assert 0 < int(refused.headers["retry-after"]) <= delay
        # ... and the next guess is checked once more, and fails.
        assert login(client, person.email, "guess") == 401
    assert delays == [base * 2**k for k in range(4)]
    assert login(client, person.email, PASSWORD) == 429
    with session_scope(accounts_settings.effective_database_url) as db:
        db.execute(update(LoginThrottle).values(blocked_until=None))
    assert login(client, person.email, PASSWORD) == 200
    # Success starts afresh: the free attempts are back.
    for _ in range(limit):
        assert login(client, person.email, "guess") == 401


def forwarded_guesses(client: httpx.Client, email: str, forwarded: list[str]) -> list[int]:
    """A wrong password per X-Forwarded-For value."""
    return [
        client.post(
            "/api/v1/auth/login",
            json={"email": email, "password": "guess"},
            headers={"X-Forwarded-For": value},
        ).status_code
        for value in forwarded
    ]


def test_forwarded_addresses_from_a_loopback_peer_do_not_reset_the_limit(
    accounts_settings: Settings, tmp_path: Path
) -> None:
    """`orrery serve` behind a same-host proxy that passes X-Forwarded-For through: with no
    trusted proxies configured, every guess counts against the loopback peer."""
    person = make_person(accounts_settings, "alice")
    limit = accounts_settings.login_max_failures
    env = {
        "ORRERY_DATABASE_URL": accounts_settings.effective_database_url,
        "ORRERY_BROKER_URL": accounts_settings.effective_broker_url,
        "ORRERY_RESULT_BACKEND": accounts_settings.effective_result_backend,
        "ORRERY_SECRET_KEY": "test-secret-key",
        "ORRERY_SINGLE_USER": "false",
        "ORRERY_RECONCILE_INTERVAL": "0",
    }
    data_dir = tmp_path / "serve" / "data"
    data_dir.mkdir(parents=True)
    spoofed = [f"203.0.113.{i}" for i in range(limit + 3)]
    with (
        embedded_server(data_dir, "--no-with-worker", **env) as server,
        httpx.Client(base_url=server.url) as http,
    ):
        answers = forwarded_guesses(http, person.email, spoofed)
    assert answers == [401] * limit + [429] * 3


def test_forwarded_addresses_count_only_from_trusted_proxies(accounts_settings: Settings) -> None:
    alice = make_person(accounts_settings, "alice")
    bob = make_person(accounts_settings, "bob")
    limit = accounts_settings.login_max_failures
    proxied = accounts_settings.model_copy(update={"trusted_proxies": ["10.0.0.0/8"]})
    app = create_app(proxied)
    with (
        TestClient(app, base_url=BASE_URL, client=("10.1.2.3", 4000)) as proxy,
        TestClient(app, base_url=BASE_URL, client=("127.0.0.1", 5000)) as loopback,
    ):
        # Through the trusted proxy each client address is its own key ...
        clients = [f"198.51.100.{i}" for i in range(limit + 3)]
        assert forwarded_guesses(proxy, alice.email, clients) == [401] * (limit + 3)
        # ... the right-most hop that is not a trusted proxy, whatever the client wrote
        # before it.
        chains = [f"198.51.100.{i}, 192.0.2.9, 10.9.9.9" for i in range(limit + 1)]
        assert forwarded_guesses(proxy, bob.email, chains) == [401] * limit + [429]
        # A peer that is not a configured proxy is itself the client, whatever it forwards.
        assert forwarded_guesses(loopback, alice.email, clients[: limit + 1]) == (
            [401] * limit + [429]
        )


def test_trusted_proxies_setting_takes_a_comma_separated_list(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ORRERY_TRUSTED_PROXIES", "10.0.0.5, 10.1.0.0/16")
    assert Settings().trusted_proxies == ["10.0.0.5", "10.1.0.0/16"]
    monkeypatch.setenv("ORRERY_TRUSTED_PROXIES", "")
    assert Settings().trusted_proxies == []
    monkeypatch.setenv("ORRERY_TRUSTED_PROXIES", "proxy.example.org")
    with pytest.raises(ValueError, match="trusted_proxies"):
        Settings()
