"""Engines and sessions. One engine per database URL, shared by the whole process."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker


def _enable_sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # WAL lets the API read while a worker writes; foreign keys are off by default in SQLite.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


@lru_cache(maxsize=8)
def engine_for(url: str) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
        event.listen(engine, "connect", _enable_sqlite_pragmas)
    else:
        # pre-ping: a restarted PostgreSQL leaves dead pooled connections; test them before
        # use. 20 + 20: enough that the API's admitted requests (settings.MAX_API_CONCURRENCY,
        # two connections at most each) never wait for one, and 20 kept open, as an overflow
        # connection is opened and closed around each use.
        engine = create_engine(url, pool_pre_ping=True, pool_size=20, max_overflow=20)
    _engines.append(engine)
    return engine


def _forget_inherited_connections() -> None:
    """In a forked child (a Celery pool process), drop the pooled connections inherited from
    the parent without closing them: they are the parent's, and two processes talking on one
    PostgreSQL connection corrupt its protocol ("lost synchronization with server", seen when a
    pool process forked after the worker's heartbeat had opened connections on the same URL)."""
    for engine in _engines:
        engine.dispose(close=False)


_engines: list[Engine] = []  # every engine engine_for made
os.register_at_fork(after_in_child=_forget_inherited_connections)


@lru_cache(maxsize=8)
def session_factory(url: str) -> sessionmaker[Session]:
    return sessionmaker(engine_for(url), expire_on_commit=False)


@contextmanager
def session_scope(url: str) -> Iterator[Session]:
    """A session that commits on success and rolls back on error."""
    session = session_factory(url)()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()
