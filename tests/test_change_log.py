"""The change log (backend/db/change_log.py) on real PostgreSQL: every table is watched; a write
counts once committed, never before, and never when rolled back, under the table it wrote or
the topic its transaction named; writers never wait for each other; folding keeps every
count."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text, update
from sqlalchemy.orm import Session

from backend.db import change_log, migrate
from backend.db.change_log import LIVENESS, PROGRESS, Marker, note_changes_as, read_marker
from backend.db.models import Base, Team, User
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


def test_every_table_but_the_log_is_watched(url: str) -> None:
    engine = create_engine(url)
    with engine.connect() as connection:
        watched = set(
            connection.scalars(
                text(
                    "SELECT c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
                    "WHERE t.tgname = 'note_change' AND NOT t.tgisinternal"
                )
            )
        )
    engine.dispose()
    assert watched == set(Base.metadata.tables) - {"change_log"}


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


def test_topics_are_counted_apart(url: str) -> None:
    with session_scope(url) as db:
        add_user(db, "a@example.org")
    start = marker(url)
    with session_scope(url) as db:
        note_changes_as(db, PROGRESS)
        db.execute(update(User).values(display_name="progress"))
    with session_scope(url) as db:
        note_changes_as(db, LIVENESS)
        db.execute(update(User).values(display_name="beat"))
    with session_scope(url) as db:
        db.add(Team(name="t"))
    after = marker(url)
    assert after.of(["users"]) == start.of(["users"])
    assert after.of(["teams"]) == (start.of(["teams"])[0] + 1,)
    assert after.of([PROGRESS, LIVENESS]) == tuple(n + 1 for n in start.of([PROGRESS, LIVENESS]))
    with session_scope(url) as db:  # the topic lasts one transaction
        db.execute(update(User).values(display_name="data"))
    users, progress = marker(url).of(["users", PROGRESS])
    assert (users, progress) == (start.of(["users"])[0] + 1, after.of([PROGRESS])[0])


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
            note_changes_as(db, PROGRESS)
            db.execute(update(User).values(display_name=f"p{i}"))
    open_writer = session_factory(url)()
    try:
        add_user(open_writer, "late@example.org")  # in progress during the fold
        before = marker(url)
        with session_scope(url) as db:
            db.execute(change_log.COMPACT)
        folded = marker(url)
        assert folded.counts == before.counts
        assert folded.rows == 2
        open_writer.commit()
    finally:
        open_writer.close()
    assert marker(url).of(["users"]) == (before.of(["users"])[0] + 1,)
