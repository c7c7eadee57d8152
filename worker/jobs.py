"""The job runner: train once, store what the training did, simulate it on every run's accelerator.

A delivery holds a lease on its training (see `backend.leases`) and every write it makes is
fenced by the attempt number its claim took, so however often a training is delivered (a worker
died, was stopped past its lease, the broker redelivered) one result set is stored:
- a training is *claimed* by a conditional status change: queued, or running with a heartbeat
  older than the lease, and only while it has deliveries left; a delivery that finds a live
  lease leaves the training to its holder;
- while it trains, a heartbeat thread renews the lease; a renewal that finds the lease taken
  back stops the training at its next batch;
- the training's epochs and workload, every run's layers and metrics, the runs' `done` and the
  speedups are written in one transaction that first checks the attempt: a reader never sees a
  run `done` without its metrics, and a superseded worker writes nothing;
- progress that cannot be reported (database or broker away) is skipped, never fatal.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import delete, or_, select, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, aliased

from backend.db.models import EpochMetric, LayerResult, Run, Training
from backend.db.session import session_scope
from backend.experiments.service import TERMINAL, refresh_experiment_status
from backend.leases import (
    LeaseTerms,
    deliveries_since_retry,
    exhausted_reason,
    fail_training,
    lease_expired,
)
from backend.settings import Settings, get_settings
from backend.specs.accelerator import AcceleratorConfig
from backend.specs.techniques import parse_techniques
from backend.specs.training import TrainingConfig
from worker.sim import SimulationResult, Workload, simulate_many
from worker.training import Progress, TrainingCancelled, run_training

log = logging.getLogger("orrery.jobs")
PROGRESS_INTERVAL = 1.0  # seconds between progress writes and cancellation reads
TRAINING_SHARE = 0.98  # of a run's progress bar; simulation is the rest
DID_NOT_LEARN_MARGIN = Settings.model_fields["did_not_learn_margin"].default


def _now() -> datetime:
    return datetime.now(UTC)


class Throttle:
    """Lets a call through at most once per interval (the first call always passes)."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._last = float("-inf")

    def ready(self) -> bool:
        now = time.monotonic()
        if now - self._last < self.interval:
            return False
        self._last = now
        return True


def _held(training_id: int, attempt: int):  # type: ignore[no-untyped-def]
    """SQL condition: the training is still running under this attempt's lease."""
    return (
        (Training.id == training_id)
        & (Training.attempts == attempt)
        & (Training.status == "running")
    )


def claim_training(
    db: Session, training_id: int, task_id: str | None, terms: LeaseTerms = LeaseTerms()
) -> int | None:
    """Take the lease for this task; the attempt number (fencing token), or None when the
    training is finished, cancelled, out of attempts, or leased to a live delivery."""
    now = _now()
    # A running training is claimable only once its lease expired, even for a redelivery of
    # the same task (its process may be alive and only cut off from the broker): one live
    # holder at a time; a dead one is noticed by its lease.
    claimable = or_(
        Training.status == "queued", (Training.status == "running") & lease_expired(terms, now)
    )
    attempt = db.execute(
        update(Training)
        .where(
            Training.id == training_id,
            claimable,
            Training.cancel_requested.is_(False),
            deliveries_since_retry() < terms.max_attempts,
        )
        .values(
            status="running",
            task_id=task_id,
            attempts=Training.attempts + 1,
            started_at=now,
            heartbeat_at=now,
            leased_by=f"{socket.gethostname()}:{os.getpid()}",
            progress=0.0,
            error=None,
        )
        .returning(Training.attempts)
    ).scalar_one_or_none()
    if attempt is None:
        # Claimable but out of deliveries: a training that kills its worker every time.
        exhausted = db.execute(
            select(Training.attempts, deliveries_since_retry()).where(
                Training.id == training_id,
                claimable,
                deliveries_since_retry() >= terms.max_attempts,
            )
        ).first()
        if exhausted is not None:
            token, deliveries = exhausted
            fail_training(db, training_id, token, exhausted_reason(deliveries, terms))
        return None
    db.execute(
        update(Run)
        .where(Run.training_id == training_id, Run.status.in_(("queued", "running")))
        .values(status="running", started_at=now, progress=0.0)
    )
    return attempt


