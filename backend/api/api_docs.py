"""The API's interactive docs, Swagger UI at /api/docs and ReDoc at /api/redoc, offline.

FastAPI's own pages load their scripts from a CDN, which leaves them blank without internet.
Here the same pages load them from the `fastapi-offline` package's copy of the Swagger UI and
ReDoc bundles, served by this app: no CDN, no copy in the repository (Plotly, by contrast, is
vendored in frontend/vendor/), no web fonts. Their Content-Security-Policy is the pages'
(api/page_headers.py), with Swagger UI's one inline script allowed by its hash.

ReDoc's bundle draws Redocly's logo beside "API docs by Redocly" from a CDN; the bundle is
served with that address replaced by an empty SVG, so the page asks no other host for anything
(the link itself stays).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import fastapi_offline
from fastapi import APIRouter, HTTPException, status
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, Response

from backend.api.page_headers import policy_for_html

ASSETS_DIR = Path(fastapi_offline.__file__).parent / "static"
ASSETS = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "redoc.standalone.js": "text/javascript",
}
REDOC_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"
BLANK_SVG = "data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg'/%3E"
ASSETS_URL = "/vendor/api-docs"
OPENAPI_URL = "/api/openapi.json"
TITLE = "Orrery API"

router = APIRouter(include_in_schema=False)


def _with_policy(page: HTMLResponse) -> HTMLResponse:
    page.headers["Content-Security-Policy"] = policy_for_html(bytes(page.body).decode())
    return page


@router.get("/api/docs", response_class=HTMLResponse)
def swagger_ui() -> HTMLResponse:
    return _with_policy(
        get_swagger_ui_html(
            openapi_url=OPENAPI_URL,
            title=f"{TITLE} - Swagger UI",
            swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url="/favicon.ico",
            swagger_ui_parameters={"validatorUrl": None},  # no round trip to a public validator
        )
    )


@router.get("/api/redoc", response_class=HTMLResponse)
def redoc() -> HTMLResponse:
    return _with_policy(
        get_redoc_html(
            openapi_url=OPENAPI_URL,
            title=f"{TITLE} - ReDoc",
            redoc_js_url=f"{ASSETS_URL}/redoc.standalone.js",
            redoc_favicon_url="/favicon.ico",
            with_google_fonts=False,
        )
    )


@cache
def _redoc_bundle() -> bytes:
    return (
        (ASSETS_DIR / "redoc.standalone.js")
        .read_bytes()
        .replace(REDOC_LOGO.encode(), BLANK_SVG.encode())
    )


@router.get(f"{ASSETS_URL}/{{name}}")
def asset(name: str) -> Response:
    """One of the docs' scripts or style sheets, from the installed package."""
    path = ASSETS_DIR / name
    if name not in ASSETS or not path.is_file():
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"{name} is not an API docs asset")
    headers = {"Cache-Control": "public, max-age=86400"}
    if name == "redoc.standalone.js":
        return Response(_redoc_bundle(), media_type=ASSETS[name], headers=headers)
    return FileResponse(path, media_type=ASSETS[name], headers=headers)
