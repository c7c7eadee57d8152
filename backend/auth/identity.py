"""Who a credential names, and until when that verdict holds while the database is unchanged."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from backend.db.models import User


@dataclass(frozen=True)
class Identity:
    user: User
    # The verdict also depends on the clock: a session expires, and a token's use is due to be
    # recorded again. None: it holds until the database changes.
    valid_until: datetime | None = None
