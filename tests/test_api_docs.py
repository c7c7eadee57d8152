"""Swagger UI and ReDoc work offline: their pages name no outside host, and every script and
style sheet they load is served by the app itself, from the installed package."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from backend.api.app import create_app
from backend.settings import Settings

ASSET = re.compile(r"""(?:src|href)=["']([^"']+)["']""")


@pytest.mark.parametrize(
    ("page", "script"),
    [("/api/docs", "SwaggerUIBundle"), ("/api/redoc", "redoc.standalone.js")],
)
def test_docs_pages_load_everything_from_this_server(
    embedded_settings: Settings, page: str, script: str
) -> None:
    with TestClient(create_app(embedded_settings)) as client:
        html = client.get(page)
        assert html.status_code == 200 and script in html.text
        assert re.search(r"(https?:)?//[a-z0-9]", html.text, re.IGNORECASE) is None, html.text
        assets = ASSET.findall(html.text)
        assert any(a.endswith(".js") for a in assets)
        for asset in assets:
            loaded = client.get(asset)
            assert loaded.status_code == 200, asset
            assert len(loaded.content) > 1000 or asset == "/favicon.ico", asset
            # Nothing they load fetches from another host either (ReDoc's Redocly logo did).
            assert re.search(rb"https://cdn\.", loaded.content) is None, asset
        assert client.get("/api/openapi.json").status_code == 200
        assert client.get("/vendor/api-docs/..%2Fcore.py").status_code == 404
        assert client.get("/vendor/api-docs/core.py").status_code == 404
