"""Per-user quotas on what waits for the shared workers.

- Queued plus running runs (`max_active_runs_per_user`): a submission or a retry that would take
  its owner over it is refused whole with `QuotaExceeded`. It counts runs, not trainings, so a
  sweep sharing one training across many techniques counts once per run. Runs added to an
  experiment (a retry, a search's design turned into runs) count against the experiment's
  owner, whoever asks: they are the owner's runs (`check_owner_active_runs`).
- Queued trainings (`max_queued_trainings_per_user`, default 500): a submission whose trainings
  would take its owner's queued ones over it is refused whole with `QueuedTrainingsExceeded`,
  saying how many of theirs are queued and how many trainings (all users') are queued ahead.
  Fair dispatch (`backend.delivery.dispatch`) keeps one user's queue from delaying others; this
  cap keeps it from growing without bound. Retries are not counted against it (one training
  each, and already under the runs quota).

- Waiting plus running design searches (`max_active_searches_per_user`, default 4): a new
  search (on its own or in an experiment's `search` section) that would take the user who
  starts it over it is refused with `ActiveSearchesExceeded`, saying how many are theirs and
  how many searches (all users') are waiting or running, with their chunks not yet evaluated.
  It counts the searches a user started (`created_by`), whoever owns the experiment: the one
  who asks is the one who waits. Fair dispatch shares the workers between users; this cap keeps
  one user's searches from filling the table of chunks waiting their turn.

All are answered with 429 (backend/api/refusals.py) and store nothing. The owner's row is
locked (PostgreSQL) until the submission commits, so two concurrent submissions cannot both
slip under a limit.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from backend.db.models import DesignSearchRow, Experiment, Run, SearchChunk, Training, User
from backend.searches.records import SEARCH_ACTIVE

ACTIVE = ("queued", "running")


class QuotaExceeded(Exception):
    """The new runs would take their owner over the limit; the message says by how much."""


class QueuedTrainingsExceeded(QuotaExceeded):
    """The new trainings would take their owner's queued trainings over the limit."""


class ActiveSearchesExceeded(QuotaExceeded):
    """A new search would take the user's waiting plus running searches over the limit."""


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


def check_owner_active_runs(
    db: Session, owner_id: int | None, asker: User, new_runs: int, limit: int, what: str
) -> None:
    """`check_active_runs` for runs added to someone's experiment: they count against the
    experiment's owner, whoever asks (a team member retrying a run, or turning a search's design
    into runs): the runs are the owner's, listed, dispatched and counted as theirs. Runs of an
    experiment without an owner (embedded single-user mode, or an owner deleted) count against
    no one."""
    owner = db.get(User, owner_id) if owner_id is not None else None
    if owner is None:
        return
    whose = "your" if owner.id == asker.id else "its owner's"
    check_active_runs(db, owner, new_runs, limit, what=what, whose=whose)


def queued_trainings(db: Session, user: User | None = None) -> int:
    """Queued trainings (not cancelled) of this user, or of everyone."""
    query = select(func.count()).select_from(Training)
    query = query.where(Training.status == "queued", Training.cancel_requested.is_(False))
    if user is not None:
        query = query.join(Experiment, Experiment.id == Training.experiment_id).where(
            Experiment.owner_id == user.id
        )
    return db.scalar(query) or 0


def check_queued_trainings(db: Session, user: User, new_trainings: int, limit: int) -> None:
    """Raise `QueuedTrainingsExceeded` when the new trainings would take the user's queued
    trainings over their limit; the message says how many are theirs and how many are ahead."""
    db.execute(select(User.id).where(User.id == user.id).with_for_update())
    queued = queued_trainings(db, user)
    if queued + new_trainings > limit:
        ahead = queued_trainings(db)
        raise QueuedTrainingsExceeded(
            f"this experiment adds {new_trainings} trainings to your {queued} queued ones, over "
            f"the limit of {limit} queued trainings per user; {ahead} trainings (all users') are "
            "queued ahead of a new one; wait for yours to start or cancel some"
        )


def active_searches(db: Session, user: User | None = None) -> int:
    """Waiting or running searches started by this user, or by anyone."""
    query = select(func.count()).select_from(DesignSearchRow)
    query = query.where(DesignSearchRow.status.in_(SEARCH_ACTIVE))
    if user is not None:
        query = query.where(DesignSearchRow.created_by == user.id)
    return db.scalar(query) or 0


def check_active_searches(db: Session, user: User, limit: int) -> None:
    """Raise `ActiveSearchesExceeded` when one more search would take the user over their
    limit; the message says how many are theirs and how much work is ahead of a new one."""
    db.execute(select(User.id).where(User.id == user.id).with_for_update())
    active = active_searches(db, user)
    if active + 1 > limit:
        searches = active_searches(db)
        chunks = db.scalar(
            select(func.count())
            .select_from(SearchChunk)
            .join(DesignSearchRow, DesignSearchRow.id == SearchChunk.search_id)
            .where(DesignSearchRow.status == "running", SearchChunk.status != "done")
        )
        raise ActiveSearchesExceeded(
            f"you have {active} waiting or running design searches, the limit of {limit} per "
            f"user; {searches} searches (all users') are waiting or running, with {chunks or 0} "
            "chunks not yet evaluated; wait for yours to end or cancel one"
        )
