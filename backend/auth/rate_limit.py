"""The login rate limit: failed attempts per email and per client address in a sliding window.

Failures live in the database so that every API process shares the count.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from backend.db.models import LoginFailure

ADDRESS_FACTOR = 4  # one address may try several accounts, but not without bound


def failure_keys(email: str, address: str) -> tuple[str, str]:
    return f"email:{email.strip().lower()}"[:300], f"ip:{address}"[:300]


def is_limited(db: Session, keys: tuple[str, str], max_failures: int, window: int) -> bool:
    since = datetime.now(UTC) - timedelta(seconds=window)
    email_key, address_key = keys
    for key, limit in ((email_key, max_failures), (address_key, max_failures * ADDRESS_FACTOR)):
        count = db.scalar(
            select(func.count())
            .select_from(LoginFailure)
            .where(LoginFailure.key == key, LoginFailure.at >= since)
        )
        if (count or 0) >= limit:
            return True
    return False


def record_failure(db: Session, keys: tuple[str, str], window: int) -> None:
    now = datetime.now(UTC)
    db.execute(delete(LoginFailure).where(LoginFailure.at < now - timedelta(seconds=window)))
    db.add_all(LoginFailure(key=key, at=now) for key in keys)
    db.commit()


def clear_failures(db: Session, email_key: str) -> None:
    db.execute(delete(LoginFailure).where(LoginFailure.key == email_key))
    db.commit()
