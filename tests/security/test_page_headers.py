"""HTML pages cannot be framed and run only this origin's scripts: every page, its static copy
and the API docs carry a Content-Security-Policy with frame-ancestors 'none' and
X-Frame-Options DENY. (That the pages still work under it, Plotly charts included, is what the
browser tests see: a blocked script or style is a console error there.)"""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from backend.api.page_headers import INLINE_SCRIPT, content_security_policy, policy_for_html

# Every page route of api/routes/pages.py, the static copies of the pages, and the API docs.
PAGES = [
    "/",
    "/login",
    "/submit",
    "/compare",
    "/experiments/1",
    "/runs/1",
    "/papers",
    "/dashboards",
    "/dashboards/abc",
    "/shared/xyz",
    "/static/pages/runs.html",
    "/static/pages/login.html",
    "/api/docs",
    "/api/redoc",
]


def directives(policy: str) -> dict[str, list[str]]:
    return {
        name: values
        for name, *values in (part.split() for part in policy.split(";") if part.strip())
    }


def test_every_html_page_forbids_framing_and_foreign_scripts(client: TestClient) -> None:
    for path in PAGES:
        answer = client.get(path)
        assert answer.status_code == 200, path
        assert answer.headers["content-type"].startswith("text/html"), path
        assert answer.headers["x-frame-options"] == "DENY", path
        assert answer.headers["x-content-type-options"] == "nosniff", path
        policy = directives(answer.headers["content-security-policy"])
        assert policy["frame-ancestors"] == ["'none'"], path
        assert policy["default-src"] == ["'self'"], path
        assert policy["object-src"] == ["'none'"], path
        scripts = policy["script-src"]
        assert "'unsafe-inline'" not in scripts and "'unsafe-eval'" not in scripts, path
        # Every inline script the page holds is allowed by its hash, nothing else inline.
        inline = INLINE_SCRIPT.findall(answer.text)
        assert answer.headers["content-security-policy"] == content_security_policy(inline)


def test_the_pages_have_no_inline_script_and_load_only_from_here(client: TestClient) -> None:
    for path in ("/", "/login", "/submit", "/compare", "/runs/1", "/papers", "/shared/xyz"):
        page = client.get(path).text
        assert INLINE_SCRIPT.findall(page) == [], path
        assert re.findall(r"\bon[a-z]+=", page) == [], path
        for src in re.findall(r'(?:src|href)="(/[^"]*)"', page):
            if not src.startswith("/api/"):
                assert client.get(src).status_code == 200, (path, src)


def test_the_api_docs_allow_their_own_inline_script_and_bundles(client: TestClient) -> None:
    swagger = client.get("/api/docs")
    (script,) = INLINE_SCRIPT.findall(swagger.text)
    assert "SwaggerUIBundle" in script
    assert swagger.headers["content-security-policy"] == policy_for_html(swagger.text)
    assert "'sha256-" in swagger.headers["content-security-policy"]
    for page in (swagger, client.get("/api/redoc")):
        for src in re.findall(r'(?:src|href)="(/[^"]*)"', page.text):
            assert client.get(src).status_code == 200, src


def test_api_answers_keep_their_headers(client: TestClient) -> None:
    health = client.get("/api/v1/health")
    assert "content-security-policy" not in health.headers
    assert "x-frame-options" not in health.headers
