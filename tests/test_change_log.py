"""The change log (backend/db/change_log.py) on real PostgreSQL: every table is watched, and the
tables with volatile columns by column as `VOLATILE` says; a write counts once committed, never
before, and never when rolled back, under the table it wrote or, where it changed only volatile
columns, under their topics; writers never wait for each other; folding keeps every count."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, insert, text, update
from sqlalchemy.orm import Session

from backend.db import change_log, migrate
from backend.db.change_log import LIVENESS, PROGRESS, VOLATILE, Marker, read_marker
from backend.db.models import Base, Team, User, WorkerHeartbeat
from backend.db.session import session_factory, session_scope


@pytest.fixture
def url(postgres_url: str) -> str:
    migrate.upgrade(postgres_url)
    return postgres_url


def marker(url: str) -> Marker:
    with session_scope(url) as db:
        return read_marker(db)


def add_user(db: Session, email: str) -> None:
    db.add(User(email=email, display_name=email))
    db.flush()


def triggers(url: str) -> dict[tuple[str, str], bytes]:
    """(table, trigger name): the trigger's arguments, as PostgreSQL keeps them."""
    engine = create_engine(url)
    with engine.connect() as connection:
        rows = connection.execute(
            text(
                "SELECT c.relname, t.tgname, t.tgargs FROM pg_trigger t "
                "JOIN pg_class c ON c.oid = t.tgrelid WHERE NOT t.tgisinternal"
            )
        ).all()
    engine.dispose()
    return {(table, name): bytes(arguments) for table, name, arguments in rows}


def test_every_table_but_the_log_is_watched(url: str) -> None:
    found = triggers(url)
    assert {table for table, name in found if name == "note_change"} == set(
        Base.metadata.tables
    ) - {"change_log"}
    assert {table for table, name in found if name == "note_update"} == set(VOLATILE)
    for table, columns in VOLATILE.items():  # the triggers say what VOLATILE says
        expected = b"".join(f"{n}\0".encode() for pair in columns.items() for n in pair)
        assert found[(table, "note_update")] == expected, table


def test_a_write_counts_once_committed_and_a_rollback_never(url: str) -> None:
    start = marker(url).of(["users"])
    db = session_factory(url)()
    try:
        add_user(db, "a@example.org")
        db.execute(update(User).values(display_name="renamed"))  # same transaction: one count
        assert marker(url).of(["users"]) == start, "not yet committed"
        db.commit()
    finally:
        db.close()
    assert marker(url).of(["users"]) == (start[0] + 1,)

    db = session_factory(url)()
    try:
        add_user(db, "b@example.org")
        db.rollback()
    finally:
        db.close()
    assert marker(url).of(["users"]) == (start[0] + 1,)


def test_volatile_columns_are_counted_under_their_topics(url: str) -> None:
    """Updates of a heartbeat or of progress alone count under LIVENESS or PROGRESS; an update
    that also changes another column counts under the table as well; one that changes nothing
    does not count; inserts count under the table."""

    def new_worker(name: str) -> object:
        now = text("now()")
        return insert(WorkerHeartbeat).values(
            name=name, hostname="h", pid=1, started_at=now, beat_at=now
        )

    with session_scope(url) as db:
        db.execute(new_worker("w"))  # type: ignore[call-overload]
    topics = ["worker_heartbeats", LIVENESS]

    def after(statement: object) -> tuple[int, ...]:
        start = marker(url).of(topics)
        with session_scope(url) as db:
            db.execute(statement)  # type: ignore[call-overload]
        return tuple(b - a for a, b in zip(start, marker(url).of(topics), strict=True))

    beat = update(WorkerHeartbeat).where(WorkerHeartbeat.name == "w")
    assert after(beat.values(beat_at=text("now() + interval '1 second'"))) == (0, 1)
    assert after(beat.values(beat_at=text("now() + interval '2 second'"), pid=2)) == (1, 1)
    assert after(beat.values(pid=2)) == (0, 0), "nothing changed"
    assert after(beat.values(pid=3)) == (1, 0)
    assert after(new_worker("v")) == (1, 0)


def test_topics_are_counted_apart(url: str) -> None:
    with session_scope(url) as db:
        add_user(db, "a@example.org")
    start = marker(url)
    with session_scope(url) as db:
        db.add(Team(name="t"))
    after = marker(url)
    assert after.of(["users", PROGRESS]) == start.of(["users", PROGRESS])
    assert after.of(["teams"]) == (start.of(["teams"])[0] + 1,)


def test_writers_of_one_table_never_wait_for_each_other(url: str) -> None:
    first = session_factory(url)()
    second = session_factory(url)()
    try:
        add_user(first, "first@example.org")  # its log row is written, not committed
        second.execute(text("SET LOCAL lock_timeout = '2s'"))
        add_user(second, "second@example.org")  # would time out if it waited for `first`
        second.commit()
        first.commit()
    finally:
        first.close()
        second.close()


def test_folding_keeps_every_count_and_leaves_one_row_per_topic(url: str) -> None:
    for i in range(5):
        with session_scope(url) as db:
            add_user(db, f"u{i}@example.org")
        with session_scope(url) as db:
            db.execute(update(User).values(display_name=f"p{i}"))
    open_writer = session_factory(url)()
    try:
        add_user(open_writer, "late@example.org")  # in progress during the fold
        before = marker(url)
        with session_scope(url) as db:
            db.execute(change_log.COMPACT)
        folded = marker(url)
        assert folded.counts == before.counts
        assert folded.rows == len(folded.counts)
        open_writer.commit()
    finally:
        open_writer.close()
    assert marker(url).of(["users"]) == (before.of(["users"])[0] + 1,)
