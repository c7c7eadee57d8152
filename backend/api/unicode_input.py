"""JSON bodies must hold Unicode text: a lone UTF-16 surrogate is refused with 422.

JSON may spell a surrogate half as an escape (`"x\\ud800"`) and Python's parser accepts it,
but such a string is no text: it cannot be encoded as UTF-8, so the database (and any answer
echoing it) would fail on it. This middleware reads the body (already cut to the size limit
by `BodySizeLimit`), and refuses any JSON body with such a string, in a value or a key,
naming where it is, before any route sees it. Paired surrogates are one character and pass.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from backend.api.limits import replaying

# Only an escape can put a surrogate into parsed JSON (UTF-8 cannot encode one).
SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogates(value: Any, loc: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    """Where in a parsed JSON value a string (or key) holds a lone surrogate."""
    if isinstance(value, str):
        if SURROGATE.search(value):
            yield loc
    elif isinstance(value, dict):
        for key, item in value.items():
            if SURROGATE.search(key):
                yield (*loc, _printable(key))
            else:
                yield from lone_surrogates(item, (*loc, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from lone_surrogates(item, (*loc, index))


def _printable(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


class RefuseLoneSurrogates:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        places = self._places(body)
        if places:
            errors = [
                {
                    "type": "string_unicode",
                    "loc": ["body", *place],
                    "msg": "text must be valid Unicode: this string holds a lone UTF-16 "
                    "surrogate (an unpaired \\ud800-\\udfff escape)",
                }
                for place in places
            ]
            await JSONResponse({"detail": errors}, status_code=422)(scope, receive, send)
            return
        await self.app(scope, replaying(body, receive), send)

    @staticmethod
    def _places(body: bytes) -> list[tuple[str | int, ...]]:
        if not SURROGATE_ESCAPE.search(body):
            return []
        try:
            parsed = json.loads(body)
        except ValueError:
            return []  # not JSON: the route's own parsing answers
        return list(lone_surrogates(parsed))
