"""Indexes the run list walks for its headline sorts, descending.

The list sorts a figure with unfinished runs (no value yet) at the end in both directions
(`NULLS LAST`, api/run_query.py), then by id. Ascending, a plain index on the figure is in that
order already (the models declare those); descending, PostgreSQL's default puts NULLs first, so
a plain index read backwards is in the wrong order and the database sorts every visible run
instead of reading the page's rows off an index: on 10,000 runs the top-N sort of a whole scan
cost 9-13 ms per page against 1-3 ms walking one of these.

SQLite cannot declare `NULLS LAST` in an index, so these exist on PostgreSQL only: migration
0021 creates them and the models-against-migrations check leaves them out (migrations/env.py).
"""

from __future__ import annotations

from collections.abc import Callable

# The figures a run table is sorted by most: what it shows first and what the compare summary
# ranks by.
SORTED_FIGURES = ("speedup", "energy_pj", "accuracy", "total_cycles")

DESCENDING = {f"ix_runs_{figure}_desc": figure for figure in SORTED_FIGURES}


def create(execute: Callable[[str], object]) -> None:
    for name, figure in DESCENDING.items():
        execute(f"CREATE INDEX IF NOT EXISTS {name} ON runs ({figure} DESC NULLS LAST)")


def drop(execute: Callable[[str], object]) -> None:
    for name in DESCENDING:
        execute(f"DROP INDEX IF EXISTS {name}")
