"""Personal API tokens: created (shown once), looked up by digest, revoked."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.auth.identity import Identity
from backend.auth.secrets import API_TOKEN_PREFIX, digest, new_secret
from backend.db.models import ApiToken, User
from backend.db.times import as_utc

DISPLAY_PREFIX_LENGTH = len(API_TOKEN_PREFIX) + 4
# A token's last use is recorded to the minute: a write on every request would cost a commit
# each, and make every request a write.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def create_token(db: Session, user: User, name: str) -> tuple[ApiToken, str]:
    """Store a new token for the user; return the row and the token (never stored)."""
    secret = new_secret(API_TOKEN_PREFIX)
    token = ApiToken(
        user_id=user.id,
        name=name,
        token_hash=digest(secret),
        prefix=secret[:DISPLAY_PREFIX_LENGTH],
    )
    db.add(token)
    db.commit()
    return token, secret


def user_for_token(db: Session, secret: str) -> Identity | None:
    """The token's user, valid until the token's use is next due to be recorded."""
    row = db.scalar(
        select(ApiToken).where(ApiToken.token_hash == digest(secret), ApiToken.revoked_at.is_(None))
    )
    if row is None:
        return None
    user = db.get(User, row.user_id)
    if user is None or not user.is_active:
        return None
    now = datetime.now(UTC)
    last_used = None if row.last_used_at is None else as_utc(row.last_used_at)
    if last_used is None or now - last_used >= LAST_USED_RESOLUTION:
        row.last_used_at = last_used = now
        db.commit()
    return Identity(user, valid_until=last_used + LAST_USED_RESOLUTION)


def revoke_token(db: Session, token: ApiToken) -> None:
    if token.revoked_at is None:
        token.revoked_at = datetime.now(UTC)
        db.commit()
