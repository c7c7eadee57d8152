"""The signed-in user's dashboard preferences, kept on the server (e.g. the run table's columns)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from backend.api.deps import DbSession
from backend.api.run_columns import COLUMNS
from backend.api.security import CurrentUser
from backend.db.models import User

router = APIRouter(prefix="/preferences", tags=["accounts"])

# Every column the run table can show (the run row's fields and the extra columns).
RunColumn = Literal[tuple(COLUMNS)]  # type: ignore[valid-type]


class Preferences(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_table_columns: Annotated[
        list[RunColumn] | None,
        Field(
            max_length=len(COLUMNS),
            description="the run table's columns, in order (None: the table's default set)",
        ),
    ] = None


@router.get("", response_model=Preferences)
def read_preferences(user: CurrentUser) -> Preferences:
    return Preferences.model_validate(_known(user.preferences))


@router.put("", response_model=Preferences)
def write_preferences(preferences: Preferences, db: DbSession, user: CurrentUser) -> Preferences:
    """Replace the stored preferences with these."""
    stored = db.get(User, user.id)
    assert stored is not None
    stored.preferences = preferences.model_dump(mode="json")
    db.commit()
    return preferences


def _known(stored: dict[str, Any]) -> dict[str, Any]:
    """The stored preferences as the current model reads them: a column that no longer exists
    is dropped rather than refused, so an old choice never locks a user out of the page."""
    columns = stored.get("run_table_columns")
    if isinstance(columns, list):
        columns = [c for c in columns if c in COLUMNS] or None
    return {"run_table_columns": columns if isinstance(columns, list) else None}
