"""Where the `orrery` commands print: one rich console, and the error exit every command uses.

Model: messages and tables go through `console`; a command that cannot go on calls `fail`,
which prints "error: ..." and exits with a code (never a traceback). Open choice: the width
when standard output is not a terminal (COLUMNS if set, else wide enough that no cell is cut).
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

import typer
from rich.console import Console


def _output_width() -> int | None:
    """A terminal's own width; when piped, COLUMNS if set, else wide enough that tables are
    never cut (rich would otherwise assume 80 columns and truncate cells)."""
    if sys.stdout.isatty():
        return None
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else 1000


console = Console(width=_output_width())


def fail(message: str, code: int = 1) -> NoReturn:
    """Print the reason a command stops and exit with `code`."""
    console.print(f"[red]error:[/] {message}")
    raise typer.Exit(code)