class TrainingLease:
    """Renews one delivery's lease from a thread until stopped; notices when it is lost."""

    def __init__(self, database_url: str, training_id: int, attempt: int, interval: float) -> None:
        self.database_url = database_url
        self.training_id = training_id
        self.attempt = attempt
        self.interval = interval
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lease", daemon=True)

    def renew(self) -> None:
        try:
            with session_scope(self.database_url) as db:
                renewed = db.execute(
                    update(Training)
                    .where(_held(self.training_id, self.attempt))
                    .values(heartbeat_at=_now())
                ).rowcount
        except SQLAlchemyError as exc:  # the database is away: the lease may expire meanwhile
            log.warning("training %s: heartbeat not recorded: %s", self.training_id, exc)
            return
        if not renewed:
            log.warning(
                "training %s: attempt %s lost its lease; stopping", self.training_id, self.attempt
            )
            self.lost.set()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.renew()
            if self.lost.is_set():
                return

    def __enter__(self) -> TrainingLease:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def _report_progress(database_url: str, training_id: int, attempt: int, fraction: float) -> None:
    with session_scope(database_url) as db:
        held = db.execute(
            update(Training).where(_held(training_id, attempt)).values(progress=fraction)
        ).rowcount
        if held:
            db.execute(
                update(Run)
                .where(Run.training_id == training_id, Run.status == "running")
                .values(progress=fraction * TRAINING_SHARE)
            )


def _cancel_requested(database_url: str, training_id: int) -> bool:
    with session_scope(database_url) as db:
        return bool(db.scalar(select(Training.cancel_requested).where(Training.id == training_id)))


def _finish_unsuccessfully(
    database_url: str, training_id: int, attempt: int | None, status: str, error: str
) -> None:
    """End the training and its open runs; with an attempt, only while it holds the lease."""
    with session_scope(database_url) as db:
        condition = Training.id == training_id
        if attempt is not None:
            condition = condition & (Training.attempts == attempt)
        ended = db.execute(
            update(Training)
            .where(condition, Training.status.not_in(TERMINAL))
            .values(status=status, error=error, finished_at=_now(), heartbeat_at=None)
        ).rowcount
        if attempt is not None and not ended:
            return
        db.execute(
            update(Run)
            .where(Run.training_id == training_id, Run.status.not_in(TERMINAL))
            .values(status=status, error=error, finished_at=_now())
        )
        experiment_id = db.scalar(select(Training.experiment_id).where(Training.id == training_id))
        if experiment_id is not None:
            refresh_experiment_status(db, experiment_id)


LAYER_DETAILS = (
    "executions",
    "array_cycles",
    "exposed_extension_cycles",
    "extension_cycles",
    "sram_reads",
    "sram_writes",
    "sram_reads_by_operand",
    "sram_writes_by_operand",
    "dram_reads",
    "dram_writes",
    "dram_reads_by_operand",
    "dram_writes_by_operand",
    "energy_by_level",
    "energy_by_operand",
)


def _layer_rows(run_id: int, sim: SimulationResult) -> list[LayerResult]:
    rows = []
    for position, layer in enumerate(sim.layers):
        figures = asdict(layer)
        rows.append(
            LayerResult(
                run_id=run_id,
                position=position,
                layer=layer.layer,
                training_pass=layer.pass_,
                role=layer.role,
                macs_algorithmic=round(layer.macs_algorithmic),
                macs_actual=round(layer.macs_actual),
                macs_skipped=round(layer.macs_skipped),
                macs_overhead=round(layer.macs_overhead),
                compute_cycles=round(layer.compute_cycles),
                stall_cycles=round(layer.stall_cycles),
                total_cycles=round(layer.total_cycles),
                utilization=layer.utilization,
                mapping_efficiency=layer.mapping_efficiency,
                dram_bytes=round(layer.dram_bytes),
                energy_pj=layer.energy_pj,
                details={key: figures[key] for key in LAYER_DETAILS},
            )
        )
    return rows


def did_not_learn(accuracy: float | None, chance: float | None, margin: float) -> bool | None:
    """Test accuracy below chance + margin (None when either is unknown)."""
    if accuracy is None or chance is None:
        return None
    return accuracy < chance + margin


