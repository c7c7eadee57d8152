"""Headers that keep HTML pages from being framed or made to run foreign code.

Every HTML answer (the dashboard's pages, the static copies under /static, the API docs) gets a
Content-Security-Policy with `frame-ancestors 'none'`, `X-Frame-Options: DENY` (for browsers
that predate frame-ancestors) and `X-Content-Type-Options: nosniff`, unless the route set its
own policy (the API docs do, to allow their one inline script by its hash). JSON and files
keep their headers as they are.

The pages' policy: scripts only from this origin (the pages have no inline script; Plotly is
served from /static/vendor/), fetches and event streams only to it, no plugins, no <base>, forms
post only here. Open choices: styles allow 'unsafe-inline', since Plotly styles its charts with
inline style attributes and injected <style> elements (styles run no code); images allow data:
and blob: URLs (Plotly's "download as PNG" and Swagger UI's icons); workers allow blob: (ReDoc
builds its search worker from one).
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>(.*?)</script>", re.DOTALL)


def content_security_policy(inline_scripts: Iterable[str] = ()) -> str:
    """The pages' policy; `inline_scripts` are allowed by their SHA-256 (and nothing else
    inline)."""
    hashes = [
        "'sha256-" + base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() + "'"
        for s in inline_scripts
    ]
    directives = {
        "default-src": ["'self'"],
        "script-src": ["'self'", *hashes],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:", "blob:"],
        "font-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "worker-src": ["'self'", "blob:"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
    return "; ".join(f"{name} {' '.join(values)}" for name, values in directives.items())


def policy_for_html(html: str) -> str:
    """The policy for one page, allowing exactly the inline scripts it holds."""
    return content_security_policy(INLINE_SCRIPT.findall(html))


PAGE_POLICY = content_security_policy()


class PageHeaders:
    """Add the headers above to every HTML answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                if headers.get("content-type", "").startswith("text/html"):
                    if "content-security-policy" not in headers:
                        headers["Content-Security-Policy"] = PAGE_POLICY
                    headers["X-Frame-Options"] = "DENY"
                    headers["X-Content-Type-Options"] = "nosniff"
            await send(message)

        await self.app(scope, receive, send_with_headers)
