"""CSRF protection for requests authenticated by the session cookie.

The token is an HMAC of the session secret under the server's key, so it needs no storage, is
different for every session, and cannot be computed by a page that cannot read the cookie.
Unsafe requests send it in the `X-CSRF-Token` header (scripts) or a `csrf_token` field (forms).
"""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import parse_qs

from fastapi import Request

CSRF_HEADER = "x-csrf-token"
CSRF_FIELD = "csrf_token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
FORM_TYPE = "application/x-www-form-urlencoded"


def csrf_token(secret_key: str, session_secret: str) -> str:
    return hmac.new(secret_key.encode(), session_secret.encode(), hashlib.sha256).hexdigest()


def csrf_matches(secret_key: str, session_secret: str, candidate: str | None) -> bool:
    return candidate is not None and hmac.compare_digest(
        csrf_token(secret_key, session_secret), candidate
    )


async def submitted_csrf_token(request: Request) -> str | None:
    """The token an unsafe request carries, from its header or its form body."""
    if request.method in SAFE_METHODS:
        return None
    header = request.headers.get(CSRF_HEADER)
    if header:
        return header
    if request.headers.get("content-type", "").split(";")[0].strip() == FORM_TYPE:
        fields = parse_qs((await request.body()).decode("latin-1"))
        values = fields.get(CSRF_FIELD)
        return values[0] if values else None
    return None
