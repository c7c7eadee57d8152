"""Whole answers of read-only GET endpoints, served from the read cache before any of the
app runs (api/read_cache.py says why a cached answer is never stale).

A hit costs the database's change marker (api/marker_reader.py: one small query shared by the
requests asking at the same time), on the event loop: no routing, no dependency solving, no
hop to a worker thread. The key is the path, the query string and a digest of the caller's
credentials (the Authorization and Cookie headers), so an answer only ever goes to a request
presenting the same credentials, which the same data resolve to the same caller; the version
is the marker's counts of the topics the path's answers show (`reads`). Authentication can
also depend on the clock (a session expires; a token's use is recorded once a minute): it says
in `request.state` until when its verdict holds, and an answer is served only until then. An
answer is stored only if it is a 200 that sets no cookie and authentication said that.

Concurrent misses of one key under one version wait for the first to finish rather than all
computing the same answer (after every write, each polling dashboard would otherwise recompute
at once), and take its answer even when a write committed meanwhile kept it out of the cache:
they read the same version after they arrived, so no write they could have made or seen is
missing from it. Under a writer that commits more often than an answer takes to compute,
nothing is cached, and one computation per version still serves every request that asked.

Why it is kept: `benchmarks/api_load.py --writer --read-cache on,off` (PostgreSQL, 20 clients,
20 s per setting, a Celery worker training meanwhile and the cluster seeing about 1-3 writing
transactions a second), three runs on a 2-core machine shared with other work, measured the
repeated /runs queries at 402 and 937 requests/s with the cache against 50 and 63 without
(p50 18 and 11 ms against 349 and 283 ms) with one training process, and 129 against 36
requests/s with two; with every page new, about the same either way (39-59 against 41-48
requests/s). Those figures are from when answers were keyed on the cluster's snapshot, which
any write to any database of the cluster changed. Keyed on the tables each read shows, with
concurrent misses sharing one answer, the issue's mix (`api_load.py --mix --writer --code
before=...,after=...`, 50 clients, both servers on one database in alternating turns) went from
149 to 186 requests/s and its p99 from 2.26 to 1.86 s while a worker trained.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from backend.api.marker_reader import MarkerReader
from backend.api.read_cache import MISSING, ReadCache

IDENTITY_VALID_UNTIL = "identity_valid_until"  # set by authentication: seconds since the epoch
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


def credentials(scope: Scope) -> bytes:
    """A digest of every header that says who is asking (Authorization, Cookie), in order: the
    cache keeps no secret."""
    digest = hashlib.sha256()
    for name, value in scope["headers"]:
        if name in CREDENTIAL_HEADERS:
            digest.update(name + b":" + value + b"\n")
    return digest.digest()


class CachedReads:
    """ASGI middleware serving GET requests to the paths of `reads` (regular expressions, each
    matching a whole path, with the change topics its answers show) from the app's read
    cache."""

    def __init__(self, app: ASGIApp, reads: Mapping[str, Sequence[str]]) -> None:
        self.app = app
        self.reads = [(re.compile(path), tuple(topics)) for path, topics in reads.items()]
        self._in_flight: dict[tuple[Hashable, Hashable], asyncio.Future[StoredAnswer | None]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        topics = self._topics(scope)
        if topics is None:
            await self.app(scope, receive, send)
            return
        state = scope["app"].state
        cache: ReadCache = state.read_cache
        reader: MarkerReader | None = getattr(state, "marker_reader", None)
        marker = None if reader is None else await reader.current()
        if reader is None or marker is None:
            await self.app(scope, receive, send)
            return
        before = marker.of(topics)
        key = (scope["path"], scope["query_string"], credentials(scope))
        answer = cache.get(key, before)
        if answer is MISSING and (key, before) in self._in_flight:
            answer = await asyncio.shield(self._in_flight[(key, before)])
        if isinstance(answer, StoredAnswer) and time.time() < answer.valid_until:
            await answer.send(send)
            return
        await self._compute(scope, receive, send, key, topics, before, cache, reader)

    def _topics(self, scope: Scope) -> tuple[str, ...] | None:
        """The topics of a cached read's answers; None for any other request."""
        if scope["type"] != "http" or scope["method"] != "GET":
            return None
        path = scope["path"]
        return next((topics for read, topics in self.reads if read.fullmatch(path)), None)

    async def _compute(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        key: Hashable,
        topics: tuple[str, ...],
        before: tuple[int, ...],
        cache: ReadCache,
        reader: MarkerReader,
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

        shared = None
        try:
            await self.app(scope, receive, recording_send)
            headers = list(start.get("headers", []))
            valid_until = scope.get("state", {}).get(IDENTITY_VALID_UNTIL)
            if (
                start.get("status") == 200
                and valid_until is not None
                and all(name.lower() != b"set-cookie" for name, _ in headers)
            ):
                shared = StoredAnswer(200, headers, b"".join(body), valid_until)
                after = await reader.current()
                cache.put(key, before, None if after is None else after.of(topics), shared)
        finally:
            flight.set_result(shared)
            if self._in_flight.get((key, before)) is flight:
                del self._in_flight[(key, before)]
