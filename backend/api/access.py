"""Who may see and change what: one rule for experiments, runs, dashboards and share links.

An object belongs to its owner and optionally a team. Its owner and every member of its team
may see it; its owner and the team's owners and members (not viewers) may change it.

A reader is one user or several at once (`Viewer`); several see only what every one of them
may see. A share link reads its dashboard with three pairs of eyes, evaluated at every read:
the link's creator, the dashboard's owner, and whoever last set the dashboard's config. So a
link never shows a run that one of them could not see today: a team member who points a
team dashboard at the owner's private runs (or at "every run") cannot publish them, whoever
made the link. A dashboard is managed (moved to another team or out of one, deleted, its links
made, listed and revoked) only by its owner or an owner of its team, and a link stops working
when its creator loses that right. Team members change its name and config, nothing more: a
member who could move it would make themselves an owner of its team (a team of their own) and
so could delete it or publish it.

Deleting results is for their owner alone. A design search is seen, and changed, as its
experiment is. A team is seen by its members only, and managed by its owners; an invitation is
seen by the email it is addressed to; an API token and a saved accelerator by their user.
Accounts are made by administrators.

Routes take what they act on through the dependencies at the end (`VisibleRun`,
`EditableExperiment`, `TeamOwner`, `SharedView`, ...), which load the object from the request's
path and answer 404 when the caller may not see it (as if it did not exist) and 403 when they
see it but may not do this; no route writes the check out. Open choice: a viewer learns that an
object exists (403, not 404) when trying to change it, since they can read it anyway.
"""

from __future__ import annotations

from typing import Annotated, Any, NamedTuple, TypeVar

from fastapi import Depends, HTTPException, Path, Query, Request, status
from fastapi.exceptions import RequestValidationError
from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session, contains_eager, defer
from sqlalchemy.orm.interfaces import ORMOption

from backend.api.deps import DbSession
from backend.api.security import CurrentUser, hash_token, team_ids
from backend.auth.users import normalise_email
from backend.db.models import (
    ApiToken,
    Dashboard,
    DesignSearchRow,
    Experiment,
    Run,
    SavedAccelerator,
    ShareLink,
    TeamInvitation,
    TeamMembership,
    User,
)

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


def run_visible_to(viewer: Viewer) -> Any:
    """SQL clause on `Run` alone: its experiment is visible to `viewer`. A semi-join rather than
    a join of experiments, so that the database can read a sorted page of runs off an index."""
    return Run.experiment_id.in_(select(Experiment.id).where(visible_to(viewer)))


def can_edit(db: Session, user: User, owner_id: int | None, team_id: int | None) -> bool:
    return owner_id == user.id or (
        team_id is not None and team_id in team_ids(db, user, roles=EDITOR_ROLES)
    )


def require_team_editor(db: Session, user: User, team_id: int | None) -> None:
    """Only a team's owners and members may give it new objects."""
    if team_id is not None and team_id not in team_ids(db, user, roles=EDITOR_ROLES):
        raise field_error("team_id", f"you are not an owner or member of team {team_id}")


def can_see_workers(db: Session, user: User, run: Run) -> bool:
    """Which worker (host and pid) ran a run's attempts is operational detail: for those who
    may edit the run (retry, cancel) and administrators, not for team viewers."""
    experiment = run.experiment
    return user.is_admin or can_edit(db, user, experiment.owner_id, experiment.team_id)


def can_delete(user: User, owner_id: int | None) -> bool:
    """Deleting results is for their owner alone, not for the team that shares them."""
    return owner_id == user.id


def can_manage(db: Session, user: User, dashboard: Dashboard) -> bool:
    """Only a dashboard's owner or an owner of its team may move it between teams, delete it,
    or open it to the world (make, list and revoke its share links)."""
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
    if not can_manage(db, creator, dashboard):
        return None
    # Dashboards saved before their config's author was recorded count as set by the owner.
    setter_id = dashboard.config_set_by or dashboard.owner_id
    setter = db.get(User, setter_id)
    if setter is None:
        return None
    return tuple({user.id: user for user in (creator, owner, setter)}.values())


def can_see_experiment(db: Session, viewer: Viewer, experiment_id: int) -> bool:
    query = select(Experiment.id).where(Experiment.id == experiment_id, visible_to(viewer, db))
    return db.scalar(query) is not None


def membership(db: Session, team_id: int, user_id: int) -> TeamMembership | None:
    return db.scalar(
        select(TeamMembership).where(
            TeamMembership.team_id == team_id, TeamMembership.user_id == user_id
        )
    )


# Dependencies: the object a request acts on, once the caller may act on it.


def _action(request: Request) -> str:
    """What a changing request does, for its refusal: PATCH annotates, a POST to
    `.../{id}/<verb>` does the verb."""
    if request.method == "PATCH":
        return "annotate"
    return request.url.path.rstrip("/").rsplit("/", 1)[-1]


def _forbidden(message: str) -> HTTPException:
    return HTTPException(status.HTTP_403_FORBIDDEN, message)


