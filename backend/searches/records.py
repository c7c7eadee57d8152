"""A design search's rows: recording one, the trainings it evaluates, starting it (its chunks),
its progress, and cancelling it.

Model. A search belongs to an experiment and evaluates the stored workloads of the
experiment's trainings, one per technique set and the baseline, keyed by technique label. It
is recorded `waiting` and starts once every training of the experiment has ended: when all
are done it becomes `running` with its designs split into chunks of `chunk_size` (the last one
shorter; at most `MAX_CHUNKS` of them, which the spec enforces); when one failed or was
cancelled the search fails, naming it. The start is one conditional UPDATE (`waiting` to
`running`) with the chunk rows in the same transaction, so however often the start task is
delivered the chunks are made once. Progress is read from the
chunk rows (chunks done / total, designs evaluated: the sizes of the done chunks), never kept as
a counter, so a chunk delivered twice cannot be counted twice.

Open choices, and why:
- The trainings of the experiment's first seed are the ones searched: a search asks which
  hardware suits the workload a technique produced, and one workload per technique answers it;
  other seeds' workloads differ only by the seed's noise. An experiment that sweeps a training
  or technique field has several workloads per technique and is refused (422 on `search`):
  search each setting in an experiment of its own.
- A search waits for every training, not only the first seed's: a training still running may
  yet fail, and the answer should not change with the order in which trainings finish.
- A training that failed or was cancelled fails the search rather than leaving it waiting for
  a retry; a new search on the experiment (POST /experiments/{id}/searches) runs it then.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import case, func, insert, select, update
from sqlalchemy.orm import Session

from backend.db.models import DesignSearchRow, Experiment, SearchChunk, Training
from backend.experiments.expand import ExpansionError
from backend.specs.design_search import DesignSearch
from backend.specs.experiment import ExperimentSpec

SEARCH_TERMINAL = ("done", "failed", "cancelled")
SEARCH_ACTIVE = ("waiting", "running")


def _now() -> datetime:
    return datetime.now(UTC)


def check_searchable(spec: ExperimentSpec, loc: tuple[str | int, ...] = ("search",)) -> None:
    """Refuse a search on an experiment with more than one training per technique set and seed
    (see the module docstring), naming the field."""
    swept = [
        path
        for path in (spec.sweep.parameters if spec.sweep is not None else {})
        if path.partition(".")[0] != "accelerator"
    ]
    if swept:
        raise ExpansionError(
            loc,
            "a design search evaluates one stored workload per technique set, but this "
            f"experiment sweeps {', '.join(swept)} (several trainings per technique set); "
            "search each setting in an experiment of its own",
        )


def record_search(
    db: Session, experiment_id: int, search: DesignSearch, created_by: int | None
) -> DesignSearchRow:
    row = DesignSearchRow(
        experiment_id=experiment_id,
        created_by=created_by,
        spec=search.model_dump(mode="json"),
        status="waiting",
    )
    db.add(row)
    db.flush()
    return row


@dataclass(frozen=True)
class Readiness:
    """Whether a waiting search can start: `trainings` (label -> training id) once it can,
    `failure` once it never will, neither while trainings are still under way."""

    trainings: dict[str, int] | None = None
    failure: str | None = None


def readiness(db: Session, experiment_id: int) -> Readiness:
    """Whether a search of this experiment can start now (see the module docstring)."""
    experiment = db.get(Experiment, experiment_id)
    if experiment is None:
        return Readiness(failure=f"experiment {experiment_id} was deleted")
    trainings = list(
        db.scalars(
            select(Training).where(Training.experiment_id == experiment_id).order_by(Training.id)
        )
    )
    if any(t.status not in SEARCH_TERMINAL for t in trainings):
        return Readiness()
    ended = [t for t in trainings if t.status != "done" or t.workload is None]
    if ended:
        names = ", ".join(f"training {t.id} ({t.technique}) {t.status}" for t in ended)
        return Readiness(failure=f"not every training of the experiment stored a workload: {names}")
    first_seed = ExperimentSpec.stored(experiment.spec).seeds[0]
    chosen: dict[str, int] = {}
    for training in trainings:
        if training.training_config.get("seed") == first_seed:
            chosen.setdefault(training.technique, training.id)
    return Readiness(trainings=chosen)


def chunk_bounds(designs: int, chunk_size: int) -> list[tuple[int, int]]:
    """[start, stop) of each chunk: `chunk_size` designs each, the last one the rest."""
    return [(start, min(start + chunk_size, designs)) for start in range(0, designs, chunk_size)]


def begin_search(db: Session, search_id: int, trainings: dict[str, int], designs: int) -> bool:
    """Turn a waiting search into a running one with its chunks; False (nothing written) when
    it is no longer waiting (started by another delivery, cancelled, deleted)."""
    search = db.get(DesignSearchRow, search_id)
    if search is None:
        return False
    started = db.execute(
        update(DesignSearchRow)
        .where(DesignSearchRow.id == search_id, DesignSearchRow.status == "waiting")
        .values(status="running", designs=designs, trainings=trainings, started_at=_now())
        .execution_options(synchronize_session=False)
    ).rowcount
    if not started:
        return False
    chunk_size = int(search.spec["chunk_size"])
    # One multi-row INSERT (at most MAX_CHUNKS rows: the spec bounds them), not ORM objects:
    # the search's row stays locked by the UPDATE above only for milliseconds.
    db.execute(
        insert(SearchChunk),
        [
            {"search_id": search_id, "position": position, "start": start, "stop": stop}
            for position, (start, stop) in enumerate(chunk_bounds(designs, chunk_size))
        ],
    )
    return True


def fail_search(db: Session, search_id: int, reason: str) -> bool:
    """End an active search as failed, its open chunks with it."""
    ended = db.execute(
        update(DesignSearchRow)
        .where(DesignSearchRow.id == search_id, DesignSearchRow.status.in_(SEARCH_ACTIVE))
        .values(status="failed", error=reason, finished_at=_now())
        .execution_options(synchronize_session=False)
    ).rowcount
    if ended:
        _end_open_chunks(db, [search_id], "failed")
    return bool(ended)


def _end_open_chunks(db: Session, search_ids: list[int], status: str) -> None:
    db.execute(
        update(SearchChunk)
        .where(SearchChunk.search_id.in_(search_ids), SearchChunk.status.in_(("queued", "running")))
        .values(status=status, heartbeat_at=None, finished_at=_now())
        .execution_options(synchronize_session=False)
    )


def cancel_searches(db: Session, search_ids: list[int]) -> None:
    """Cancel these searches if still active, and their open chunks: a chunk being evaluated
    loses its lease and stores nothing; a chunk task still in the broker finds nothing to
    claim. The caller commits."""
    if not search_ids:
        return
    db.execute(
        update(DesignSearchRow)
        .where(DesignSearchRow.id.in_(search_ids), DesignSearchRow.status.in_(SEARCH_ACTIVE))
        .values(status="cancelled", cancel_requested=True, error="cancelled", finished_at=_now())
        .execution_options(synchronize_session=False)
    )
    _end_open_chunks(db, search_ids, "cancelled")


def cancel_experiment_searches(db: Session, experiment_id: int) -> None:
    ids = db.scalars(
        select(DesignSearchRow.id).where(
            DesignSearchRow.experiment_id == experiment_id,
            DesignSearchRow.status.in_(SEARCH_ACTIVE),
        )
    )
    cancel_searches(db, list(ids))


@dataclass(frozen=True)
class Progress:
    chunks_total: int = 0
    chunks_done: int = 0
    designs_evaluated: int = 0


def progress(db: Session, search_ids: list[int]) -> dict[int, Progress]:
    """Chunks done / total and designs evaluated, read from the chunk rows."""
    done = SearchChunk.status == "done"
    rows = db.execute(
        select(
            SearchChunk.search_id,
            func.count(),
            func.count().filter(done),
            func.coalesce(func.sum(case((done, SearchChunk.stop - SearchChunk.start))), 0),
        )
        .where(SearchChunk.search_id.in_(search_ids))
        .group_by(SearchChunk.search_id)
    ).all()
    found = {row[0]: Progress(int(row[1]), int(row[2]), int(row[3])) for row in rows}
    return {search_id: found.get(search_id, Progress()) for search_id in search_ids}


def searches_of(db: Session, experiment_id: int) -> list[DesignSearchRow]:
    return list(
        db.scalars(
            select(DesignSearchRow)
            .where(DesignSearchRow.experiment_id == experiment_id)
            .order_by(DesignSearchRow.id)
        )
    )


def waiting_searches(db: Session, experiment_id: int | None = None) -> list[int]:
    """Waiting searches (of one experiment, or all) whose experiment has no training under way:
    those a start task would start or fail now."""
    under_way = (
        select(Training.id)
        .where(
            Training.experiment_id == DesignSearchRow.experiment_id,
            Training.status.not_in(SEARCH_TERMINAL),
        )
        .exists()
    )
    query = select(DesignSearchRow.id).where(DesignSearchRow.status == "waiting", ~under_way)
    if experiment_id is not None:
        query = query.where(DesignSearchRow.experiment_id == experiment_id)
    return list(db.scalars(query.order_by(DesignSearchRow.id)))


def spec_of(search: DesignSearchRow) -> DesignSearch:
    return DesignSearch.model_validate(search.spec)


def summary(search: DesignSearchRow) -> dict[str, Any]:
    """What the merged result says beyond the fronts and the sample (counts, ranges)."""
    result = search.result or {}
    return {key: value for key, value in result.items() if key not in ("fronts", "sample")}
