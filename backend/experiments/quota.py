"""The queued-plus-running quota: how many runs one user may have waiting or at work at once.

A submission or a retry that would take its owner over the limit is refused whole with
`QuotaExceeded` (the API answers it with 429); nothing of it is stored. The owner's row is
locked (PostgreSQL) until the submission commits, so two concurrent submissions cannot both
slip under the limit. Open choice: the quota counts runs, not trainings, so a sweep sharing one
training across many techniques counts once per run.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from backend.db.models import Experiment, Run, User

ACTIVE = ("queued", "running")


class QuotaExceeded(Exception):
    """The new runs would take their owner over the limit; the message says by how much."""


def active_runs(db: Session, user: User) -> int:
    query = (
        select(func.count())
        .select_from(Run)
        .join(Experiment, Experiment.id == Run.experiment_id)
        .where(Experiment.owner_id == user.id, Run.status.in_(ACTIVE))
    )
    return db.scalar(query) or 0


def check_active_runs(
    db: Session,
    user: User,
    new_runs: int,
    limit: int,
    what: str = "this experiment",
    whose: str = "your",
) -> None:
    """Raise `QuotaExceeded` when the new runs would take the user over their limit."""
    db.execute(select(User.id).where(User.id == user.id).with_for_update())
    active = active_runs(db, user)
    if active + new_runs > limit:
        raise QuotaExceeded(
            f"{what} adds {new_runs} runs to {whose} {active} queued or running ones, "
            f"over the limit of {limit} per user; wait for runs to finish or cancel some"
        )
