"""Accounts: log in and out (browser session), who am I, personal API tokens, new users."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Literal

from fastapi import APIRouter, HTTPException, Request, Response, status
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import select

from backend.api.access import Administrator, MyToken
from backend.api.client_address import client_address
from backend.api.deps import DbSession, SettingsDep
from backend.api.security import CurrentUser
from backend.auth import rate_limit
from backend.auth.csrf import csrf_token
from backend.auth.passwords import MIN_PASSWORD_LENGTH, hash_password, needs_rehash, verify_password
from backend.auth.sessions import (
    SESSION_COOKIE,
    clear_session_cookie,
    end_session,
    set_session_cookie,
    start_session,
)
from backend.auth.tokens import create_token, revoke_token
from backend.auth.users import create_user, user_by_email
from backend.db.models import ApiToken, Team, TeamMembership, User
from backend.settings import Settings

router = APIRouter(tags=["accounts"])


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LoginIn(_In):
    email: str = Field(min_length=3, max_length=254)
    password: str = Field(min_length=1, max_length=1024)


class TeamRole(BaseModel):
    id: int
    name: str
    role: str


class UserOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    email: str
    display_name: str
    is_admin: bool


class Me(UserOut):
    mode: Literal["single-user", "accounts"] = Field(
        description="single-user: no login, every request acts as the local user"
    )
    teams: list[TeamRole]
    csrf_token: str | None = Field(
        None, description="send as X-CSRF-Token with unsafe requests made with the session cookie"
    )


class TokenIn(_In):
    name: str = Field(min_length=1, max_length=120, description="what the token is for")


class TokenOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    name: str
    prefix: str = Field(description="the token's first characters, to recognise it")
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


class NewToken(TokenOut):
    token: str = Field(description="the token itself: shown this once, store it now")


class UserIn(_In):
    email: str = Field(min_length=3, max_length=254)
    password: str = Field(min_length=MIN_PASSWORD_LENGTH, max_length=1024)
    display_name: str | None = Field(None, min_length=1, max_length=120)
    is_admin: bool = False


def _me(db: DbSession, user: User, settings: Settings, session_secret: str | None) -> Me:
    rows = db.execute(
        select(Team.id, Team.name, TeamMembership.role)
        .join(TeamMembership, TeamMembership.team_id == Team.id)
        .where(TeamMembership.user_id == user.id)
        .order_by(Team.name)
    )
    return Me(
        id=user.id,
        email=user.email,
        display_name=user.display_name,
        is_admin=user.is_admin,
        mode="single-user" if settings.single_user_mode else "accounts",
        teams=[TeamRole(id=r.id, name=r.name, role=r.role) for r in rows],
        csrf_token=csrf_token(settings.effective_secret_key(), session_secret)
        if session_secret
        else None,
    )


@router.post("/auth/login", response_model=Me, responses={401: {}, 429: {}})
def login(
    body: LoginIn, request: Request, response: Response, db: DbSession, settings: SettingsDep
) -> Me:
    """Start a browser session: sets an HttpOnly session cookie and returns the CSRF token.

    Failed attempts are limited per (email, client address; `X-Forwarded-For` counts only from
    the `trusted_proxies`): after `login_max_failures`,
    each further attempt from that address waits a growing delay (429 with Retry-After)."""
    policy = rate_limit.LoginPolicy(
        settings.login_max_failures, settings.login_delay_seconds, settings.login_window_seconds
    )
    key = rate_limit.throttle_key(body.email, client_address(request))
    wait = rate_limit.reserve_attempt(db, key, policy)
    if wait:
        seconds = math.ceil(wait)
        raise HTTPException(
            status.HTTP_429_TOO_MANY_REQUESTS,
            f"too many failed logins from this address; try again in {seconds} seconds",
            headers={"Retry-After": str(seconds)},
        )
    user = user_by_email(db, body.email)
    valid = verify_password(user.password_hash if user else None, body.password)
    if user is None or not valid or not user.is_active:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "wrong email or password")
    rate_limit.clear(db, key, policy)
    if user.password_hash and needs_rehash(user.password_hash):
        user.password_hash = hash_password(body.password)
        db.commit()
    secret = start_session(db, user, settings.session_days)
    set_session_cookie(response, secret, settings)
    return _me(db, user, settings, secret)


@router.post("/auth/logout", status_code=status.HTTP_204_NO_CONTENT)
def logout(request: Request, db: DbSession, settings: SettingsDep, user: CurrentUser) -> Response:
    """End the browser session (the cookie stops working at once)."""
    response = Response(status_code=status.HTTP_204_NO_CONTENT)
    secret = request.cookies.get(SESSION_COOKIE)
    if secret:
        end_session(db, secret)
        clear_session_cookie(response, settings)
    return response


@router.get("/auth/me", response_model=Me)
def me(request: Request, db: DbSession, settings: SettingsDep, user: CurrentUser) -> Me:
    """Who you are, your teams and roles, and whether the server runs single-user."""
    return _me(db, user, settings, request.cookies.get(SESSION_COOKIE))


@router.get("/tokens", response_model=list[TokenOut])
def list_tokens(db: DbSession, user: CurrentUser) -> list[TokenOut]:
    """Your API tokens (never the tokens themselves)."""
    rows = db.scalars(select(ApiToken).where(ApiToken.user_id == user.id).order_by(ApiToken.id))
    return [TokenOut.model_validate(row) for row in rows]


@router.post("/tokens", response_model=NewToken, status_code=status.HTTP_201_CREATED)
def new_token(body: TokenIn, db: DbSession, user: CurrentUser) -> NewToken:
    """A new personal API token, for `Authorization: Bearer <token>`; shown only in this answer."""
    row, secret = create_token(db, user, body.name)
    return NewToken(**TokenOut.model_validate(row).model_dump(), token=secret)


@router.delete("/tokens/{token_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete_token(token: MyToken, db: DbSession) -> Response:
    """Revoke one of your tokens; it stops working at once."""
    revoke_token(db, token)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/users", response_model=UserOut, status_code=status.HTTP_201_CREATED)
def new_user(body: UserIn, db: DbSession, _admin: Administrator) -> UserOut:
    """Create an account (administrators only)."""
    created = create_user(db, body.email, body.password, body.display_name, body.is_admin)
    return UserOut.model_validate(created)
