"""`python -m backend.cli`: the same command line as the `orrery` script."""

from backend.cli import app

app()
