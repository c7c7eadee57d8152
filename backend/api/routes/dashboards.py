"""Dashboards: saved run selections, filters and charts; team sharing; read-only share links.

A share link's token is shown once, when it is made; only its SHA-256 is stored, and revoking
sets `revoked_at`. `GET /shared/{token}` needs no login and returns one dashboard with the data
of its charts and its summary table, nothing else: only runs that the link's creator, the
dashboard's owner and the config's last author may all see (the rule is in `access.py`). Its
summary's design points are over the dashboard's runs only (the compare page's take every
visible seed of the runs' experiments): the link shows no run the dashboard does not.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query, Response, status
from pydantic import BaseModel, ConfigDict, Field, computed_field
from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.api.access import (
    EditableDashboard,
    ManagedDashboard,
    SharedView,
    Viewer,
    VisibleDashboard,
    can_edit,
    can_manage,
    field_error,
    owned_or_shared,
    require_dashboard_team_change,
    require_team_editor,
)
from backend.api.cached_reads import cached_read
from backend.api.chart_data import MAX_CHART_RUNS, ChartData, chart_data
from backend.api.deps import DbSession
from backend.api.markdown import render_markdown
from backend.api.run_groups import run_groups
from backend.api.run_query import RunFilters, filtered_runs
from backend.api.schemas import RunGroup, from_row
from backend.api.security import CurrentUser, hash_token
from backend.db.change_log import PROGRESS
from backend.db.models import Dashboard, Run, ShareLink, User

router = APIRouter(tags=["dashboards"])

ChartName = Literal[
    "pareto", "cycles", "energy", "layer_cycles", "macs", "curves", "parallel", "roofline"
]
ALL_CHARTS: list[ChartName] = [
    "pareto", "cycles", "energy", "layer_cycles", "macs", "curves", "parallel", "roofline",
]  # fmt: skip


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DashboardFilters(_In):
    """The run table's filters, as the /runs query takes them (a saved filter)."""

    experiment_id: list[int] = Field(default_factory=list, max_length=100)
    technique: list[str] = Field(default_factory=list, max_length=50)
    model: list[str] = Field(default_factory=list, max_length=50)
    dataset: list[str] = Field(default_factory=list, max_length=50)
    status: list[str] = Field(default_factory=list, max_length=10)
    accelerator: list[str] = Field(default_factory=list, max_length=100)
    is_baseline: bool | None = None
    param: list[str] = Field(default_factory=list, max_length=50)
    range: list[str] = Field(default_factory=list, max_length=50)
    sort: str = Field("-id", max_length=500)
    q: str = Field("", max_length=200, description="words to find, as the /runs query's q")


class TextBlock(_In):
    """Markdown text shown between the charts (raw HTML is shown as text, never run)."""

    position: int = Field(
        0, ge=0, le=20, description="before the chart at this index; past the last: at the end"
    )
    markdown: str = Field(..., min_length=1, max_length=20_000)


class DashboardConfig(_In):
    run_ids: list[int] = Field(
        default_factory=list,
        max_length=MAX_CHART_RUNS,
        description="pinned runs; with none pinned, the charts show the first runs matching the "
        "filters",
    )
    filters: DashboardFilters = Field(default_factory=DashboardFilters)
    add_filtered_runs: bool = Field(
        False,
        description="show the runs matching the filters as well as the pinned runs (at most "
        f"{MAX_CHART_RUNS} in all, pinned first)",
    )
    charts: list[ChartName] = Field(
        default_factory=lambda: list(ALL_CHARTS), max_length=20, description="charts, in order"
    )
    texts: list[TextBlock] = Field(
        default_factory=list, max_length=30, description="text blocks between the charts"
    )


class DashboardIn(_In):
    name: str = Field(..., min_length=1, max_length=200)
    team_id: int | None = Field(None, description="share with this team (you must be a member)")
    config: DashboardConfig = Field(default_factory=DashboardConfig)


class DashboardPatch(_In):
    name: str | None = Field(None, min_length=1, max_length=200)
    team_id: int | None = Field(None, description="null to stop sharing with a team")
    config: DashboardConfig | None = None


class RenderedText(BaseModel):
    position: int
    html: str = Field(description="the block's Markdown as HTML, raw HTML escaped")


class DashboardOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    name: str
    owner_id: int | None
    team_id: int | None
    config: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    can_edit: bool = Field(description="you may rename it and change its config")
    can_manage: bool = Field(
        description="you may change its team, delete it and manage its share links (its owner "
        "or an owner of its team)"
    )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def texts(self) -> list[RenderedText]:
        """its Markdown notes rendered to HTML, each with its place among the charts"""
        return rendered_texts(self.config)


class ShareLinkOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    dashboard_id: str
    created_at: datetime
    revoked_at: datetime | None


class NewShareLink(ShareLinkOut):
    token: str = Field(description="shown once; only its SHA-256 is stored")
    path: str = Field(description="the read-only page, relative to the server")


class SharedDashboard(BaseModel):
    name: str
    charts: list[str]
    texts: list[RenderedText]
    data: ChartData
    groups: list[RunGroup] = Field(
        description="the summary table: the dashboard's runs by design point (all but the seed "
        "equal), each metric's mean and 95% interval over their seeds"
    )


def _out(db: Session, user: User, dashboard: Dashboard) -> DashboardOut:
    return from_row(
        DashboardOut,
        dashboard,
        can_edit=can_edit(db, user, dashboard.owner_id, dashboard.team_id),
        can_manage=can_manage(db, user, dashboard),
    )


def _new_id(db: Session) -> str:
    while True:
        candidate = secrets.token_urlsafe(9)  # 12 characters, 72 random bits
        if db.get(Dashboard, candidate) is None:
            return candidate


def rendered_texts(config: dict[str, Any]) -> list[RenderedText]:
    return [
        RenderedText(position=block.position, html=render_markdown(block.markdown))
        for block in DashboardConfig.model_validate(config).texts
    ]


def _run_ids(db: Session, viewer: Viewer, config: dict[str, Any]) -> list[int]:
    """The dashboard's pinned runs, then (with none pinned, or `add_filtered_runs`) the first
    runs its filters match, at most MAX_CHART_RUNS in all."""
    parsed = DashboardConfig.model_validate(config)
    if parsed.run_ids and not parsed.add_filtered_runs:
        return parsed.run_ids
    filters = RunFilters(**parsed.filters.model_dump())
    query = filtered_runs(db, viewer, filters, Run.id).order_by(*filters.order_by())
    matching = db.scalars(query.limit(MAX_CHART_RUNS))
    return list(dict.fromkeys([*parsed.run_ids, *matching]))[:MAX_CHART_RUNS]


@router.get("/dashboards", response_model=list[DashboardOut])
def list_dashboards(db: DbSession, user: CurrentUser) -> list[DashboardOut]:
    """Your dashboards and your teams', most recently changed first."""
    rows = db.scalars(
        select(Dashboard)
        .where(owned_or_shared(user, Dashboard.owner_id, Dashboard.team_id))
        .order_by(Dashboard.updated_at.desc(), Dashboard.id)
    )
    return [_out(db, user, d) for d in rows]


@router.post("/dashboards", response_model=DashboardOut, status_code=status.HTTP_201_CREATED)
def create_dashboard(body: DashboardIn, db: DbSession, user: CurrentUser) -> DashboardOut:
    require_team_editor(db, user, body.team_id)
    dashboard = Dashboard(
        id=_new_id(db),
        owner_id=user.id,
        team_id=body.team_id,
        name=body.name,
        config=body.config.model_dump(),
        config_set_by=user.id,
    )
    db.add(dashboard)
    db.commit()
    db.refresh(dashboard)
    return _out(db, user, dashboard)


@router.get("/dashboards/{dashboard_id}", response_model=DashboardOut)
def show_dashboard(dashboard: VisibleDashboard, db: DbSession, user: CurrentUser) -> DashboardOut:
    return _out(db, user, dashboard)


@router.patch("/dashboards/{dashboard_id}", response_model=DashboardOut)
def update_dashboard(
    dashboard: EditableDashboard, body: DashboardPatch, db: DbSession, user: CurrentUser
) -> DashboardOut:
    """Rename or replace the config (owner, team owners and members); move to another team or
    out of it, `team_id: null` (the owner or a team owner only)."""
    if "name" in body.model_fields_set:
        if body.name is None:
            raise field_error("name", "name cannot be null")
        dashboard.name = body.name
    if "team_id" in body.model_fields_set:
        require_dashboard_team_change(db, user, dashboard, body.team_id)
        dashboard.team_id = body.team_id
    if body.config is not None:
        dashboard.config = body.config.model_dump()
        dashboard.config_set_by = user.id
    db.commit()
    db.refresh(dashboard)
    return _out(db, user, dashboard)


