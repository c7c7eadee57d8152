"""Who may see and change what: one rule for experiments, runs and dashboards.

An object belongs to its owner and optionally a team. Its owner and every member of its team
may see it; its owner and the team's owners and members (not viewers) may change it.
"""

from __future__ import annotations

from typing import Any

from fastapi.exceptions import RequestValidationError
from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from backend.api.security import team_ids
from backend.db.models import TeamMembership, User

EDITOR_ROLES = ("owner", "member")


def field_error(field: str, message: str) -> RequestValidationError:
    """A 422 naming one field of the request body."""
    return RequestValidationError([{"loc": ("body", field), "msg": message, "type": "value_error"}])


def owned_or_shared(user: User, owner_column: Any, team_column: Any) -> Any:
    """SQL clause: rows the user owns or that belong to one of the user's teams."""
    teams = select(TeamMembership.team_id).where(TeamMembership.user_id == user.id)
    return or_(owner_column == user.id, team_column.in_(teams))


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
