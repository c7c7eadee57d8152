"""Storing what a training did: its epochs and workload, and each of its runs simulated on the
run's accelerator, with the run's metrics and `done` together.

`store_results` writes everything of one delivery in one transaction that first checks the
delivery still holds its lease (`backend.delivery.claims`): a reader never sees a run `done`
without its metrics, and a superseded delivery writes nothing. Before that, `store_epoch` stores
each epoch as it is measured, under the same lease, so a training's curves grow while it runs:
epoch k replaces every stored epoch from k on, so a delivery that trains again after a worker
died (from epoch 1: a training is deterministic for its seed) never adds to the earlier
delivery's epochs, and `store_results` then replaces them with the same ones (a training that
fails after its epochs keeps them: they show how far it got).
`refresh_iso_area` compares each technique run with the best dense designs of no more area
(backend.sim.iso_area) once its baseline's training is stored, whichever of the two is stored
last. `simulate_pending_runs` serves a training already done (a retried run, or runs left open
beside it): it simulates the stored workload without training anew.

A simulation whose totals or layer figures are not finite (an accelerator config outside the
plausible ranges that somehow reached the worker: a row written before the ranges existed, or
straight into the database) is refused with `NonFiniteResult` before anything is written: it is
deterministic, so the job runner fails the training with that reason at once instead of letting
the delivery die and be re-delivered as if its worker were lost (`worker.jobs`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session, aliased

from backend.db.models import EpochMetric, LayerResult, Run, Training
from backend.db.session import session_scope
from backend.delivery.claims import lease_held
from backend.experiments.service import TERMINAL, refresh_experiment_status
from backend.settings import Settings
from backend.sim import SimulationResult, Workload, simulate_many
from backend.sim.area import AreaBreakdown, area
from backend.sim.iso_area import choose, dense_candidates, evaluate
from backend.specs.accelerator import AcceleratorConfig
from backend.specs.figures import (
    HARDWARE,
    ISO_AREA,
    LAYER_MEASURES,
    SIMULATED,
    TRAINING_ONLY,
    Measure,
)
from backend.specs.techniques import extension_sizes

DID_NOT_LEARN_MARGIN = Settings.model_fields["did_not_learn_margin"].default


def _now() -> datetime:
    return datetime.now(UTC)


class NonFiniteResult(ValueError):
    """A simulation produced an infinite or NaN figure; nothing of it may be stored."""


def _numbers(value: object, path: str) -> Iterator[tuple[str, float]]:
    if isinstance(value, bool):
        return
    if isinstance(value, int | float):
        yield path, float(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _numbers(item, f"{path}.{key}")


def check_finite(sim: SimulationResult) -> None:
    """Raise `NonFiniteResult` naming the first figure of the totals or of a layer that is not
    finite (the simulator's figures are numbers and dicts of numbers)."""
    figures = [("totals", asdict(sim.totals))]
    figures += [(f"layer {row.layer} {row.pass_}", asdict(row)) for row in sim.layers]
    for where, values in figures:
        for name, number in _numbers(values, ""):
            if not math.isfinite(number):
                raise NonFiniteResult(
                    f"simulation produced a non-finite value: {where}{name} = {number} on "
                    f"accelerator {sim.accelerator!r} (clock {sim.clock_mhz} MHz); check its "
                    "physical fields"
                )


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


def measured(measures: tuple[Measure, ...], source: object) -> dict[str, int | float]:
    """The columns of these measures (backend/specs/figures.py), read from a simulator result."""
    return {measure.key: measure.of(source) for measure in measures}


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
                details={key: figures[key] for key in LAYER_DETAILS},
                **measured(LAYER_MEASURES, layer),
            )
        )
    return rows


