"""Limits that keep clients from exhausting the service: request body size and requests at
work at once, as ASGI middleware. (The number of runs one user may have queued or running is
`backend.experiments.quota`; the sweep expansion limit lives in the expander.)
"""

from __future__ import annotations

import asyncio
import re

from fastapi import status
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send


def replaying(body: bytes, receive: Receive) -> Receive:
    """A `receive` that hands the app a body already read, whole, then listens on."""
    pending: Message | None = {"type": "http.request", "body": body, "more_body": False}

    async def replay() -> Message:
        nonlocal pending
        if pending is not None:
            message, pending = pending, None
            return message
        return await receive()

    return replay


class BodySizeLimit:
    """Refuse request bodies over `max_bytes` with 413, whether declared or streamed.

    The body is read here, up to the limit, and replayed to the app: a client that lies about
    Content-Length or sends chunks cannot make the app buffer more than the limit.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await self._refuse(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        await self.app(scope, replaying(b"".join(chunks), receive), send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = JSONResponse(
            {"detail": f"request body too large: the limit is {self.max_bytes} bytes"},
            status_code=status.HTTP_413_CONTENT_TOO_LARGE,
        )
        await response(scope, receive, send)


class ConcurrencyLimit:
    """At most `limit` requests at work in the app at once; the rest wait their turn. Of them,
    at most `heavy_limit` are heavy reads (paths matching `heavy`: aggregates over every run,
    exports, chart data), which wait for a heavy turn before they take a slot.

    Without it a burst of requests deadlocks the process: each request keeps its database
    session, and so a pooled connection, between its dependencies and its endpoint, which run
    on worker threads; once every connection is held by requests waiting for a thread, and
    every thread by a request waiting for a connection, nothing moves. Bounded below both,
    every request admitted gets its connection and its thread. Long-lived streams matching
    `exempt` are not counted: they hold neither between their polls.

    Heavy reads wait outside the slots: however many of them are asked at once, at most
    `heavy_limit` hold a slot (and a thread, and a connection), and the other slots are left
    to cheap requests, which then never queue behind a backlog of exports and aggregates (a
    heavy request takes tens to hundreds of milliseconds of CPU, a cheap one a few).
    """

    def __init__(
        self,
        app: ASGIApp,
        limit: int,
        exempt: re.Pattern[str],
        heavy: re.Pattern[str] | None = None,
        heavy_limit: int = 1,
    ) -> None:
        self.app = app
        self.exempt = exempt
        self.heavy = heavy
        self._slots = asyncio.Semaphore(limit)
        self._heavy_slots = asyncio.Semaphore(min(heavy_limit, limit))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.exempt.match(scope["path"]):
            await self.app(scope, receive, send)
            return
        if self.heavy is not None and self.heavy.match(scope["path"]):
            async with self._heavy_slots, self._slots:
                await self.app(scope, receive, send)
            return
        async with self._slots:
            await self.app(scope, receive, send)
