"""Stored times are UTC; SQLite hands them back without their zone."""

from __future__ import annotations

from datetime import UTC, datetime


def as_utc(moment: datetime) -> datetime:
    """`moment` with its zone, UTC when the database dropped it."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
