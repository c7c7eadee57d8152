"""Design searches: run one on an experiment, follow it, read its fronts and sample, cancel it,
turn a front design into runs or save it as your own accelerator; and those accelerators.

A search is seen and changed as its experiment is (backend/api/access.py). The search runs in
the workers (backend/searches/, worker/search_jobs.py); these routes record, read and cancel.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Body, Path, Request, status
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import select

from backend.api.access import (
    EditableExperiment,
    EditableSearch,
    MyAccelerator,
    VisibleExperiment,
    VisibleSearch,
    VisibleSearchHeading,
    can_edit,
)
from backend.api.cached_reads import cached_read
from backend.api.deps import CeleryDep, DbSession, SettingsDep
from backend.api.read_cache import ReadCache
from backend.api.schemas import RunOut
from backend.api.search_answers import (
    FrontsOut,
    SampleOut,
    SearchOut,
    fronts_out,
    sample_out,
    search_out,
)
from backend.api.security import CurrentUser
from backend.db.models import DesignSearchRow, Experiment, SavedAccelerator, User
from backend.experiments.quota import check_active_searches, check_owner_active_runs
from backend.searches import designs, records
from backend.searches.sending import start_ready_searches
from backend.specs.design_search import DesignSearch
from backend.specs.experiment import ExperimentSpec

router = APIRouter(tags=["searches"])
DesignIndex = Annotated[int, Path(ge=0, description="the design's number in the search")]


def _editable(db: DbSession, user: User, experiment: Experiment) -> bool:
    return can_edit(db, user, experiment.owner_id, experiment.team_id)


def _out(db: DbSession, search: DesignSearchRow, user: User) -> SearchOut:
    progress = records.progress(db, [search.id])[search.id]
    return search_out(search, progress, _editable(db, user, search.experiment))


@router.post(
    "/experiments/{experiment_id}/searches",
    response_model=SearchOut,
    status_code=status.HTTP_201_CREATED,
)
def create_search(
    experiment: EditableExperiment,
    search: DesignSearch,
    db: DbSession,
    celery: CeleryDep,
    settings: SettingsDep,
    user: CurrentUser,
) -> SearchOut:
    """Search hardware designs on the stored workloads of the experiment's trainings: at once
    when they are all done, else once they are (status `waiting` until then). 429 when you
    already have `max_active_searches_per_user` searches waiting or running."""
    records.check_searchable(ExperimentSpec.stored(experiment.spec), loc=())
    check_active_searches(db, user, settings.max_active_searches_per_user)
    row = records.record_search(db, experiment.id, search, user.id)
    db.commit()
    start_ready_searches(db, celery, settings.dispatch_ahead, experiment.id)
    db.refresh(row)
    return _out(db, row, user)


@router.get("/experiments/{experiment_id}/searches", response_model=list[SearchOut])
def experiment_searches(
    experiment: VisibleExperiment, db: DbSession, user: CurrentUser
) -> list[SearchOut]:
    """The experiment's searches, oldest first."""
    searches = records.searches_of(db, experiment.id)
    progress = records.progress(db, [s.id for s in searches])
    editable = _editable(db, user, experiment)
    return [search_out(s, progress[s.id], editable) for s in searches]


@router.get("/searches/{search_id}", response_model=SearchOut)
def show_search(search: VisibleSearch, db: DbSession, user: CurrentUser) -> SearchOut:
    """Status and progress: chunks done / total, designs evaluated, counts per technique."""
    return _out(db, search, user)


@router.get("/searches/{search_id}/fronts", response_model=FrontsOut)
def fronts(search: VisibleSearch) -> FrontsOut:
    """Per technique, the Pareto front of the designs evaluated so far: each design's index,
    time, energy, area and searched fields."""
    return fronts_out(search)


@router.get("/searches/{search_id}/sample", response_model=SampleOut)
@cached_read("experiments", "design_searches")
def sample(search: VisibleSearchHeading, request: Request) -> Response:
    """Per technique, the bounded sample (and the front) of the designs evaluated so far,
    columnar, with the designs' searched fields and each value's range; figures to seven
    significant digits."""

    def encoded() -> bytes:
        return sample_out(search).model_dump_json().encode()

    if search.status == "done":  # final: computed once per API process, not per write
        cache: ReadCache = request.app.state.read_cache
        body = cache.lasting(("search sample", search.id, search.finished_at), encoded)
    else:
        body = encoded()
    return Response(body, media_type="application/json")


@router.post("/searches/{search_id}/cancel", response_model=SearchOut)
def cancel_search(search: EditableSearch, db: DbSession, user: CurrentUser) -> SearchOut:
    """Cancel a waiting or running search: no chunk is evaluated or merged after this."""
    records.cancel_searches(db, [search.id])
    db.commit()
    db.refresh(search)
    return _out(db, search, user)


@router.post(
    "/searches/{search_id}/designs/{design_index}/runs",
    response_model=list[RunOut],
    status_code=status.HTTP_201_CREATED,
)
def design_runs(
    search: EditableSearch,
    design_index: DesignIndex,
    db: DbSession,
    celery: CeleryDep,
    settings: SettingsDep,
    user: CurrentUser,
) -> list[RunOut]:
    """Turn a front design into runs: one per training of the experiment, with baselines, on
    the design's accelerator, simulated by the workers on the stored workloads. The runs are
    the experiment owner's and count against the owner's quota, whoever asks (429 over it)."""
    experiment = search.experiment
    new_runs = designs.design_run_count(db, experiment)
    limit = settings.max_active_runs_per_user
    check_owner_active_runs(db, experiment.owner_id, user, new_runs, limit, what="this design")
    runs = designs.design_runs(db, celery, experiment, search, design_index)
    return [RunOut.model_validate(run) for run in runs]


class SaveDesignIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(..., min_length=1, max_length=64, description="your name for it")


class SavedAcceleratorOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    name: str
    config: dict[str, object] = Field(description="a full accelerator config, usable in a spec")
    search_id: int | None
    design_index: int | None
    created_at: datetime


@router.post(
    "/searches/{search_id}/designs/{design_index}/accelerator",
    response_model=SavedAcceleratorOut,
    status_code=status.HTTP_201_CREATED,
)
def save_design(
    search: VisibleSearch,
    design_index: DesignIndex,
    body: Annotated[SaveDesignIn, Body()],
    db: DbSession,
    user: CurrentUser,
) -> SavedAccelerator:
    """Save a front design as your own accelerator (listed by `GET /accelerators`)."""
    return designs.save_design(db, search, design_index, user.id, body.name)


@router.get("/accelerators", response_model=list[SavedAcceleratorOut])
def my_accelerators(db: DbSession, user: CurrentUser) -> list[SavedAccelerator]:
    """Your saved accelerators, by name: full configs for a spec's `accelerators`."""
    return list(
        db.scalars(
            select(SavedAccelerator)
            .where(SavedAccelerator.owner_id == user.id)
            .order_by(SavedAccelerator.name)
        )
    )


@router.delete("/accelerators/{accelerator_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete_accelerator(accelerator: MyAccelerator, db: DbSession) -> Response:
    """Delete one of your saved accelerators (specs that used it keep their copy)."""
    db.delete(accelerator)
    db.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)
