"""What a design on a search's front becomes: runs of the experiment, or the user's own
accelerator.

Runs. A front design becomes one new run per training of the experiment (every technique set
and seed, and the baselines), on the design's accelerator config, exactly as the experiment's
expansion makes runs for an accelerator it lists (`backend.experiments.expand`): a technique
run switches on only its techniques' extensions, a baseline runs on the plain design ('dense'),
and with `baseline_hardware: same` also on the design with zero-skipping left on. Each
technique run is linked to its baseline on the same design. The trainings are done, so nothing
trains again: each training is sent to the workers once more, and its worker simulates the
stored workload on the new runs (`worker.jobs`: a training already done simulates its open
runs). The runs are then in every table, named "search <id> #<index>", with the searched
fields in their params ("accelerator.rows", ...), so they filter and group like a sweep's.

Saved accelerators. A front design saved by a user is a `SavedAccelerator`: the design's full
config under a name of the user's choosing, private to them. Open choice: it is used in a spec
as a full accelerator config (the submit form fills its custom accelerator from it), not by
name: a spec then says everything about its hardware and stays valid if the preset is deleted
or renamed, and the preset list (`GET /accelerator-presets`) stays the built-in, shared one.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import Celery
from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from backend.db.models import DesignSearchRow, Experiment, Run, SavedAccelerator, Training
from backend.delivery.send import BrokerUnavailable, enqueue_trainings
from backend.experiments.expand import (
    baseline_hardware_for,
    hardware_for,
    training_key,
)
from backend.experiments.service import refresh_experiment_status
from backend.specs.accelerator import AcceleratorConfig
from backend.specs.experiment import BaselineHardware, ExperimentSpec
from backend.specs.techniques import BASELINE, techniques_of

log = logging.getLogger("orrery.searches")


class DesignNotOnFront(LookupError):
    """The design is on none of the search's fronts (yet); answered 404."""

    def __init__(self, search_id: int, index: int) -> None:
        super().__init__(f"design {index} is not on a front of search {search_id}")


class DesignAlreadyRun(ValueError):
    """The design already has runs in the experiment; answered 409."""


class NameTaken(ValueError):
    """The user already has an accelerator so named; answered 422 naming the field."""

    loc = ("name",)

    def __init__(self, name: str) -> None:
        super().__init__(f"you already have an accelerator named '{name}'")
        self.message = str(self)


def design_config(search: DesignSearchRow, index: int) -> dict[str, Any]:
    """The full accelerator config of a design on one of the search's fronts."""
    config = (search.front_designs or {}).get(str(index))
    if config is None:
        raise DesignNotOnFront(search.id, index)
    return dict(config)


def design_fields(search: DesignSearchRow, index: int) -> dict[str, Any]:
    """The searched fields of a design the search kept, by path."""
    table = search.design_fields or {"index": [], "fields": {}}
    try:
        row = table["index"].index(index)
    except ValueError:
        return {}
    return {path: values[row] for path, values in table["fields"].items()}


def run_name(search: DesignSearchRow, index: int) -> str:
    return f"search {search.id} #{index}"


def _baseline_kinds(spec: ExperimentSpec) -> list[BaselineHardware]:
    return ["dense", "same"] if spec.baseline_hardware == "same" else ["dense"]


def _new_run(
    training: Training, accel: dict[str, Any], params: dict[str, Any], **fields: Any
) -> Run:
    return Run.for_training(
        training,
        accelerator_name=accel["name"],
        params={
            "technique": training.technique,
            **params,
            "seed": training.training_config["seed"],
        },
        **fields,
    )


def design_trainings(db: Session, experiment_id: int) -> list[Training]:
    """The experiment's trainings a design's runs are made for: those with a stored workload."""
    return list(
        db.scalars(
            select(Training)
            .where(
                Training.experiment_id == experiment_id,
                Training.status == "done",
                Training.workload.is_not(None),
            )
            .order_by(Training.id)
        )
    )


def design_run_count(db: Session, experiment: Experiment) -> int:
    """How many runs `design_runs` makes for one design."""
    kinds = len(_baseline_kinds(ExperimentSpec.stored(experiment.spec)))
    return sum(kinds if t.technique == BASELINE else 1 for t in design_trainings(db, experiment.id))


def design_runs(
    db: Session, celery: Celery, experiment: Experiment, search: DesignSearchRow, index: int
) -> list[Run]:
    """Record the design's runs (see the module docstring), commit, and send their trainings;
    on a broker refusing, remove the runs again and raise BrokerUnavailable."""
    accel = design_config(search, index) | {"name": run_name(search, index)}
    existing = list(
        db.scalars(
            select(Run.id).where(
                Run.experiment_id == experiment.id, Run.accelerator_name == accel["name"]
            )
        )
    )
    if existing:
        raise DesignAlreadyRun(
            f"design {index} of search {search.id} already has runs in experiment "
            f"{experiment.id}: {existing}"
        )
    spec = ExperimentSpec.stored(experiment.spec)
    trainings = design_trainings(db, experiment.id)
    params = {"accelerator": accel["name"]} | {
        f"accelerator.{path}": value for path, value in design_fields(search, index).items()
    }
    baselines: dict[tuple[str, str], Run] = {}
    for training in trainings:
        if training.technique != BASELINE:
            continue
        for kind in _baseline_kinds(spec):
            run = _new_run(
                training,
                accel,
                params,
                is_baseline=True,
                accelerator_config=baseline_hardware_for(accel, kind),
                baseline_hardware=kind,
            )
            baselines[(training.key, kind)] = run
    db.add_all(baselines.values())
    db.flush()
    technique_runs: list[Run] = []
    for training in trainings:
        if training.technique == BASELINE:
            continue
        baseline = baselines.get(
            (training_key(training.training_config, [{"name": BASELINE}]), spec.baseline_hardware)
        )
        technique_runs.append(
            _new_run(
                training,
                accel,
                params,
                is_baseline=False,
                accelerator_config=hardware_for(accel, set(techniques_of(training.technique))),
                baseline_hardware=spec.baseline_hardware,
                baseline_run_id=baseline.id if baseline is not None else None,
            )
        )
    db.add_all(technique_runs)
    db.flush()
    runs = [*baselines.values(), *technique_runs]
    refresh_experiment_status(db, experiment.id)
    run_ids = [run.id for run in runs]
    try:
        enqueue_trainings(db, celery, trainings)
    except BrokerUnavailable:
        db.rollback()
        db.execute(
            delete(Run).where(Run.id.in_(run_ids)).execution_options(synchronize_session=False)
        )
        refresh_experiment_status(db, experiment.id)
        db.commit()
        raise
    return runs


def save_design(
    db: Session, search: DesignSearchRow, index: int, owner_id: int, name: str
) -> SavedAccelerator:
    """Save a front design as the user's own accelerator under `name` (422 naming `name` when
    they already have one so named)."""
    config = AcceleratorConfig.model_validate(design_config(search, index) | {"name": name})
    taken = db.scalar(
        select(func.count()).where(
            SavedAccelerator.owner_id == owner_id, SavedAccelerator.name == name
        )
    )
    if taken:
        raise NameTaken(name)
    saved = SavedAccelerator(
        owner_id=owner_id,
        name=name,
        config=config.model_dump(mode="json"),
        search_id=search.id,
        design_index=index,
    )
    db.add(saved)
    db.commit()
    return saved