def store_simulation(
    db: Session,
    run: Run,
    sim: SimulationResult,
    accuracy: float | None,
    loss: float | None,
    not_learned: bool | None = None,
) -> bool:
    """Set the run's metrics and `done` together, then replace its layer rows; False (and
    nothing written) if the run is no longer open."""
    totals = sim.totals
    stored = db.execute(
        update(Run)
        .where(Run.id == run.id, Run.status.in_(("queued", "running")))
        .values(
            status="done",
            progress=1.0,
            finished_at=_now(),
            accuracy=accuracy,
            loss=loss,
            did_not_learn=not_learned,
            total_cycles=round(totals.total_cycles),
            compute_cycles=round(totals.compute_cycles),
            stall_cycles=round(totals.stall_cycles),
            energy_pj=totals.energy_pj,
            macs_algorithmic=round(totals.macs_algorithmic),
            macs_actual=round(totals.macs_actual),
            macs_skipped=round(totals.macs_skipped),
            macs_overhead=round(totals.macs_overhead),
            dram_bytes=round(totals.dram_bytes),
            summary={
                **asdict(totals),
                "conv_operand_traffic": sim.conv_operand_traffic,
                "notes": list(sim.notes),
            },
        )
    ).rowcount
    if stored:
        # The run's row is locked by the update above until commit: no other writer of its
        # layers gets here at the same time.
        db.execute(delete(LayerResult).where(LayerResult.run_id == run.id))
        db.add_all(_layer_rows(run.id, sim))
    return bool(stored)


def refresh_speedups(db: Session, experiment_id: int) -> None:
    """speedup = baseline cycles / run cycles and energy ratio, for runs whose baseline is done."""
    baseline = aliased(Run)
    pairs = db.execute(
        select(Run.id, Run.total_cycles, Run.energy_pj, baseline.total_cycles, baseline.energy_pj)
        .join(baseline, baseline.id == Run.baseline_run_id)
        .where(Run.experiment_id == experiment_id, Run.status == "done", baseline.status == "done")
    ).all()
    for run_id, cycles, energy, base_cycles, base_energy in pairs:
        db.execute(
            update(Run)
            .where(Run.id == run_id)
            .values(
                speedup=base_cycles / cycles if cycles else None,
                energy_ratio=energy / base_energy if base_energy else None,
            )
        )
    db.execute(
        update(Run)
        .where(Run.experiment_id == experiment_id, Run.is_baseline.is_(True), Run.status == "done")
        .values(speedup=1.0, energy_ratio=1.0)
    )


def _simulate(training: Training, runs: list[Run]) -> list[SimulationResult]:
    workload = Workload.from_dict(training.workload or {})
    accelerators = [AcceleratorConfig.model_validate(run.accelerator_config) for run in runs]
    return simulate_many(workload, accelerators)


def _store_simulations(db: Session, training: Training, runs: list[Run], margin: float) -> int:
    """Simulate the training's workload for each run and store the results; runs done."""
    not_learned = did_not_learn(training.test_accuracy, training.chance_accuracy, margin)
    done = 0
    for run, sim in zip(runs, _simulate(training, runs), strict=True):
        done += store_simulation(
            db, run, sim, training.test_accuracy, training.test_loss, not_learned
        )
    refresh_speedups(db, training.experiment_id)
    refresh_experiment_status(db, training.experiment_id)
    return done


def simulate_pending_runs(
    database_url: str, training_id: int, did_not_learn_margin: float = DID_NOT_LEARN_MARGIN
) -> int:
    """Simulate the stored workload on the accelerator of each run not yet done (runs left
    open beside a trained training, e.g. by a version that stored them separately)."""
    with session_scope(database_url) as db:
        training = db.get(Training, training_id)
        if training is None or training.status != "done" or training.workload is None:
            return 0
        runs = list(
            db.scalars(
                select(Run).where(Run.training_id == training_id, Run.status.not_in(TERMINAL))
            )
        )
        if not runs:
            return 0
        return _store_simulations(db, training, runs, did_not_learn_margin)


