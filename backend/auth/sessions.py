"""Browser sessions: a random secret in an HttpOnly cookie, its digest in `user_sessions`.

Server-side rows (rather than a signed cookie) make logout and deactivation take effect at once.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fastapi import Response
from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.auth.identity import Identity
from backend.auth.secrets import digest, new_secret
from backend.db.models import User, UserSession
from backend.db.times import as_utc
from backend.settings import Settings

SESSION_COOKIE = "orrery_session"


def start_session(db: Session, user: User, days: int) -> str:
    secret = new_secret()
    db.add(
        UserSession(
            user_id=user.id,
            token_hash=digest(secret),
            expires_at=datetime.now(UTC) + timedelta(days=days),
        )
    )
    db.commit()
    return secret


def user_for_session(db: Session, secret: str) -> Identity | None:
    """The session's user, valid until the session expires."""
    row = db.scalar(
        select(UserSession).where(
            UserSession.token_hash == digest(secret), UserSession.revoked_at.is_(None)
        )
    )
    if row is None or as_utc(row.expires_at) <= datetime.now(UTC):
        return None
    user = db.get(User, row.user_id)
    if user is None or not user.is_active:
        return None
    return Identity(user, valid_until=as_utc(row.expires_at))


def end_session(db: Session, secret: str) -> None:
    row = db.scalar(select(UserSession).where(UserSession.token_hash == digest(secret)))
    if row is not None and row.revoked_at is None:
        row.revoked_at = datetime.now(UTC)
        db.commit()


def set_session_cookie(response: Response, secret: str, settings: Settings) -> None:
    response.set_cookie(
        SESSION_COOKIE,
        secret,
        max_age=settings.session_days * 86400,
        httponly=True,
        secure=settings.cookie_secure,
        samesite="lax",
        path="/",
    )


def clear_session_cookie(response: Response, settings: Settings) -> None:
    response.delete_cookie(
        SESSION_COOKIE, httponly=True, secure=settings.cookie_secure, samesite="lax", path="/"
    )
