"""Who is asking: the request's user, from an API token or (single-user mode) the local user."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.api.deps import DbSession
from backend.db.models import ApiToken, TeamMembership, User

LOCAL_USER_EMAIL = "local@orrery.invalid"


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def local_user(db: Session) -> User:
    """The one user of single-user mode, created on first use."""
    user = db.scalar(select(User).where(User.email == LOCAL_USER_EMAIL))
    if user is None:
        user = User(email=LOCAL_USER_EMAIL, display_name="local user", is_admin=True)
        db.add(user)
        db.commit()
    return user


def user_from_token(db: Session, token: str) -> User | None:
    row = db.scalar(
        select(ApiToken).where(
            ApiToken.token_hash == hash_token(token), ApiToken.revoked_at.is_(None)
        )
    )
    if row is None:
        return None
    user = db.get(User, row.user_id)
    if user is None or not user.is_active:
        return None
    row.last_used_at = datetime.now(UTC)
    db.commit()
    return user


def current_user(request: Request, db: DbSession) -> User:
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        user = user_from_token(db, header[7:].strip())
        if user is None:
            raise HTTPException(status.HTTP_401_UNAUTHORIZED, "invalid or revoked API token")
        return user
    if request.app.state.settings.single_user_mode:
        return local_user(db)
    raise HTTPException(
        status.HTTP_401_UNAUTHORIZED,
        "authentication required: send 'Authorization: Bearer <API token>'",
        headers={"WWW-Authenticate": "Bearer"},
    )


def team_ids(db: Session, user: User, roles: tuple[str, ...] | None = None) -> list[int]:
    query = select(TeamMembership.team_id).where(TeamMembership.user_id == user.id)
    if roles is not None:
        query = query.where(TeamMembership.role.in_(roles))
    return list(db.scalars(query))


CurrentUser = Annotated[User, Depends(current_user)]