def visible_experiment(experiment_id: int, db: DbSession, user: CurrentUser) -> Experiment:
    experiment = db.scalar(
        select(Experiment).where(Experiment.id == experiment_id, visible_to(user, db))
    )
    if experiment is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"experiment {experiment_id} not found")
    return experiment


VisibleExperiment = Annotated[Experiment, Depends(visible_experiment)]


def editable_experiment(
    experiment: VisibleExperiment, request: Request, db: DbSession, user: CurrentUser
) -> Experiment:
    if not can_edit(db, user, experiment.owner_id, experiment.team_id):
        raise _forbidden(f"viewers cannot {_action(request)} experiments")
    return experiment


def deletable_experiment(experiment: VisibleExperiment, user: CurrentUser) -> Experiment:
    if not can_delete(user, experiment.owner_id):
        raise _forbidden("only the owner may delete an experiment")
    return experiment


EditableExperiment = Annotated[Experiment, Depends(editable_experiment)]
DeletableExperiment = Annotated[Experiment, Depends(deletable_experiment)]


_Row = TypeVar("_Row", Run, DesignSearchRow)


def _with_its_experiment(
    db: DbSession,
    user: CurrentUser,
    table: type[_Row],
    row_id: int,
    what: str,
    *options: ORMOption,
) -> _Row:
    """The row of `table` (a run or a design search) if the user sees its experiment, the
    experiment loaded into `row.experiment` by the same query: no later lazy load can find the
    experiment deleted meanwhile (a retry racing a delete). 404 otherwise. `options`: further
    loader options (columns left for later)."""
    row = db.scalars(
        select(table)
        .join(Experiment, Experiment.id == table.experiment_id)
        .options(contains_eager(table.experiment), *options)
        .where(table.id == row_id, visible_to(user, db))
    ).first()
    if row is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"{what} {row_id} not found")
    return row


def visible_run(run_id: int, db: DbSession, user: CurrentUser) -> Run:
    return _with_its_experiment(db, user, Run, run_id, "run")


VisibleRun = Annotated[Run, Depends(visible_run)]


def editable_run(run: VisibleRun, request: Request, db: DbSession, user: CurrentUser) -> Run:
    """A run its experiment's owner and team owners and members may annotate, cancel, retry."""
    experiment = run.experiment
    if not can_edit(db, user, experiment.owner_id, experiment.team_id):
        raise _forbidden(f"viewers cannot {_action(request)} runs")
    return run


def deletable_run(run: VisibleRun, user: CurrentUser) -> Run:
    if not can_delete(user, run.experiment.owner_id):
        raise _forbidden("only the owner may delete a run")
    return run


def visible_search(search_id: int, db: DbSession, user: CurrentUser) -> DesignSearchRow:
    return _with_its_experiment(db, user, DesignSearchRow, search_id, "search")


VisibleSearch = Annotated[DesignSearchRow, Depends(visible_search)]


def visible_search_heading(search_id: int, db: DbSession, user: CurrentUser) -> DesignSearchRow:
    """A visible search whose stored answers (result, designs) are read only if used: an
    answer served from a cache needs none of their megabytes."""
    answers = (DesignSearchRow.result, DesignSearchRow.design_fields, DesignSearchRow.front_designs)
    return _with_its_experiment(
        db, user, DesignSearchRow, search_id, "search", *(defer(column) for column in answers)
    )


VisibleSearchHeading = Annotated[DesignSearchRow, Depends(visible_search_heading)]


def editable_search(search: VisibleSearch, db: DbSession, user: CurrentUser) -> DesignSearchRow:
    """A search its experiment's owner and team owners and members may cancel, turn designs
    of into runs; saving a design as one's own accelerator needs only to see it."""
    experiment = search.experiment
    if not can_edit(db, user, experiment.owner_id, experiment.team_id):
        raise _forbidden("team viewers cannot cancel searches or turn their designs into runs")
    return search


EditableSearch = Annotated[DesignSearchRow, Depends(editable_search)]


def my_accelerator(accelerator_id: int, db: DbSession, user: CurrentUser) -> SavedAccelerator:
    """One of the caller's own saved accelerators; anyone else's is 404."""
    saved = db.scalar(
        select(SavedAccelerator).where(
            SavedAccelerator.id == accelerator_id, SavedAccelerator.owner_id == user.id
        )
    )
    if saved is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"accelerator {accelerator_id} not found")
    return saved


MyAccelerator = Annotated[SavedAccelerator, Depends(my_accelerator)]


def visible_runs(
    ids: Annotated[list[int], Query(min_length=1, max_length=1000, description="run ids")],
    db: DbSession,
    user: CurrentUser,
) -> list[Run]:
    """The runs of `ids`, by id; 404 naming those the caller may not see."""
    runs = list(
        db.scalars(
            select(Run)
            .join(Experiment, Experiment.id == Run.experiment_id)
            .where(Run.id.in_(ids), visible_to(user, db))
            .order_by(Run.id)
        )
    )
    missing = sorted(set(ids) - {run.id for run in runs})
    if missing:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"runs not found: {missing}")
    return runs


