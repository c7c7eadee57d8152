"""Passwords, API tokens, session cookies and share-link tokens never appear in an answer
(except the one that hands a new token out) nor in the server's or the CLI's output.

The server is a real uvicorn process, so its access log is part of what is checked.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from tests.conftest import ORRERY_BIN, free_port, orrery_env, stop_process, wait_for_http

PASSWORD = "correct horse battery staple"
WRONG_PASSWORD = "incorrect donkey battery"
SHORT_PASSWORD = "tiny-pw"
UVICORN = [sys.executable, "-m", "uvicorn", "backend.api.app:create_app", "--factory"]
UVICORN += ["--host", "127.0.0.1"]


def test_secrets_never_leak_into_answers_or_logs(
    postgres_url: str, redis_db_url: str, tmp_path: Path
) -> None:
    env = orrery_env(
        ORRERY_DATA_DIR=str(tmp_path),
        ORRERY_DATABASE_URL=postgres_url,
        ORRERY_BROKER_URL=redis_db_url,
        ORRERY_RESULT_BACKEND=redis_db_url,
        ORRERY_SINGLE_USER="false",
        ORRERY_COOKIE_SECURE="false",  # plain HTTP to 127.0.0.1 in this test
        ORRERY_RECONCILE_INTERVAL="0",
    )
    created = subprocess.run(
        [
            ORRERY_BIN,
            "user",
            "create",
            "--admin",
            "--email",
            "alice@example.org",
            "--password-stdin",
        ],
        input=PASSWORD + "\n",
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert created.returncode == 0, created.stderr
    cli_output = created.stdout + created.stderr

    port = free_port()
    server = subprocess.Popen(
        [*UVICORN, "--port", str(port), "--log-level", "debug"],
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    answers: list[tuple[str, httpx.Response]] = []
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(f"{base}/api/v1/health", process=server)
        with httpx.Client(base_url=base, timeout=30) as http:

            def call(label: str, method: str, url: str, **kwargs: object) -> httpx.Response:
                response = http.request(method, url, **kwargs)  # type: ignore[arg-type]
                answers.append((label, response))
                return response

            email = "alice@example.org"
            wrong = {"email": email, "password": WRONG_PASSWORD}
            assert call("wrong", "POST", "/api/v1/auth/login", json=wrong).status_code == 401
            no_email = {"password": PASSWORD}
            assert call("invalid", "POST", "/api/v1/auth/login", json=no_email).status_code == 422
            right = {"email": email, "password": PASSWORD}
            login = call("login", "POST", "/api/v1/auth/login", json=right)
            assert login.status_code == 200
            session = http.cookies["orrery_session"]
            csrf = {"X-CSRF-Token": login.json()["csrf_token"]}
            short = {"email": "bob@example.org", "password": SHORT_PASSWORD}
            refused = call("short", "POST", "/api/v1/users", json=short, headers=csrf)
            assert refused.status_code == 422

            made = call("token", "POST", "/api/v1/tokens", json={"name": "ci"}, headers=csrf)
            token = made.json()["token"]
            bearer = {"Authorization": f"Bearer {token}"}
            http.cookies.clear()
            assert call("me", "GET", "/api/v1/auth/me", headers=bearer).status_code == 200
            call("tokens", "GET", "/api/v1/tokens", headers=bearer)
            dashboard = call(
                "dash", "POST", "/api/v1/dashboards", json={"name": "d"}, headers=bearer
            )
            link_url = f"/api/v1/dashboards/{dashboard.json()['id']}/share-links"
            link = call("link", "POST", link_url, headers=bearer)
            share = link.json()["token"]
            assert call("shared", "GET", f"/api/v1/shared/{share}").status_code == 200
            call("shared page", "GET", f"/shared/{share}")
            call("revoke", "DELETE", f"/api/v1/tokens/{made.json()['id']}", headers=bearer)
            assert call("revoked", "GET", "/api/v1/auth/me", headers=bearer).status_code == 401
    finally:
        server_log = stop_process(server)

    assert "GET /api/v1/shared/[redacted]" in server_log  # the access log was on
    secrets = {
        "password": PASSWORD,
        "wrong password": WRONG_PASSWORD,
        "short password": SHORT_PASSWORD,
        "API token": token,
        "session": session,
        "share token": share,
    }
    handed_out_by = {"API token": "token", "session": "login", "share token": "link"}
    for name, secret in secrets.items():
        assert secret not in server_log, f"{name} in the server log"
        assert secret not in cli_output, f"{name} in the CLI's output"
        for label, response in answers:
            if handed_out_by.get(name) == label:
                continue
            text = response.text + str(dict(response.headers))
            assert secret not in text, f"{name} in the answer to '{label}'"
