"""Who may see and change what: one rule for experiments, runs, dashboards and share links.

An object belongs to its owner and optionally a team. Its owner and every member of its team
may see it; its owner and the team's owners and members (not viewers) may change it.

A reader is one user or several at once (`Viewer`); several see only what every one of them
may see. A share link reads its dashboard with three pairs of eyes, evaluated at every read:
the link's creator, the dashboard's owner, and whoever last set the dashboard's config. So a
link never shows a run that one of them could not see today: a team member who points a
team dashboard at the owner's private runs (or at "every run") cannot publish them, whoever
made the link. Only the dashboard's owner or an owner of its team may make links, and a link
stops working when its creator loses that right.
"""

from __future__ import annotations

from typing import Any

from fastapi.exceptions import RequestValidationError
from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session

from backend.api.security import team_ids
from backend.db.models import Dashboard, Experiment, ShareLink, TeamMembership, User

EDITOR_ROLES = ("owner", "member")

Viewer = User | tuple[User, ...]
"""Who reads: one user, or several who together see only what each of them may see."""


def field_error(field: str, message: str) -> RequestValidationError:
    """A 422 naming one field of the request body."""
    return RequestValidationError([{"loc": ("body", field), "msg": message, "type": "value_error"}])


def owned_or_shared(user: User, owner_column: Any, team_column: Any) -> Any:
    """SQL clause: rows the user owns or that belong to one of the user's teams."""
    teams = select(TeamMembership.team_id).where(TeamMembership.user_id == user.id)
    return or_(owner_column == user.id, team_column.in_(teams))


def visible_to(viewer: Viewer, db: Session | None = None) -> Any:
    """SQL clause on `Experiment` (and so on its runs): what every user of `viewer` may see."""
    users = viewer if isinstance(viewer, tuple) else (viewer,)
    if not users:
        return and_(False)
    return and_(*(owned_or_shared(u, Experiment.owner_id, Experiment.team_id) for u in users))


def can_edit(db: Session, user: User, owner_id: int | None, team_id: int | None) -> bool:
    return owner_id == user.id or (
        team_id is not None and team_id in team_ids(db, user, roles=EDITOR_ROLES)
    )


def require_team_editor(db: Session, user: User, team_id: int | None) -> None:
    """Only a team's owners and members may give it new objects."""
    if team_id is not None and team_id not in team_ids(db, user, roles=EDITOR_ROLES):
        raise field_error("team_id", f"you are not an owner or member of team {team_id}")


def can_delete(user: User, owner_id: int | None) -> bool:
    """Deleting results is for their owner alone, not for the team that shares them."""
    return owner_id == user.id


def can_share(db: Session, user: User, dashboard: Dashboard) -> bool:
    """Only a dashboard's owner or an owner of its team may open it to the world."""
    return dashboard.owner_id == user.id or (
        dashboard.team_id is not None and dashboard.team_id in team_ids(db, user, roles=("owner",))
    )


def share_link_viewer(db: Session, dashboard: Dashboard, link: ShareLink) -> Viewer | None:
    """The eyes a share link reads with, or None when the link no longer holds (its creator
    or the dashboard's owner is gone or deactivated, or its creator may no longer share)."""
    owner = db.get(User, dashboard.owner_id) if dashboard.owner_id is not None else None
    creator = db.get(User, link.created_by) if link.created_by is not None else None
    if owner is None or creator is None or not (owner.is_active and creator.is_active):
        return None
    if not can_share(db, creator, dashboard):
        return None
    # Dashboards saved before their config's author was recorded count as set by the owner.
    setter_id = dashboard.config_set_by or dashboard.owner_id
    setter = db.get(User, setter_id)
    if setter is None:
        return None
    return tuple({user.id: user for user in (creator, owner, setter)}.values())
