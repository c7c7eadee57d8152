"""Who is asking: an API token, a browser session (with CSRF on unsafe requests), or, in
single-user mode, the local user. Everything else gets 401."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from backend.api.deps import DbSession
from backend.auth.csrf import SAFE_METHODS, csrf_matches, submitted_csrf_token
from backend.auth.identity import Identity
from backend.auth.secrets import digest
from backend.auth.sessions import SESSION_COOKIE, user_for_session
from backend.auth.tokens import user_for_token
from backend.db.models import TeamMembership, User

LOCAL_USER_EMAIL = "local@orrery.invalid"


def hash_token(token: str) -> str:
    """The stored digest of a bearer secret (API token, share link)."""
    return digest(token)


def local_user(db: Session) -> User:
    """The one user of single-user mode, created on first use."""
    query = select(User).where(User.email == LOCAL_USER_EMAIL)
    user = db.scalar(query)
    if user is None:
        db.add(User(email=LOCAL_USER_EMAIL, display_name="local user", is_admin=True))
        try:
            db.commit()
        except IntegrityError:  # a concurrent first request created it
            db.rollback()
        user = db.scalars(query).one()
    return user


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" else None


def current_user(
    request: Request,
    db: DbSession,
    csrf: Annotated[str | None, Depends(submitted_csrf_token)],
) -> User:
    """The caller. The whole verdict (auth/identity.py: who, and until when it holds) is kept
    as `request.state.identity` for whatever else handles the request."""
    identity = _identity(request, db, csrf)
    request.state.identity = identity
    return identity.user


def caller_now(request: Request, db: Session) -> User | None:
    """Who the request's credentials name now, or None once they stopped working (session
    ended, token revoked, account deactivated): long answers re-check their caller with it."""
    try:
        return _identity(request, db, None).user
    except HTTPException:
        return None


def _identity(request: Request, db: Session, csrf: str | None) -> Identity:
    settings = request.app.state.settings
    token = bearer_token(request)
    if token is not None:
        identity = user_for_token(db, token)
        if identity is None:
            raise HTTPException(
                status.HTTP_401_UNAUTHORIZED,
                "invalid or revoked API token",
                headers={"WWW-Authenticate": "Bearer"},
            )
        return identity
    session_secret = request.cookies.get(SESSION_COOKIE)
    if session_secret:
        identity = user_for_session(db, session_secret)
        if identity is not None:
            if request.method not in SAFE_METHODS and not csrf_matches(
                settings.effective_secret_key(), session_secret, csrf
            ):
                raise HTTPException(
                    status.HTTP_403_FORBIDDEN,
                    "CSRF token missing or wrong: send the session's csrf_token "
                    "(from /api/v1/auth/me) in the X-CSRF-Token header or a csrf_token form field",
                )
            return identity
    if settings.single_user_mode:
        return Identity(local_user(db))
    raise HTTPException(
        status.HTTP_401_UNAUTHORIZED,
        "authentication required: log in, or send 'Authorization: Bearer <API token>'",
        headers={"WWW-Authenticate": "Bearer"},
    )


def team_ids(db: Session, user: User, roles: tuple[str, ...] | None = None) -> list[int]:
    query = select(TeamMembership.team_id).where(TeamMembership.user_id == user.id)
    if roles is not None:
        query = query.where(TeamMembership.role.in_(roles))
    return list(db.scalars(query))


CurrentUser = Annotated[User, Depends(current_user)]
