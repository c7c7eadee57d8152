"""The job runner: train once, store what the training did, simulate it on every run's accelerator.

Every write is idempotent, so a task that is delivered twice (a worker died, the broker
redelivered) never leaves two result sets:
- a training is *claimed* by a conditional status change (queued/running -> running);
- results replace the rows keyed by the training or run inside one transaction, and the status
  change to `done` is conditional on the row still being `running`/`queued`;
- a redelivered task for a training that is already done only simulates runs still pending.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session, aliased

from backend.db.models import EpochMetric, LayerResult, Run, Training
from backend.db.session import session_scope
from backend.experiments.service import TERMINAL, refresh_experiment_status
from backend.settings import Settings
from backend.specs.accelerator import AcceleratorConfig
from backend.specs.training import TrainingConfig, parse_techniques
from worker.sim import SimulationResult, Workload, simulate_many
from worker.training import Progress, TrainingCancelled, run_training

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


def claim_training(db: Session, training_id: int, task_id: str | None) -> Training | None:
    """Mark the training running for this task; None when it is finished or cancelled."""
    claimed = db.execute(
        update(Training)
        .where(
            Training.id == training_id,
            Training.status.in_(("queued", "running")),
            Training.cancel_requested.is_(False),
        )
        .values(
            status="running",
            task_id=task_id,
            attempts=Training.attempts + 1,
            started_at=_now(),
            progress=0.0,
            error=None,
        )
    ).rowcount
    if not claimed:
        return None
    db.execute(
        update(Run)
        .where(Run.training_id == training_id, Run.status.in_(("queued", "running")))
        .values(status="running", started_at=_now(), progress=0.0)
    )
    return db.get(Training, training_id)


def _report_progress(database_url: str, training_id: int, fraction: float) -> None:
    with session_scope(database_url) as db:
        db.execute(
            update(Training)
            .where(Training.id == training_id, Training.status == "running")
            .values(progress=fraction)
        )
        db.execute(
            update(Run)
            .where(Run.training_id == training_id, Run.status == "running")
            .values(progress=fraction * TRAINING_SHARE)
        )


def _cancel_requested(database_url: str, training_id: int) -> bool:
    with session_scope(database_url) as db:
        return bool(db.scalar(select(Training.cancel_requested).where(Training.id == training_id)))


def _finish_unsuccessfully(database_url: str, training_id: int, status: str, error: str) -> None:
    with session_scope(database_url) as db:
        db.execute(
            update(Training)
            .where(Training.id == training_id, Training.status.not_in(TERMINAL))
            .values(status=status, error=error, finished_at=_now())
        )
        db.execute(
            update(Run)
            .where(Run.training_id == training_id, Run.status.not_in(TERMINAL))
            .values(status=status, error=error, finished_at=_now())
        )
        experiment_id = db.scalar(select(Training.experiment_id).where(Training.id == training_id))
        if experiment_id is not None:
            refresh_experiment_status(db, experiment_id)


def store_training(db: Session, training_id: int, result: Any) -> bool:
    """Replace the training's epoch rows and store its workload; False if no longer running."""
    db.execute(delete(EpochMetric).where(EpochMetric.training_id == training_id))
    db.add_all(EpochMetric(training_id=training_id, **asdict(epoch)) for epoch in result.epochs)
    stored = db.execute(
        update(Training)
        .where(Training.id == training_id, Training.status == "running")
        .values(
            status="done",
            progress=1.0,
            workload=result.workload.to_dict(),
            test_accuracy=result.test_accuracy,
            test_loss=result.test_loss,
            chance_accuracy=result.chance_accuracy,
            wall_seconds=result.seconds,
            finished_at=_now(),
        )
    ).rowcount
    if not stored:
        db.rollback()
    return bool(stored)


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
    """Replace the run's layer rows and set its metrics; False if the run is no longer open."""
    totals = sim.totals
    db.execute(delete(LayerResult).where(LayerResult.run_id == run.id))
    db.add_all(_layer_rows(run.id, sim))
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
    if not stored:
        db.rollback()
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


def simulate_pending_runs(
    database_url: str, training_id: int, did_not_learn_margin: float = DID_NOT_LEARN_MARGIN
) -> int:
    """Simulate the stored workload on the accelerator of each run not yet done."""
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
        workload = Workload.from_dict(training.workload)
        accelerators = [AcceleratorConfig.model_validate(run.accelerator_config) for run in runs]
        results = simulate_many(workload, accelerators)
        not_learned = did_not_learn(
            training.test_accuracy, training.chance_accuracy, did_not_learn_margin
        )
        done = 0
        for run, sim in zip(runs, results, strict=True):
            done += store_simulation(
                db, run, sim, training.test_accuracy, training.test_loss, not_learned
            )
        refresh_speedups(db, training.experiment_id)
        refresh_experiment_status(db, training.experiment_id)
        return done


def run_training_job(
    database_url: str,
    training_id: int,
    task_id: str | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    did_not_learn_margin: float = DID_NOT_LEARN_MARGIN,
) -> str:
    """Train (unless already trained), store, simulate; return the training's final status."""
    with session_scope(database_url) as db:
        training = db.get(Training, training_id)
        if training is None:
            return "missing"
        already_trained = training.status == "done"
        claimed = already_trained or claim_training(db, training_id, task_id) is not None
        if claimed and not already_trained:
            refresh_experiment_status(db, training.experiment_id)
        config = TrainingConfig.model_validate(training.training_config)
        techniques = parse_techniques(training.technique_params)
        cancel_requested, status = training.cancel_requested, training.status
    if not claimed:
        if cancel_requested:
            _finish_unsuccessfully(database_url, training_id, "cancelled", "cancelled before start")
            return "cancelled"
        return status

    if not already_trained:
        progress_throttle, cancel_throttle = (
            Throttle(PROGRESS_INTERVAL),
            Throttle(PROGRESS_INTERVAL),
        )

        def progress(update_: Progress) -> None:
            if progress_throttle.ready():
                _report_progress(database_url, training_id, update_.fraction)
                if on_progress is not None:
                    on_progress(update_)

        def should_cancel() -> bool:
            return cancel_throttle.ready() and _cancel_requested(database_url, training_id)

        try:
            result = run_training(
                config, techniques, progress=progress, should_cancel=should_cancel
            )
        except TrainingCancelled as exc:
            _finish_unsuccessfully(database_url, training_id, "cancelled", str(exc))
            return "cancelled"
        except (ValueError, RuntimeError) as exc:  # bad data, a missing data set, a torch error
            _finish_unsuccessfully(
                database_url, training_id, "failed", f"{type(exc).__name__}: {exc}"
            )
            return "failed"
        with session_scope(database_url) as db:
            stored = store_training(db, training_id, result)
        if not stored:
            return "cancelled"

    simulate_pending_runs(database_url, training_id, did_not_learn_margin)
    return "done"