VisibleRuns = Annotated[list[Run], Depends(visible_runs)]
EditableRun = Annotated[Run, Depends(editable_run)]
DeletableRun = Annotated[Run, Depends(deletable_run)]


def visible_dashboard(dashboard_id: str, db: DbSession, user: CurrentUser) -> Dashboard:
    dashboard = db.scalar(
        select(Dashboard).where(
            Dashboard.id == dashboard_id,
            owned_or_shared(user, Dashboard.owner_id, Dashboard.team_id),
        )
    )
    if dashboard is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"dashboard {dashboard_id} not found")
    return dashboard


VisibleDashboard = Annotated[Dashboard, Depends(visible_dashboard)]


def editable_dashboard(dashboard: VisibleDashboard, db: DbSession, user: CurrentUser) -> Dashboard:
    """A dashboard its owner and its team's owners and members may rename and configure."""
    if not can_edit(db, user, dashboard.owner_id, dashboard.team_id):
        raise _forbidden("team viewers cannot change dashboards")
    return dashboard


def managed_dashboard(dashboard: VisibleDashboard, db: DbSession, user: CurrentUser) -> Dashboard:
    """A dashboard its owner or an owner of its team may delete, share, and whose share links
    they may list and revoke."""
    if not can_manage(db, user, dashboard):
        raise _forbidden(
            "only the dashboard's owner or an owner of its team may delete it or manage its "
            "share links"
        )
    return dashboard


def require_dashboard_team_change(
    db: Session, user: User, dashboard: Dashboard, team_id: int | None
) -> None:
    """Moving a dashboard to another team (or out of its team) is for its managers
    (`can_manage`), and only into a team the mover may give work to; sending its current team
    again changes nothing and is allowed to every editor."""
    if team_id == dashboard.team_id:
        return
    if not can_manage(db, user, dashboard):
        raise _forbidden("only the dashboard's owner or an owner of its team may change its team")
    require_team_editor(db, user, team_id)


EditableDashboard = Annotated[Dashboard, Depends(editable_dashboard)]
ManagedDashboard = Annotated[Dashboard, Depends(managed_dashboard)]
ShareableDashboard = ManagedDashboard


class DashboardThroughLink(NamedTuple):
    dashboard: Dashboard
    viewer: Viewer


def shared_view(
    token: Annotated[str, Path(min_length=1, max_length=128)], db: DbSession
) -> DashboardThroughLink:
    """A share link's dashboard and the eyes it reads with; 404 for a link unknown, revoked or
    no longer holding (`share_link_viewer`). No login."""
    found = db.execute(
        select(Dashboard, ShareLink)
        .join(ShareLink, ShareLink.dashboard_id == Dashboard.id)
        .where(ShareLink.token_hash == hash_token(token), ShareLink.revoked_at.is_(None))
    ).first()
    viewer = share_link_viewer(db, *found) if found is not None else None
    if found is None or viewer is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "this link does not exist or was revoked")
    return DashboardThroughLink(found[0], viewer)


SharedView = Annotated[DashboardThroughLink, Depends(shared_view)]


def team_member(team_id: int, db: DbSession, user: CurrentUser) -> TeamMembership:
    """The caller's membership of the team; people outside it get 404."""
    found = membership(db, team_id, user.id)
    if found is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"team {team_id} not found")
    return found


TeamMember = Annotated[TeamMembership, Depends(team_member)]


def team_owner(member: TeamMember) -> TeamMembership:
    if member.role != "owner":
        raise _forbidden("only a team owner may do this")
    return member


def team_owner_or_leaving(user_id: int, member: TeamMember, user: CurrentUser) -> TeamMembership:
    """Removing `user_id` from the team: an owner may remove anyone; anyone may leave."""
    return member if user_id == user.id else team_owner(member)


TeamOwner = Annotated[TeamMembership, Depends(team_owner)]
TeamOwnerOrLeaving = Annotated[TeamMembership, Depends(team_owner_or_leaving)]


def my_invitation(invitation_id: int, db: DbSession, user: CurrentUser) -> TeamInvitation:
    """An invitation addressed to the caller's email; anyone else's is 404."""
    invitation = db.scalar(
        select(TeamInvitation).where(
            TeamInvitation.id == invitation_id,
            TeamInvitation.email == normalise_email(user.email),
        )
    )
    if invitation is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"invitation {invitation_id} not found")
    return invitation


MyInvitation = Annotated[TeamInvitation, Depends(my_invitation)]


def my_token(token_id: int, db: DbSession, user: CurrentUser) -> ApiToken:
    """One of the caller's own API tokens; anyone else's is 404."""
    token = db.scalar(select(ApiToken).where(ApiToken.id == token_id, ApiToken.user_id == user.id))
    if token is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"token {token_id} not found")
    return token


MyToken = Annotated[ApiToken, Depends(my_token)]


def administrator(user: CurrentUser) -> User:
    if not user.is_admin:
        raise _forbidden("only an administrator may do this")
    return user


Administrator = Annotated[User, Depends(administrator)]
