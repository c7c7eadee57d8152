"""The technique papers next to this installation's results: per paper its headline, its
miniature's spec (to submit as is) and the seed groups of the miniature's runs the caller may see
(`backend.analysis.papers` says which runs those are)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field
from sqlalchemy import select

from backend.analysis.groups import Estimate
from backend.analysis.papers import PAPERS, is_miniature, miniature_spec
from backend.analysis.verdict import verdict
from backend.api.access import visible_to
from backend.api.deps import DbSession
from backend.api.run_groups import run_groups
from backend.api.run_query import RunFilters
from backend.api.schemas import EstimateOut, RunGroup
from backend.api.security import CurrentUser
from backend.db.models import Experiment

router = APIRouter(prefix="/papers", tags=["papers"])


class HeadlineOut(BaseModel):
    text: str = Field(description="the paper's claim, figures included")
    speedup: float = Field(description="the average speedup the paper reports")
    energy_ratio: float | None = Field(description="technique / baseline energy, if reported")
    accuracy: str = Field(description="what the paper says of accuracy")


class PaperGroup(RunGroup):
    """A seed group of the miniature's runs, with the verdict on it against the paper."""

    verdict: str = Field(
        description="reproduces, partial gain, no gain, loses accuracy or inconclusive, from the "
        "speedup's and the accuracy change's 95% intervals over seeds (backend/analysis/"
        "verdict.py); energy is not part of it"
    )
    verdict_why: str = Field(description="the reason, in the row's own figures")


class PaperOut(BaseModel):
    key: str
    title: str
    venue: str
    headline: HeadlineOut
    miniature: dict[str, Any] = Field(description="the miniature's spec, as submitted")
    findings: list[str] = Field(
        description="what this installation measured about the technique beyond the verdict, "
        "each with the command that measured it"
    )
    experiment_ids: list[int] = Field(description="your visible experiments of this miniature")
    groups: list[PaperGroup] = Field(
        description="the technique's seed groups over those experiments, one per accelerator "
        "preset (and swept setting): speedup, energy ratio and accuracy delta as mean and 95% "
        "interval over seeds, each with its verdict"
    )


def _in_units(out: EstimateOut | None, scale: float = 1.0) -> Estimate | None:
    """The API's estimate as the verdict reads it, every value times `scale`."""
    if out is None:
        return None

    def scaled(value: float | None) -> float | None:
        return None if value is None else scale * value

    return Estimate(
        out.n, scale * out.mean, scaled(out.sd), scaled(out.ci_low), scaled(out.ci_high)
    )


def _judged(group: RunGroup, paper_speedup: float) -> PaperGroup:
    """The group with its verdict (the accuracy change in points, as the verdict's rules read)."""
    judged = verdict(_in_units(group.speedup), _in_units(group.accuracy_delta, 100), paper_speedup)
    return PaperGroup(**group.model_dump(), verdict=judged.outcome, verdict_why=judged.why)


def _technique_groups(
    db: DbSession, user: CurrentUser, experiment_ids: list[int]
) -> list[RunGroup]:
    if not experiment_ids:
        return []
    filters = RunFilters(
        experiment_id=experiment_ids,
        technique=[],
        model=[],
        dataset=[],
        status=[],
        accelerator=[],
        is_baseline=False,
        param=[],
        range=[],
        sort="id",
    )
    return run_groups(db, user, filters)


@router.get("", response_model=list[PaperOut])
def papers(db: DbSession, user: CurrentUser) -> list[PaperOut]:
    """Each technique paper: its headline, its miniature, and your stored results of it."""
    out = []
    for key, paper in PAPERS.items():
        spec = miniature_spec(key)
        candidates = db.execute(
            select(Experiment.id, Experiment.spec)
            .where(Experiment.name == spec["name"], visible_to(user, db))
            .order_by(Experiment.id)
        ).all()
        ids = [experiment_id for experiment_id, stored in candidates if is_miniature(key, stored)]
        out.append(
            PaperOut(
                key=key,
                title=paper.title,
                venue=paper.venue,
                headline=HeadlineOut(
                    text=paper.headline,
                    speedup=paper.speedup,
                    energy_ratio=paper.energy_ratio,
                    accuracy=paper.accuracy,
                ),
                miniature=spec,
                findings=list(paper.findings),
                experiment_ids=ids,
                groups=[_judged(g, paper.speedup) for g in _technique_groups(db, user, ids)],
            )
        )
    return out
