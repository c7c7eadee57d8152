"""The commands that administer accounts directly in this server's database: `orrery user
create` and `orrery token create`.

Model: they open the database the settings name (no HTTP, no login), so the first admin can
be made before anyone can log in. Open choice: `user create` migrates first (it may be the
first thing run on a new server); `token create` expects the account to exist already.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from backend.cli.output import console, fail
from backend.db import migrate as migrations
from backend.settings import get_settings


def user_create(
    email: Annotated[str, typer.Option(help="the account's email, used to log in")],
    name: Annotated[str | None, typer.Option(help="display name")] = None,
    admin: Annotated[bool, typer.Option(help="may create accounts")] = False,
    password_stdin: Annotated[
        bool, typer.Option(help="read the password from standard input, not a prompt")
    ] = False,
) -> None:
    """Create an account on this server's database (e.g. the first admin)."""
    from backend.auth.users import AccountError, create_user
    from backend.db.session import session_scope

    if password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = typer.prompt("password", hide_input=True, confirmation_prompt=True)
    settings = get_settings()
    migrations.upgrade(settings.effective_database_url)
    with session_scope(settings.effective_database_url) as db:
        try:
            user = create_user(db, email, password, name, is_admin=admin)
        except AccountError as exc:
            fail(f"--{exc.field}: {exc.message}" if exc.field == "email" else str(exc))
        console.print(f"created {'admin ' if admin else ''}user {user.id} <{user.email}>")
    if settings.single_user_mode:
        console.print(
            "[yellow]note:[/] this server runs single-user (no login); set "
            "ORRERY_SINGLE_USER=false to require accounts"
        )


def token_create(
    email: Annotated[str, typer.Option(help="whose token")],
    name: Annotated[str, typer.Option(help="what the token is for")] = "cli",
) -> None:
    """Make a personal API token for a user and print it once (only its hash is stored)."""
    from backend.auth.tokens import create_token
    from backend.auth.users import user_by_email
    from backend.db.session import session_scope

    settings = get_settings()
    with session_scope(settings.effective_database_url) as db:
        user = user_by_email(db, email)
        if user is None or not user.is_active:
            fail(f"--email: no active account has the email '{email}'")
        _, secret = create_token(db, user, name)
    console.print("[bold]API token[/] (shown once; keep it secret, e.g. in ORRERY_TOKEN):")
    print(secret)
