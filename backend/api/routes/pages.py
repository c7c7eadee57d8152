"""The dashboard's HTML pages and static files (Plotly among them, vendored in frontend/vendor/).

Pages are static HTML that read the API from the browser: serving one needs no login (the
API it calls does). The API's own routes live in their routers beside this one.

The main navigation is written once, here (`NAV`), and put into each page where the page holds
an empty `<nav aria-label="main"></nav>`, with the page's own entry marked current: served whole,
so it shows with the page's first paint and needs no script (the pages' CSP allows none inline).
A page added to the navigation is one line of `NAV`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from html import escape
from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.staticfiles import StaticFiles

FRONTEND_DIR = Path(__file__).resolve().parents[3] / "frontend"
PAGES_DIR = FRONTEND_DIR / "pages"

router = APIRouter()


@dataclass(frozen=True)
class NavLink:
    href: str
    label: str
    page: str  # the page (frontend/pages/PAGE.html) this entry leads to, marked current there


NAV = (
    NavLink("/", "Experiments & runs", "runs"),
    NavLink("/submit", "Submit", "submit"),
    NavLink("/dashboards", "Dashboards", "dashboards"),
    NavLink("/papers", "Papers", "papers"),
)
NAV_SLOT = '<nav aria-label="main"></nav>'


def navigation(page: str) -> str:
    """The main navigation as HTML, the entry leading to `page` marked current."""
    current = ' aria-current="page"'
    links = "".join(
        f'<a href="{link.href}"{current if link.page == page else ""}>{escape(link.label)}</a>'
        for link in NAV
    )
    return f'<nav aria-label="main">\n{links}\n</nav>'


@cache
def _page(name: str) -> str:
    html = (PAGES_DIR / f"{name}.html").read_text(encoding="utf-8")
    return html.replace(NAV_SLOT, navigation(name))


def _html(name: str) -> HTMLResponse:
    return HTMLResponse(_page(name), headers={"Cache-Control": "no-cache"})


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def runs_page() -> HTMLResponse:
    """Experiments with live status, and the run table."""
    return _html("runs")


@router.get("/login", response_class=HTMLResponse, include_in_schema=False)
def login_page() -> HTMLResponse:
    """Email and password to a browser session, then back to `?next=` (same-site paths only)."""
    return _html("login")


@router.get("/submit", response_class=HTMLResponse, include_in_schema=False)
def submit_page() -> HTMLResponse:
    return _html("submit")


@router.get("/compare", response_class=HTMLResponse, include_in_schema=False)
def compare_page() -> HTMLResponse:
    """Charts over the selected runs (`?ids=1,2,3`), savable as a dashboard."""
    return _html("compare")


@router.get("/experiments/{experiment_id}", response_class=HTMLResponse, include_in_schema=False)
def experiment_page(experiment_id: int) -> HTMLResponse:
    """One experiment: status, counts, its runs and its spec."""
    return _html("experiment")


@router.get("/runs/{run_id}", response_class=HTMLResponse, include_in_schema=False)
def run_page(run_id: int) -> HTMLResponse:
    """One run in full: spec, baseline, status, per-layer-per-pass figures, training curves."""
    return _html("run")


@router.get("/searches/{search_id}", response_class=HTMLResponse, include_in_schema=False)
def search_page(search_id: int) -> HTMLResponse:
    """A design search's designs: time against area per technique, the fronts, bounds that
    filter them, and the fastest design within the bounds."""
    return _html("search")


@router.get("/papers", response_class=HTMLResponse, include_in_schema=False)
def papers_page() -> HTMLResponse:
    """The technique papers' headlines next to this installation's results of their miniatures."""
    return _html("papers")


@router.get("/dashboards", response_class=HTMLResponse, include_in_schema=False)
def dashboards_page() -> HTMLResponse:
    return _html("dashboards")


@router.get("/dashboards/{dashboard_id}", response_class=HTMLResponse, include_in_schema=False)
def dashboard_page(dashboard_id: str) -> HTMLResponse:
    return _html("compare")


@router.get("/shared/{token}", response_class=HTMLResponse, include_in_schema=False)
def shared_page(token: str) -> HTMLResponse:
    """A read-only dashboard; the page reads its data with the token, nothing else."""
    return HTMLResponse(
        _page("shared"),
        headers={"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"},
    )


@router.get("/favicon.ico", include_in_schema=False)
def favicon() -> FileResponse:
    return FileResponse(FRONTEND_DIR / "favicon.svg", media_type="image/svg+xml")


def mount_static(app: FastAPI) -> None:
    """Serve frontend/ at /static (ES modules and CSS, no build step)."""
    app.mount("/static", StaticFiles(directory=FRONTEND_DIR), name="static")
