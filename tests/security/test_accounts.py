"""Logging in, sessions and CSRF, API tokens, the login rate limit, single-user labelling."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import select

from backend.api.app import create_app
from backend.db.models import ApiToken, User
from backend.db.session import session_scope
from backend.settings import Settings
from tests.security.conftest import BASE_URL, PASSWORD, make_person


def login(client: TestClient, email: str, password: str = PASSWORD) -> dict:
    response = client.post("/api/v1/auth/login", json={"email": email, "password": password})
    assert response.status_code == 200, response.text
    return response.json()


def test_passwords_are_stored_as_argon2id(client: TestClient, accounts_settings: Settings) -> None:
    person = make_person(accounts_settings, "alice")
    with session_scope(accounts_settings.effective_database_url) as db:
        stored = db.scalar(select(User.password_hash).where(User.id == person.id))
    assert stored.startswith("$argon2id$")
    assert PASSWORD not in stored


def test_login_sets_a_secure_httponly_cookie_and_logout_ends_it(
    client: TestClient, accounts_settings: Settings
) -> None:
    person = make_person(accounts_settings, "alice")
    response = client.post(
        "/api/v1/auth/login", json={"email": person.email.upper(), "password": PASSWORD}
    )
    assert response.status_code == 200
    cookie = response.headers["set-cookie"].lower()
    for flag in ("orrery_session=", "httponly", "secure", "samesite=lax", "path=/"):
        assert flag in cookie
    body = response.json()
    assert body["email"] == person.email and body["mode"] == "accounts"
    assert body["csrf_token"]

    assert client.get("/api/v1/auth/me").json()["id"] == person.id
    csrf = {"X-CSRF-Token": body["csrf_token"]}
    assert client.post("/api/v1/auth/logout", headers=csrf).status_code == 204
    assert client.get("/api/v1/auth/me").status_code == 401


def test_a_stolen_cookie_stops_working_after_logout(
    client: TestClient, accounts_settings: Settings
) -> None:
    person = make_person(accounts_settings, "alice")
    csrf = login(client, person.email)["csrf_token"]
    stolen = client.cookies.get("orrery_session")
    client.post("/api/v1/auth/logout", headers={"X-CSRF-Token": csrf})
    client.cookies.set("orrery_session", stolen)
    assert client.get("/api/v1/auth/me").status_code == 401


def test_unsafe_cookie_requests_need_the_csrf_token(
    client: TestClient, accounts_settings: Settings
) -> None:
    person = make_person(accounts_settings, "alice")
    csrf = login(client, person.email)["csrf_token"]

    refused = client.post("/api/v1/teams", json={"name": "no csrf"})
    assert refused.status_code == 403
    assert "CSRF" in refused.json()["detail"]
    wrong = client.post("/api/v1/teams", json={"name": "bad"}, headers={"X-CSRF-Token": "0" * 64})
    assert wrong.status_code == 403
    assert client.post("/api/v1/tokens", json={"name": "x"}).status_code == 403
    assert client.get("/api/v1/teams").json() == []  # nothing was made

    made = client.post("/api/v1/teams", json={"name": "with csrf"}, headers={"X-CSRF-Token": csrf})
    assert made.status_code == 201
    # A plain HTML form sends the token as a field.
    form = client.post(
        "/api/v1/auth/logout",
        content=f"csrf_token={csrf}",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert form.status_code == 204


def test_csrf_token_of_one_session_does_not_fit_another(
    client: TestClient, accounts_settings: Settings
) -> None:
    alice = make_person(accounts_settings, "alice")
    bob = make_person(accounts_settings, "bob")
    alice_csrf = login(client, alice.email)["csrf_token"]
    login(client, bob.email)  # the client now holds Bob's cookie
    response = client.post(
        "/api/v1/teams", json={"name": "x"}, headers={"X-CSRF-Token": alice_csrf}
    )
    assert response.status_code == 403


def test_wrong_password_and_unknown_email_look_the_same(
    client: TestClient, accounts_settings: Settings
) -> None:
    person = make_person(accounts_settings, "alice")
    wrong = client.post("/api/v1/auth/login", json={"email": person.email, "password": "nope"})
    unknown = client.post(
        "/api/v1/auth/login", json={"email": "nobody@example.org", "password": "nope"}
    )
    assert wrong.status_code == unknown.status_code == 401
    assert wrong.json() == unknown.json() == {"detail": "wrong email or password"}
    assert "set-cookie" not in wrong.headers


def test_login_is_rate_limited_per_email(client: TestClient, accounts_settings: Settings) -> None:
    person = make_person(accounts_settings, "alice")
    for _ in range(accounts_settings.login_max_failures):
        bad = client.post("/api/v1/auth/login", json={"email": person.email, "password": "guess"})
        assert bad.status_code == 401
    # Even the right password is refused until the window has passed.
    limited = client.post("/api/v1/auth/login", json={"email": person.email, "password": PASSWORD})
    assert limited.status_code == 429
    assert "too many failed logins" in limited.json()["detail"]
    assert int(limited.headers["retry-after"]) > 0
    other = make_person(accounts_settings, "bob")
    assert (
        client.post(
            "/api/v1/auth/login", json={"email": other.email, "password": PASSWORD}
        ).status_code
        == 200
    )


def test_token_is_shown_once_stored_hashed_and_revocable(
    client: TestClient, accounts_settings: Settings
) -> None:
    person = make_person(accounts_settings, "alice")
    created = client.post("/api/v1/tokens", json={"name": "ci"}, headers=person.auth)
    assert created.status_code == 201
    token = created.json()["token"]
    assert token.startswith("orr_") and created.json()["prefix"] == token[:8]

    listed = client.get("/api/v1/tokens", headers=person.auth)
    assert token not in listed.text and "token_hash" not in listed.text
    assert [t["name"] for t in listed.json()] == ["alice's laptop", "ci"]
    with session_scope(accounts_settings.effective_database_url) as db:
        hashes = list(db.scalars(select(ApiToken.token_hash)))
    assert token not in hashes and all(len(h) == 64 for h in hashes)

    as_new = {"Authorization": f"Bearer {token}"}
    assert client.get("/api/v1/auth/me", headers=as_new).json()["id"] == person.id
    token_id = created.json()["id"]
    assert client.delete(f"/api/v1/tokens/{token_id}", headers=as_new).status_code == 204
    refused = client.get("/api/v1/auth/me", headers=as_new)
    assert refused.status_code == 401
    assert refused.json()["detail"] == "invalid or revoked API token"
    assert client.get("/api/v1/auth/me", headers=person.auth).status_code == 200


def test_only_admins_create_accounts(client: TestClient, accounts_settings: Settings) -> None:
    admin = make_person(accounts_settings, "admin", admin=True)
    person = make_person(accounts_settings, "alice")
    body = {"email": "new@example.org", "password": "another long password"}
    assert client.post("/api/v1/users", json=body, headers=person.auth).status_code == 403
    created = client.post("/api/v1/users", json=body, headers=admin.auth)
    assert created.status_code == 201 and created.json()["email"] == "new@example.org"
    again = client.post("/api/v1/users", json=body, headers=admin.auth)
    assert again.status_code == 422
    assert again.json()["detail"][0]["loc"] == ["body", "email"]
    short = client.post(
        "/api/v1/users", json={"email": "x@example.org", "password": "short"}, headers=admin.auth
    )
    assert short.status_code == 422 and short.json()["detail"][0]["loc"] == ["body", "password"]
    assert (
        client.post(
            "/api/v1/auth/login", json={"email": "new@example.org", "password": body["password"]}
        ).status_code
        == 200
    )


def test_single_user_mode_needs_no_login_and_says_so(accounts_settings: Settings) -> None:
    settings = accounts_settings.model_copy(update={"single_user": True})
    with TestClient(create_app(settings), base_url=BASE_URL) as client:
        me = client.get("/api/v1/auth/me")
    assert me.status_code == 200
    assert me.json()["mode"] == "single-user"
    assert me.json()["display_name"] == "local user"
