"""The chunk runner of a design search: claim a chunk, evaluate its designs under the lease,
merge what it kept into the search's result.

One Celery task run is one delivery of one chunk. Claiming and the lease are
`backend.searches.chunks`; the evaluation is the simulator core's `evaluate_chunk`
(backend/sim/design_search.py) on the stored workloads of the trainings the search chose at its
start (`DesignSearchRow.trainings`, technique label -> training). The merge happens in the
transaction that marks the chunk done, under the search's row lock: the search's `result`
becomes merge(result so far, this chunk), its `design_fields` gain the searched fields of the
designs this chunk kept (and lose those no longer on a front or in a sample), its
`front_designs` hold the full accelerator config of every design on a front (`design_at`), and
the chunk that leaves none open marks the search done.

A chunk whose evaluation raises ValueError or ArithmeticError (a stored workload that no longer
loads, a design the simulator cannot cost) fails the search with that reason at once: another
delivery would fail the same way.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from backend.db.models import DesignSearchRow, Experiment, SearchChunk, Training
from backend.db.session import session_scope
from backend.delivery.leases import LeaseTerms
from backend.searches.chunks import ChunkLease, chunks_left, claim_chunk, mark_chunk_done
from backend.searches.records import fail_search
from backend.sim.area import McacheSize
from backend.sim.design_search import SearchResult, design_at, design_table, evaluate_chunk, merge
from backend.sim.workload import Workload
from backend.specs.design_search import DesignSearch
from backend.specs.experiment import ExperimentSpec
from backend.specs.techniques import extension_sizes

log = logging.getLogger("orrery.searches")
DETERMINISTIC_ERRORS: tuple[type[Exception], ...] = (ValueError, ArithmeticError, KeyError)


@dataclass(frozen=True)
class ChunkOutcome:
    status: str  # done | superseded | failed | missing | the status of a chunk not claimed
    search_id: int | None = None


@dataclass(frozen=True)
class ChunkWork:
    """What a claimed chunk evaluates, read in the claim's transaction."""

    search_id: int
    start: int
    stop: int
    search: DesignSearch
    workloads: dict[str, Workload]
    mcache: dict[str, McacheSize]
    baseline_hardware: Any


def _work(db: Any, chunk: SearchChunk) -> ChunkWork:
    search = db.get(DesignSearchRow, chunk.search_id)
    experiment = db.get(Experiment, search.experiment_id)
    trainings = {
        label: db.get(Training, training_id) for label, training_id in search.trainings.items()
    }
    missing = [label for label, t in trainings.items() if t is None or t.workload is None]
    if missing:
        raise ValueError(f"the stored workloads of {', '.join(missing)} are gone")
    return ChunkWork(
        search_id=search.id,
        start=chunk.start,
        stop=chunk.stop,
        search=DesignSearch.stored(search.spec),
        workloads={label: Workload.from_dict(t.workload) for label, t in trainings.items()},
        mcache={
            label: extension_sizes(t.technique_params).get("mcache", McacheSize())
            for label, t in trainings.items()
        },
        baseline_hardware=ExperimentSpec.stored(experiment.spec).baseline_hardware,
    )


def kept_indices(result: SearchResult) -> np.ndarray:
    """Every design index on a front or in a sample of the result, sorted, distinct."""
    parts = [
        np.asarray(points.index, dtype=np.int64)
        for workload in result.workloads.values()
        for points in (workload.front, workload.sample)
    ]
    return np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)


def chunk_fields(
    search: DesignSearch, start: int, stop: int, indices: np.ndarray
) -> dict[str, Any]:
    """The searched fields of these designs of [start, stop), columnar."""
    table = design_table(search, start, stop)
    rows = indices - start
    return {
        "index": indices.tolist(),
        "fields": {path: values[rows].tolist() for path, values in table.items()},
    }


