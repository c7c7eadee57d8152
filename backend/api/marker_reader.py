"""The database's change marker (db/change_log.py), read from asyncio code (api/cached_reads.py).

Each request must see a marker read after it arrived: else a client that has just written
could be answered from before its write. That does not take a query per request. Requests that
ask while a query is out wait for the next one, and one query answers all of them, so one
connection keeps up with any load and every request waits at most two round trips, in order of
arrival. (A pool with a connection per query makes the requests queue for connections instead,
and asyncio's queue lets newcomers overtake those already waiting: a long tail of latency.)
The reader also folds the change log when it has grown (`change_log.COMPACT`), between reads.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from backend.db.change_log import COMPACT, COMPACT_ABOVE, MARKER_QUERY, Marker


class MarkerReader:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._next: asyncio.Future[Marker | None] | None = None  # the query not yet sent
        self._one_at_a_time = asyncio.Lock()

    async def current(self) -> Marker | None:
        """The marker from a query sent after this call began; None when it cannot be read
        (the app then answers, and says what is wrong)."""
        if self._next is not None:
            return await asyncio.shield(self._next)
        batch = self._next = asyncio.get_running_loop().create_future()
        marker = None
        try:
            async with self._one_at_a_time:  # the query out before this one
                self._next = None  # whoever asks from now on waits for the next query
                marker = await self._query()
        finally:
            if self._next is batch:  # cancelled before the query went out
                self._next = None
            batch.set_result(marker)
        return marker

    async def _query(self) -> Marker | None:
        marker = None
        try:
            async with self.engine.connect() as connection:
                marker = Marker.from_rows((await connection.execute(MARKER_QUERY)).all())
                if marker.rows > COMPACT_ABOVE:
                    await connection.execute(COMPACT)  # one statement: atomic in autocommit
        except (SQLAlchemyError, OSError):
            return marker  # None if unread; a fold that failed is tried at the next read
        return marker


@asynccontextmanager
async def marker_reader(app: FastAPI) -> AsyncIterator[None]:
    """While the app runs: `app.state.marker_reader`, on PostgreSQL with the read cache on
    (None otherwise)."""
    settings = app.state.settings
    url = make_url(settings.effective_database_url)
    engine = None
    if url.get_backend_name() == "postgresql" and settings.read_cache_entries > 0:
        # psycopg 3 drives asyncio too. Autocommit: one round trip per query, no BEGIN or
        # ROLLBACK around it. One query at a time: one connection.
        engine = create_async_engine(
            url.set(drivername="postgresql+psycopg"),
            isolation_level="AUTOCOMMIT",
            pool_size=1,
            max_overflow=0,
        )
    app.state.marker_reader = None if engine is None else MarkerReader(engine)
    try:
        yield
    finally:
        app.state.marker_reader = None
        if engine is not None:
            await engine.dispose()
