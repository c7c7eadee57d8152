"""The `orrery` command line (being split into modules; for now all of it is in launcher)."""

from backend.cli.launcher import app, console, print_runs, worker_command

__all__ = ["app", "console", "print_runs", "worker_command"]