def merged_fields(
    old: dict[str, Any] | None, new: dict[str, Any], keep: np.ndarray
) -> dict[str, Any]:
    """The rows of `old` and `new` (columnar design fields) whose index is in `keep`."""
    parts = [part for part in (old, new) if part is not None and part["index"]]
    if not parts:
        return {"index": [], "fields": {path: [] for path in new["fields"]}}
    index = np.concatenate([np.asarray(p["index"], dtype=np.int64) for p in parts])
    index, first = np.unique(index, return_index=True)
    wanted = np.isin(index, keep)
    rows = first[wanted]
    fields = {}
    for path in new["fields"]:
        values = [value for p in parts for value in p["fields"][path]]
        fields[path] = [values[row] for row in rows]
    return {"index": index[wanted].tolist(), "fields": fields}


def front_configs(
    search: DesignSearch, result: SearchResult, old: dict[str, Any] | None
) -> dict[str, Any]:
    """Every front design's full accelerator config by index (text), reusing those known."""
    known = old or {}
    fronts = {i for workload in result.workloads.values() for i in workload.front.index}
    return {
        str(i): known.get(str(i)) or design_at(search, i).model_dump(mode="json")
        for i in sorted(fronts)
    }


def run_chunk_job(
    database_url: str,
    chunk_id: int,
    task_id: str | None = None,
    terms: LeaseTerms = LeaseTerms(),
    on_claimed: Callable[[], None] | None = None,
) -> ChunkOutcome:
    """Evaluate one chunk under its lease and merge it into its search, at most once;
    `on_claimed` is called once the claim is committed (its message left the broker's
    backlog)."""
    with session_scope(database_url) as db:
        chunk = db.get(SearchChunk, chunk_id)
        if chunk is None:
            return ChunkOutcome("missing")
        search_id = chunk.search_id
        attempt = claim_chunk(db, chunk_id, task_id, terms)
        if attempt is None:
            db.refresh(chunk)
            return ChunkOutcome(chunk.status, search_id)
        try:
            work = _work(db, chunk)
        except DETERMINISTIC_ERRORS as exc:
            fail_search(db, search_id, f"search chunk {chunk.position}: {exc}")
            return ChunkOutcome("failed", search_id)
    if on_claimed is not None:
        on_claimed()
    with ChunkLease(database_url, chunk_id, attempt, terms.heartbeat_interval) as lease:
        began = time.perf_counter()
        try:
            part = evaluate_chunk(
                work.workloads,
                work.search,
                work.start,
                work.stop,
                baseline_hardware=work.baseline_hardware,
                mcache=work.mcache,
            )
        except DETERMINISTIC_ERRORS as exc:
            reason = f"designs {work.start} to {work.stop - 1}: {type(exc).__name__}: {exc}"
            with session_scope(database_url) as db:
                fail_search(db, search_id, reason)
            return ChunkOutcome("failed", search_id)
        seconds = time.perf_counter() - began
    if lease.lost.is_set():
        return ChunkOutcome("superseded", search_id)
    with session_scope(database_url) as db:  # rolled back whole on any error
        search = mark_chunk_done(db, chunk_id, search_id, attempt, seconds)
        if search is None:
            log.warning("search chunk %s: attempt %s superseded; dropped", chunk_id, attempt)
            return ChunkOutcome("superseded", search_id)
        merged = (
            part if search.result is None else merge([SearchResult.from_json(search.result), part])
        )
        keep = kept_indices(merged)
        kept_here = np.intersect1d(kept_indices(part), keep)
        fields = chunk_fields(work.search, work.start, work.stop, kept_here)
        search.design_fields = merged_fields(search.design_fields, fields, keep)
        search.front_designs = front_configs(work.search, merged, search.front_designs)
        search.result = merged.to_json()
        if chunks_left(db, search_id) == 0:
            search.status = "done"
            search.finished_at = datetime.now(UTC)
    return ChunkOutcome("done", search_id)
