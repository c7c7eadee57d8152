"""Creating accounts (the CLI's `orrery user create`, the admin API)."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from backend.auth.passwords import MIN_PASSWORD_LENGTH, hash_password
from backend.db.models import User


class AccountError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def normalise_email(email: str) -> str:
    return email.strip().lower()


def user_by_email(db: Session, email: str) -> User | None:
    return db.scalar(select(User).where(func.lower(User.email) == normalise_email(email)))


def create_user(
    db: Session, email: str, password: str, display_name: str | None = None, is_admin: bool = False
) -> User:
    email = normalise_email(email)
    if "@" not in email or len(email) > 254:
        raise AccountError("email", "must be an email address of at most 254 characters")
    if len(password) < MIN_PASSWORD_LENGTH:
        raise AccountError("password", f"must have at least {MIN_PASSWORD_LENGTH} characters")
    if user_by_email(db, email) is not None:
        raise AccountError("email", "an account with this email exists")
    user = User(
        email=email,
        display_name=display_name or email.split("@")[0],
        password_hash=hash_password(password),
        is_admin=is_admin,
        is_active=True,
    )
    db.add(user)
    db.commit()
    return user
