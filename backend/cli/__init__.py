"""The `orrery` command line: the Typer app, assembled from the modules that hold its commands.

Model: every command is a plain function in the module of its kind and is registered here, in
the order `orrery --help` lists them:
- launcher: start Orrery's processes on this machine (migrate, worker, serve, reconcile);
- client_commands: talk to a server over HTTP (submit, wait, runs, show, summary, cancel,
  retry, compare, export), printing the tables of `tables`;
- search_commands: hardware design searches over HTTP (search, front);
- local_commands: compute here without a server (simulate);
- admin_commands: accounts in this server's database (user create, token create).
Where they print, and how they fail, is `output`. Open choice: registration is explicit here
rather than by decorators in each module, so one place shows the whole command set.
"""

from __future__ import annotations

import typer

from backend.cli import (
    admin_commands,
    client_commands,
    launcher,
    local_commands,
    search_commands,
)

app = typer.Typer(
    help="Orrery: which training-acceleration technique, on which accelerator, is worth it?",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
for command in (
    launcher.migrate,
    launcher.worker,
    launcher.serve,
    client_commands.submit,
    client_commands.wait,
    client_commands.runs,
    client_commands.show,
    client_commands.summary,
    client_commands.cancel,
    client_commands.retry,
    client_commands.compare,
    client_commands.export,
    search_commands.search,
    search_commands.front,
    local_commands.simulate,
    launcher.reconcile,
):
    app.command()(command)

user_app = typer.Typer(help="Accounts: create users (the first admin among them).")
token_app = typer.Typer(help="Personal API tokens, made on the server for a user.")
user_app.command("create")(admin_commands.user_create)
token_app.command("create")(admin_commands.token_create)
app.add_typer(user_app, name="user")
app.add_typer(token_app, name="token")

__all__ = ["app"]
