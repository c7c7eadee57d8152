"""Limits that keep clients from exhausting the service: request body size, requests at work
at once, and the number of runs one user may have queued or running. (The sweep expansion
limit lives in the expander.)
"""

from __future__ import annotations

import asyncio
import re

from fastapi import HTTPException, status
from sqlalchemy import func, select
from sqlalchemy.orm import Session
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from backend.db.models import Experiment, Run, User

ACTIVE = ("queued", "running")


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
    """At most `limit` requests at work in the app at once; the rest wait their turn.

    Without it a burst of requests deadlocks the process: each request keeps its database
    session, and so a pooled connection, between its dependencies and its endpoint, which run
    on worker threads; once every connection is held by requests waiting for a thread, and
    every thread by a request waiting for a connection, nothing moves. Bounded below both,
    every request admitted gets its connection and its thread. Long-lived streams matching
    `exempt` are not counted: they hold neither between their polls.
    """

    def __init__(self, app: ASGIApp, limit: int, exempt: re.Pattern[str]) -> None:
        self.app = app
        self.exempt = exempt
        self._slots = asyncio.Semaphore(limit)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.exempt.match(scope["path"]):
            await self.app(scope, receive, send)
            return
        async with self._slots:
            await self.app(scope, receive, send)


def active_runs(db: Session, user: User) -> int:
    query = (
        select(func.count())
        .select_from(Run)
        .join(Experiment, Experiment.id == Run.experiment_id)
        .where(Experiment.owner_id == user.id, Run.status.in_(ACTIVE))
    )
    return db.scalar(query) or 0


def check_active_runs(
    db: Session,
    user: User,
    new_runs: int,
    limit: int,
    what: str = "this experiment",
    whose: str = "your",
) -> None:
    """429 when the new runs would take the user over their queued-plus-running limit.

    The user's row is locked (PostgreSQL) until the submission commits, so two concurrent
    submissions cannot both slip under the limit.
    """
    db.execute(select(User.id).where(User.id == user.id).with_for_update())
    active = active_runs(db, user)
    if active + new_runs > limit:
        raise HTTPException(
            status.HTTP_429_TOO_MANY_REQUESTS,
            f"{what} adds {new_runs} runs to {whose} {active} queued or running ones, "
            f"over the limit of {limit} per user; wait for runs to finish or cancel some",
        )
