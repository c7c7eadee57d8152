"""Whole answers of read-only GET endpoints, served from the snapshot cache before any of the
app runs (api/snapshot_cache.py says why a cached answer is never stale).

A hit costs one small query, the snapshot, on the event loop: no routing, no dependency
solving, no hop to a worker thread. The key is the path, the query string and a digest of the
caller's credentials (the Authorization and Cookie headers), so an answer only ever goes to a
request presenting the same credentials, which the same data resolve to the same caller.
Authentication can also depend on the clock (a session expires; a token's use is recorded once
a minute): it says in `request.state` until when its verdict holds, and an answer is served
only until then. An answer is stored only if it is a 200 that sets no cookie and
authentication said that.

Concurrent misses of one key under one snapshot wait for the first to finish rather than all
computing the same answer: after every write, each polling dashboard would otherwise
recompute at once.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import AsyncIterator, Collection, Hashable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from fastapi import FastAPI
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from backend.api.snapshot_cache import MISSING, SNAPSHOT_QUERY, SnapshotCache

IDENTITY_VALID_UNTIL = "identity_valid_until"  # set by authentication: seconds since the epoch
SNAPSHOT_CONNECTIONS = 4  # per API process
CREDENTIAL_HEADERS = (b"authorization", b"cookie")  # ASGI header names are lower-case


@dataclass(frozen=True)
class StoredAnswer:
    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes
    valid_until: float  # seconds since the epoch

    async def send(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status, "headers": self.headers})
        await send({"type": "http.response.body", "body": self.body})


@asynccontextmanager
async def snapshot_engine(app: FastAPI) -> AsyncIterator[None]:
    """While the app runs: an async engine for the middleware's snapshot queries, on
    PostgreSQL with the cache on; `app.state.snapshot_engine` is None otherwise."""
    settings = app.state.settings
    url = make_url(settings.effective_database_url)
    engine = None
    if url.get_backend_name() == "postgresql" and settings.read_cache_entries > 0:
        # psycopg 3 drives asyncio too. Autocommit: one round trip per snapshot, no BEGIN or
        # ROLLBACK around it. A query holds its connection for that round trip only, so a few
        # connections serve any load; no overflow, as an overflow connection is opened and
        # closed around a single query.
        engine = create_async_engine(
            url.set(drivername="postgresql+psycopg"),
            isolation_level="AUTOCOMMIT",
            pool_size=SNAPSHOT_CONNECTIONS,
            max_overflow=0,
        )
    app.state.snapshot_engine = engine
    try:
        yield
    finally:
        app.state.snapshot_engine = None
        if engine is not None:
            await engine.dispose()


async def current_snapshot(engine: AsyncEngine) -> str | None:
    """The database's current snapshot; None when it cannot be read (the app then answers,
    and says what is wrong)."""
    try:
        async with engine.connect() as connection:
            return await connection.scalar(SNAPSHOT_QUERY)
    except (SQLAlchemyError, OSError):
        return None


def credentials(scope: Scope) -> bytes:
    """A digest of every header that says who is asking (Authorization, Cookie), in order: the
    cache keeps no secret."""
    digest = hashlib.sha256()
    for name, value in scope["headers"]:
        if name in CREDENTIAL_HEADERS:
            digest.update(name + b":" + value + b"\n")
    return digest.digest()


class CachedReads:
    """ASGI middleware serving GET requests to `paths` from the app's snapshot cache."""

    def __init__(self, app: ASGIApp, paths: Collection[str]) -> None:
        self.app = app
        self.paths = frozenset(paths)
        self._in_flight: dict[tuple[Hashable, str], asyncio.Future[StoredAnswer | None]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "GET" or scope["path"] not in self.paths:
            await self.app(scope, receive, send)
            return
        state = scope["app"].state
        cache: SnapshotCache = state.read_cache
        engine: AsyncEngine | None = getattr(state, "snapshot_engine", None)
        before = None if engine is None else await current_snapshot(engine)
        if engine is None or before is None:
            await self.app(scope, receive, send)
            return
        key = (scope["path"], scope["query_string"], credentials(scope))
        answer = cache.get(key, before)
        if answer is MISSING and (key, before) in self._in_flight:
            answer = await asyncio.shield(self._in_flight[(key, before)])
        if isinstance(answer, StoredAnswer) and time.time() < answer.valid_until:
            await answer.send(send)
            return
        await self._compute(scope, receive, send, key, before, cache, engine)

    async def _compute(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        key: Hashable,
        before: str,
        cache: SnapshotCache,
        engine: AsyncEngine,
    ) -> None:
        """Run the app, answering the client as it goes, and keep its answer if it may be."""
        flight: asyncio.Future[StoredAnswer | None] = asyncio.get_running_loop().create_future()
        self._in_flight.setdefault((key, before), flight)
        start: Message = {}
        body: list[bytes] = []

        async def recording_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                body.append(message.get("body", b""))
            await send(message)

        stored = None
        try:
            await self.app(scope, receive, recording_send)
            headers = list(start.get("headers", []))
            valid_until = scope.get("state", {}).get(IDENTITY_VALID_UNTIL)
            if (
                start.get("status") == 200
                and valid_until is not None
                and all(name.lower() != b"set-cookie" for name, _ in headers)
            ):
                after = await current_snapshot(engine)
                if after == before:
                    stored = StoredAnswer(200, headers, b"".join(body), valid_until)
                    cache.put(key, before, after, stored)
        finally:
            flight.set_result(stored)
            if self._in_flight.get((key, before)) is flight:
                del self._in_flight[(key, before)]