def store_results(
    db: Session,
    training_id: int,
    attempt: int,
    result: Any,
    did_not_learn_margin: float = DID_NOT_LEARN_MARGIN,
) -> bool:
    """In one transaction, if this attempt still holds the lease: the training's epochs and
    workload, and each open run simulated on its accelerator, its metrics and `done` together.
    False, with nothing written, when the lease was lost."""
    stored = db.execute(
        update(Training)
        .where(_held(training_id, attempt))
        .values(
            status="done",
            progress=1.0,
            workload=result.workload.to_dict(),
            test_accuracy=result.test_accuracy,
            test_loss=result.test_loss,
            chance_accuracy=result.chance_accuracy,
            environment=result.environment,
            wall_seconds=result.seconds,
            finished_at=_now(),
            heartbeat_at=None,
        )
    ).rowcount
    if not stored:
        return False
    db.execute(delete(EpochMetric).where(EpochMetric.training_id == training_id))
    db.add_all(EpochMetric(training_id=training_id, **asdict(epoch)) for epoch in result.epochs)
    training = db.get(Training, training_id)
    assert training is not None
    runs = list(
        db.scalars(select(Run).where(Run.training_id == training_id, Run.status.not_in(TERMINAL)))
    )
    _store_simulations(db, training, runs, did_not_learn_margin)
    return True


def run_training_job(
    database_url: str,
    training_id: int,
    task_id: str | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    did_not_learn_margin: float = DID_NOT_LEARN_MARGIN,
    terms: LeaseTerms = LeaseTerms(),
) -> str:
    """Train under a lease, then store everything at once; return what became of the training
    ("done", "failed", "cancelled", "superseded" when its lease was lost, or the status of a
    training this delivery could not claim)."""
    with session_scope(database_url) as db:
        training = db.get(Training, training_id)
        if training is None:
            return "missing"
        if training.status == "done":
            attempt = None
        else:
            attempt = claim_training(db, training_id, task_id, terms)
            if attempt is not None:
                refresh_experiment_status(db, training.experiment_id)
        config = TrainingConfig.model_validate(training.training_config)
        techniques = parse_techniques(training.technique_params)
        db.refresh(training)
        cancel_requested, status = training.cancel_requested, training.status
    if status == "done":
        simulate_pending_runs(database_url, training_id, did_not_learn_margin)
        return "done"
    if attempt is None:
        if cancel_requested:
            _finish_unsuccessfully(database_url, training_id, None, "cancelled", "cancelled")
            return "cancelled"
        return status

    with TrainingLease(database_url, training_id, attempt, terms.heartbeat_interval) as lease:
        progress_throttle, cancel_throttle = (
            Throttle(PROGRESS_INTERVAL),
            Throttle(PROGRESS_INTERVAL),
        )

        def progress(update_: Progress) -> None:
            if not progress_throttle.ready():
                return
            try:
                _report_progress(database_url, training_id, attempt, update_.fraction)
                if on_progress is not None:
                    on_progress(update_)
            except Exception as exc:  # progress is a courtesy; the training goes on
                log.warning("training %s: progress not reported: %s", training_id, exc)

        def should_cancel() -> bool:
            if lease.lost.is_set():
                return True
            if not cancel_throttle.ready():
                return False
            try:
                return _cancel_requested(database_url, training_id)
            except SQLAlchemyError:
                return False

        try:
            result = run_training(
                config,
                techniques,
                progress=progress,
                should_cancel=should_cancel,
                data_root=get_settings().effective_data_root,
                fashion_mnist_dir=get_settings().fashion_mnist_dir,
            )
        except TrainingCancelled as exc:
            if lease.lost.is_set():  # taken back, or cancelled (which also ends the lease)
                return "superseded"
            _finish_unsuccessfully(database_url, training_id, attempt, "cancelled", str(exc))
            return "cancelled"
        except (ValueError, RuntimeError) as exc:  # bad data, a missing data set, a torch error
            reason = f"{type(exc).__name__}: {exc}"
            _finish_unsuccessfully(database_url, training_id, attempt, "failed", reason)
            return "failed"
    with session_scope(database_url) as db:
        stored = store_results(db, training_id, attempt, result, did_not_learn_margin)
    if not stored:
        log.warning("training %s: attempt %s was superseded; results dropped", training_id, attempt)
        return "superseded"
    return "done"