def run_area(
    accelerator_config: dict[str, Any], technique_params: list[dict[str, Any]] | None
) -> AreaBreakdown:
    """The area of a run's accelerator (its extensions as the run has them switched on), each
    sized extension as the run's technique parameters size it."""
    accel = AcceleratorConfig.model_validate(accelerator_config)
    return area(accel, extension_sizes(technique_params).get("mcache"))


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
    nothing written) if the run is no longer open. Raises `NonFiniteResult` (nothing written)
    when a figure is not finite."""
    check_finite(sim)
    totals = sim.totals
    hardware = run_area(run.accelerator_config, run.technique_params)
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
            **measured(SIMULATED + TRAINING_ONLY, totals),
            **measured(HARDWARE, hardware),
            **{measure.key: None for measure in ISO_AREA},  # refresh_iso_area's, anew
            iso_area=None,
            summary={
                **asdict(totals),
                "area_um2": hardware.components,
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


def refresh_iso_area(db: Session, experiment_id: int) -> None:
    """The iso-area measures of the experiment's done technique runs that lack them and whose
    baseline's training is stored: the dense family of each run's accelerator simulated on that
    training's workload, each design once per training."""
    baseline = aliased(Run)
    pending = db.execute(
        select(Run, baseline.training_id)
        .join(baseline, baseline.id == Run.baseline_run_id)
        .join(Training, Training.id == baseline.training_id)
        .where(
            Run.experiment_id == experiment_id,
            Run.status == "done",
            Run.is_baseline.is_(False),
            Run.iso_area_speedup.is_(None),
            Run.seconds > 0,
            Run.energy_pj > 0,
            Run.area_mm2.is_not(None),
            Training.status == "done",
            Training.workload.is_not(None),
        )
    ).all()
    by_training: dict[int, list[Run]] = {}
    for run, training_id in pending:
        by_training.setdefault(training_id, []).append(run)
    for training_id, runs in by_training.items():
        training = db.get(Training, training_id)
        assert training is not None and training.workload is not None
        families = {
            run.id: dense_candidates(AcceleratorConfig.model_validate(run.accelerator_config))
            for run in runs
        }
        workload = Workload.from_dict(training.workload)
        designs = {design.model_dump_json(): design for f in families.values() for design in f}
        costs = dict(zip(designs, evaluate(workload, list(designs.values())), strict=True))
        for run in runs:
            found = choose([costs[d.model_dump_json()] for d in families[run.id]], run.area_mm2)
            if found is None:
                continue
            db.execute(
                update(Run)
                .where(Run.id == run.id, Run.iso_area_speedup.is_(None))
                .values(
                    iso_area_speedup=found.speedup(run.seconds),
                    iso_area_energy_ratio=found.energy_ratio(run.energy_pj),
                    iso_area=found.to_dict(),
                )
            )


def _simulate(training: Training, runs: list[Run]) -> list[SimulationResult]:
    workload = Workload.from_dict(training.workload or {})
    accelerators = [AcceleratorConfig.model_validate(run.accelerator_config) for run in runs]
    return simulate_many(workload, accelerators)


def _store_simulations(db: Session, training: Training, runs: list[Run], margin: float) -> int:
    """Simulate the training's workload for each run and store the results; runs done."""
    not_learned = did_not_learn(training.test_accuracy, training.chance_accuracy, margin)
    sims = _simulate(training, runs)
    for sim in sims:  # all checked before the first write
        check_finite(sim)
    done = 0
    for run, sim in zip(runs, sims, strict=True):
        done += store_simulation(
            db, run, sim, training.test_accuracy, training.test_loss, not_learned
        )
    refresh_speedups(db, training.experiment_id)
    refresh_iso_area(db, training.experiment_id)
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


def _epoch_row(training_id: int, epoch: Any) -> EpochMetric:
    return EpochMetric(training_id=training_id, **asdict(epoch))


def store_epoch(database_url: str, training_id: int, attempt: int, epoch: Any) -> bool:
    """Store one measured epoch (an `EpochMetrics`) of a running training, replacing the stored
    epochs from its number on; False, with nothing written, when the lease was lost."""
    with session_scope(database_url) as db:
        held = db.execute(
            update(Training).where(lease_held(training_id, attempt)).values(heartbeat_at=_now())
        ).rowcount
        if not held:
            return False
        db.execute(
            delete(EpochMetric).where(
                EpochMetric.training_id == training_id, EpochMetric.epoch >= epoch.epoch
            )
        )
        db.add(_epoch_row(training_id, epoch))
    return True


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
        .where(lease_held(training_id, attempt))
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
    db.add_all(_epoch_row(training_id, epoch) for epoch in result.epochs)
    training = db.get(Training, training_id)
    assert training is not None
    runs = list(
        db.scalars(select(Run).where(Run.training_id == training_id, Run.status.not_in(TERMINAL)))
    )
    _store_simulations(db, training, runs, did_not_learn_margin)
    return True