@router.delete(
    "/dashboards/{dashboard_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses={403: {"description": "you are neither the dashboard's owner nor a team owner"}},
)
def delete_dashboard(dashboard: ManagedDashboard, db: DbSession) -> Response:
    """Delete the dashboard and its share links (its owner or an owner of its team)."""
    db.delete(dashboard)
    db.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/dashboards/{dashboard_id}/data", response_model=ChartData)
@cached_read(
    "experiments", "runs", "dashboards", "layer_results", "epoch_metrics", PROGRESS
)  # the dashboard's config, its runs with their layers and epochs
def dashboard_data(dashboard: VisibleDashboard, db: DbSession, user: CurrentUser) -> ChartData:
    """The data of the dashboard's charts, as you may see it."""
    return chart_data(db, user, _run_ids(db, user, dashboard.config))


@router.post(
    "/dashboards/{dashboard_id}/share-links",
    response_model=NewShareLink,
    status_code=status.HTTP_201_CREATED,
    responses={403: {"description": "you are neither the dashboard's owner nor a team owner"}},
)
def create_share_link(
    dashboard: ManagedDashboard, db: DbSession, user: CurrentUser
) -> NewShareLink:
    """A new read-only link (the dashboard's owner or an owner of its team); its token is in
    this answer only."""
    token = secrets.token_urlsafe(32)
    link = ShareLink(dashboard_id=dashboard.id, token_hash=hash_token(token), created_by=user.id)
    db.add(link)
    db.commit()
    db.refresh(link)
    return from_row(NewShareLink, link, token=token, path=f"/shared/{token}")


@router.get(
    "/dashboards/{dashboard_id}/share-links",
    response_model=list[ShareLinkOut],
    responses={403: {"description": "you are neither the dashboard's owner nor a team owner"}},
)
def list_share_links(dashboard: ManagedDashboard, db: DbSession) -> list[ShareLinkOut]:
    """The dashboard's links, revoked ones too (its owner or an owner of its team)."""
    links = db.scalars(
        select(ShareLink).where(ShareLink.dashboard_id == dashboard.id).order_by(ShareLink.id)
    )
    return [ShareLinkOut.model_validate(link) for link in links]


@router.delete(
    "/dashboards/{dashboard_id}/share-links/{link_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses={403: {"description": "you are neither the dashboard's owner nor a team owner"}},
)
def revoke_share_link(dashboard: ManagedDashboard, link_id: int, db: DbSession) -> Response:
    """Revoke a link for good (its owner or an owner of its team); revoking twice is
    harmless."""
    link = db.scalar(
        select(ShareLink).where(ShareLink.id == link_id, ShareLink.dashboard_id == dashboard.id)
    )
    if link is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"share link {link_id} not found")
    if link.revoked_at is None:
        link.revoked_at = datetime.now(UTC)
        db.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/chart-data", response_model=ChartData)
def runs_chart_data(
    db: DbSession,
    user: CurrentUser,
    ids: Annotated[
        list[int], Query(min_length=1, max_length=MAX_CHART_RUNS, description="run ids")
    ],
) -> ChartData:
    """What the comparison charts need of these runs (those you may see), in one answer."""
    return chart_data(db, user, ids)


@router.get("/shared/{token}", response_model=SharedDashboard)
def shared_dashboard(shared: SharedView, db: DbSession) -> SharedDashboard:
    """A dashboard through its read-only link, no login: its name, charts and the data of the
    runs that the link's creator, the dashboard's owner and the config's author may all see."""
    dashboard, viewer = shared
    config = DashboardConfig.model_validate(dashboard.config)
    run_ids = _run_ids(db, viewer, dashboard.config)
    only_these = RunFilters(**DashboardFilters().model_dump(), run_id=tuple(run_ids))
    return SharedDashboard(
        name=dashboard.name,
        charts=list(config.charts),
        texts=rendered_texts(dashboard.config),
        data=chart_data(db, viewer, run_ids),
        groups=run_groups(db, viewer, only_these) if run_ids else [],
    )
