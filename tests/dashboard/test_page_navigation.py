"""The main navigation is written once (api/routes/pages.py) and served inside every page that
has one, its own entry marked current; no page file spells the links out."""

from __future__ import annotations

import re
from pathlib import Path

from fastapi.testclient import TestClient

from backend.api.routes.pages import NAV, NAV_SLOT

PAGES_DIR = Path(__file__).resolve().parents[2] / "frontend" / "pages"
# Each page route, and the entry of the navigation it is (None: it is none of them).
ROUTES = {
    "/": "/",
    "/submit": "/submit",
    "/dashboards": "/dashboards",
    "/papers": "/papers",
    "/compare": None,
    "/experiments/1": None,
    "/runs/1": None,
    "/searches/1": None,
    "/dashboards/abc": None,
}
NAV_HTML = re.compile(r'<nav aria-label="main">(.*?)</nav>', re.S)
LINK = re.compile(r'<a href="([^"]+)"( aria-current="page")?>([^<]+)</a>')


def test_every_page_with_a_navigation_is_served_with_the_one_navigation(
    client: TestClient,
) -> None:
    expected = [(link.href, link.label.replace("&", "&amp;")) for link in NAV]
    for path, current in ROUTES.items():
        html = client.get(path).text
        navs = NAV_HTML.findall(html)
        assert len(navs) == 1, path
        links = LINK.findall(navs[0])
        assert [(href, label) for href, _, label in links] == expected, path
        assert [href for href, mark, _ in links if mark] == ([current] if current else []), path


def test_the_page_files_hold_an_empty_slot_not_the_links() -> None:
    slots = {page.stem: page.read_text().count(NAV_SLOT) for page in PAGES_DIR.glob("*.html")}
    assert slots == {page: 0 if page in ("login", "shared") else 1 for page in slots}
    for page in PAGES_DIR.glob("*.html"):
        assert 'href="/submit"' not in page.read_text(), page.name
