"""Whole answers of read-only GET endpoints, served from the read cache before any of the
app runs (api/read_cache.py says why a cached answer is never stale).

An endpoint is cached by declaring so where it is defined: `@cached_read(*topics)` names the
change topics (db/change_log.py) its answers show, the tables it reads and `PROGRESS` where it
shows a training's progress; the topics of finding the caller (`CALLER_TABLES`) are added to
every declaration, answers being per caller; api/app.py collects its routers' declarations
(`declared_reads`). tests/security/test_cached_reads.py checks each declaration against the
statements the endpoint runs. Nothing else in the service knows of the
cache: writes reach it through the database's triggers, whoever makes them.

A hit costs the database's change marker (api/marker_reader.py: one small query shared by the
requests asking at the same time), on the event loop: no routing, no dependency solving, no
hop to a worker thread. The key is the path, the query string, whether the client takes gzip
(answers are kept as sent, compressed where it does) and a digest of the caller's credentials
(the Authorization and Cookie headers), so an answer only ever goes to a request presenting the
same credentials, which the same data resolve to the same caller; the version
is the marker's counts of the topics the endpoint declared. Authentication can also depend on
the clock (a session expires; a token's use is recorded once a minute): its verdict, kept as
`request.state.identity` (auth/identity.py), says until when it holds, and an answer is served
only until then. An answer is stored only if it is a 200 that sets no cookie, from a request
whose caller was found.

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
import math
import re
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi import APIRouter, Request
from fastapi.routing import APIRoute
from sqlalchemy.orm import Session
from starlette.routing import compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from backend.api.marker_reader import MarkerReader
from backend.api.read_cache import MISSING, ReadCache
from backend.auth.identity import Identity

CREDENTIAL_HEADERS = (b"authorization", b"cookie")  # ASGI header names are lower-case
# What finding the caller and their teams reads (api/security.py): topics of every cached read.
CALLER_TABLES = ("users", "user_sessions", "api_tokens", "teams", "team_memberships")
TOPICS_ATTRIBUTE = "cached_read_topics"

Endpoint = TypeVar("Endpoint", bound=Callable[..., Any])
T = TypeVar("T")


def cached_read(*topics: str) -> Callable[[Endpoint], Endpoint]:
    """Declare a GET endpoint's answers cacheable until a write to `topics` (or to the
    caller's tables) commits. Its answer must depend only on the request, the caller and the
    data of those topics."""

    def declare(endpoint: Endpoint) -> Endpoint:
        setattr(endpoint, TOPICS_ATTRIBUTE, (*CALLER_TABLES, *topics))
        return endpoint

    return declare


def declared_topics(endpoint: Callable[..., Any]) -> tuple[str, ...] | None:
    return getattr(endpoint, TOPICS_ATTRIBUTE, None)


def declared_reads(
    routers: Iterable[APIRouter], prefix: str = ""
) -> list[tuple[re.Pattern[str], tuple[str, ...]]]:
    """Each cached read of `routers` (included under `prefix`): its path's pattern, with the
    topics its endpoint declared."""
    return [
        (compile_path(prefix + route.path)[0], topics)
        for router in routers
        for route in router.routes
        if isinstance(route, APIRoute)
        and "GET" in route.methods
        and (topics := declared_topics(route.endpoint)) is not None
    ]


def cached_part(request: Request, db: Session, key: Hashable, compute: Callable[[], T]) -> T:
    """A part of a cached read's answer (`compute()`) kept on its own, under the topics its
    endpoint declared: what several of its answers share, such as a count over every page."""
    topics = declared_topics(request.scope["endpoint"])
    if topics is None:
        raise TypeError(f"{request.scope['endpoint'].__name__} declares no cached read")
    cache: ReadCache = request.app.state.read_cache
    return cache.answer(db, key, compute, topics)


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


def takes_gzip(scope: Scope) -> bool:
    """Whether the client accepts gzip, as the compressing middleware decides it."""
    return any(name == b"accept-encoding" and b"gzip" in value for name, value in scope["headers"])


class CachedReads:
    """ASGI middleware serving GET requests to the paths of `reads` (`declared_reads`: each
    pattern matching a whole path, with the change topics its answers show) from the app's
    read cache."""

    def __init__(self, app: ASGIApp, reads: list[tuple[re.Pattern[str], tuple[str, ...]]]) -> None:
        self.app = app
        self.reads = reads
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
        key = (scope["path"], scope["query_string"], takes_gzip(scope), credentials(scope))
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
            identity: Identity | None = scope.get("state", {}).get("identity")
            if (
                start.get("status") == 200
                and identity is not None
                and all(name.lower() != b"set-cookie" for name, _ in headers)
            ):
                valid_until = identity.valid_until
                expiry = math.inf if valid_until is None else valid_until.timestamp()
                shared = StoredAnswer(200, headers, b"".join(body), expiry)
                after = await reader.current()
                cache.put(key, before, None if after is None else after.of(topics), shared)
        finally:
            flight.set_result(shared)
            if self._in_flight.get((key, before)) is flight:
                del self._in_flight[(key, before)]
