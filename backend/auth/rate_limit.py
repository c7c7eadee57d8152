"""The login limit: attempts per (account, client address) pair, with growing delays.

Each pair may fail `free_attempts` times; after that, each further attempt waits a delay that
doubles from `base_delay` up to `window`, and a pair quiet for `window` starts afresh. A
success clears the pair. Because the count is per pair, nobody can lock an account out for
others: a right password from another address is not refused, and people behind one shared
address are not refused for each other's accounts.

An attempt is reserved *before* its password is checked, in one transaction that holds the
pair's row: 40 concurrent guesses take 40 distinct places in line, so at most `free_attempts`
of them are ever checked (on PostgreSQL the row lock serialises them; on SQLite, the first
write of the transaction takes the database's write lock). The counts live in the database,
shared by every API process.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import delete, select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from backend.auth.secrets import digest
from backend.auth.users import normalise_email
from backend.db.models import LoginThrottle


@dataclass(frozen=True)
class LoginPolicy:
    free_attempts: int
    base_delay: float  # seconds to wait after the first failure beyond the free ones
    window: float  # the longest delay, and how long a pair must be quiet to start afresh


def throttle_key(email: str, address: str) -> str:
    return digest(f"{normalise_email(email)}\n{address}")


def delay_after(failures: int, policy: LoginPolicy) -> float:
    """Seconds an attempt must wait after `failures` failed ones (0 while some are free)."""
    beyond = failures - policy.free_attempts
    if beyond < 0:
        return 0.0
    return min(policy.base_delay * 2.0**beyond, policy.window)


def _aware(moment: datetime | None) -> datetime | None:
    # SQLite hands back naive datetimes; every time stored here is UTC.
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


def reserve_attempt(db: Session, key: str, policy: LoginPolicy) -> float:
    """Count one attempt of the pair as failed until it succeeds, and commit. Returns 0 when
    the attempt may go ahead, else the seconds to wait (and counts nothing)."""
    db.commit()  # start a fresh transaction: on SQLite its first statement must be a write
    now = datetime.now(UTC)
    insert = sqlite_insert if db.get_bind().dialect.name == "sqlite" else postgresql_insert
    db.execute(
        insert(LoginThrottle)
        .values(key=key, failures=0, last_attempt_at=now, blocked_until=None)
        .on_conflict_do_nothing()
    )
    row = db.scalars(
        select(LoginThrottle)
        .where(LoginThrottle.key == key)
        .with_for_update()
        .execution_options(populate_existing=True)
    ).one()
    if _aware(row.last_attempt_at) < now - timedelta(seconds=policy.window):  # type: ignore[operator]
        row.failures, row.blocked_until = 0, None
    blocked_until = _aware(row.blocked_until)
    if blocked_until is not None and blocked_until > now:
        db.commit()
        return (blocked_until - now).total_seconds()
    row.failures += 1
    row.last_attempt_at = now
    wait = delay_after(row.failures, policy)
    row.blocked_until = now + timedelta(seconds=wait) if wait else None
    db.commit()
    return 0.0


def clear(db: Session, key: str, policy: LoginPolicy) -> None:
    """A successful login: forget the pair, and every pair quiet for longer than the window."""
    stale = datetime.now(UTC) - timedelta(seconds=policy.window)
    db.execute(delete(LoginThrottle).where(LoginThrottle.key == key))
    db.execute(delete(LoginThrottle).where(LoginThrottle.last_attempt_at < stale))
    db.commit()
