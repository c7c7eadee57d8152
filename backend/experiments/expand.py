"""Expand an experiment spec into trainings and runs.

A *run* is one design point: a technique set trained with one training config and seed, then
simulated on one accelerator. Runs that differ only in the accelerator share one *training*
(same key), so a sweep over accelerator fields trains once. Every (training config, seed) gets a
baseline training, simulated on every accelerator, so every run has a speedup.

Training configs are stored with their recipe resolved (backend/specs/recipes.py): every field
the spec leaves to the recipe holds the recipe's value, so a stored run is reproducible from it.

Hardware follows the technique: a run switches on only the extensions its techniques use (the
MCACHE for MERCURY, zero-skipping for SparseTrain, the predictor unit for ADA-GP) and only where
the accelerator offers them; a baseline runs on the plain accelerator. Speedup is then the
technique on its accelerator against plain training on the plain accelerator, as in the papers.
The plain accelerator is dense in storage too: bitmap and compressed formats go with
zero-skipping (AcceleratorConfig.with_extensions), so a 'dense' baseline, and any run whose
techniques do not use zero-skipping, stores every tensor dense; a 'same' baseline keeps
zero-skipping and the accelerator's formats.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import random
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from backend.analysis.groups import group_key
from backend.specs.accelerator import PRESETS, AcceleratorConfig
from backend.specs.axes import Scalar, SweepAxis
from backend.specs.experiment import SAME_BASELINE_EXTENSIONS, BaselineHardware, ExperimentSpec
from backend.specs.recipes import resolve_recipe
from backend.specs.techniques import (
    BASELINE,
    BY_NAME,
    TECHNIQUE_NAMES,
    TechniqueParams,
    accelerator_for,
    technique_label,
)
from backend.specs.training import TrainingConfig

_technique_adapter: TypeAdapter[Any] = TypeAdapter(TechniqueParams)


class ExpansionError(ValueError):
    """A spec that cannot be expanded; `loc` points at the offending field."""

    def __init__(self, loc: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.loc = loc
        self.message = message


@dataclass(frozen=True)
class TrainingPlan:
    key: str
    technique: str
    technique_params: list[dict[str, Any]]
    training_config: dict[str, Any]
    is_baseline: bool


@dataclass(frozen=True)
class RunPlan:
    training_key: str
    accelerator_name: str
    accelerator_config: dict[str, Any]  # with only the extensions this run uses switched on
    accelerator_key: str  # the accelerator as specified, shared by a run and its baseline
    params: dict[str, Any]
    # A technique run: the baseline it is compared with. A baseline run: the hardware it models.
    baseline_hardware: BaselineHardware = "dense"
    # Shared by the runs equal to this one but for the seed (backend.analysis.groups.group_key).
    group_key: str = ""


def hardware_for(accelerator: dict[str, Any], techniques: set[str]) -> dict[str, Any]:
    """The accelerator with only the extensions these techniques use (if it has them) on."""
    return accelerator_for(AcceleratorConfig.model_validate(accelerator), techniques).model_dump()


def baseline_hardware_for(accelerator: dict[str, Any], kind: BaselineHardware) -> dict[str, Any]:
    """The accelerator a baseline runs on: every extension off and every tensor stored dense
    ('dense'), or only zero-skipping, with the accelerator's storage formats, left as the
    accelerator has it ('same')."""
    extensions = SAME_BASELINE_EXTENSIONS if kind == "same" else frozenset()
    return AcceleratorConfig.model_validate(accelerator).with_extensions(extensions).model_dump()


@dataclass
class Expansion:
    trainings: dict[str, TrainingPlan] = field(default_factory=dict)
    runs: list[RunPlan] = field(default_factory=list)


def axis_values(axis: SweepAxis) -> list[Scalar]:
    """The finite values of a list or range axis (ranges include their stop, within rounding)."""
    return axis.finite_values()


def sample_value(axis: SweepAxis, rng: random.Random) -> Scalar:
    if axis.low is None or axis.high is None:
        return rng.choice(axis_values(axis))
    if axis.log:
        value = math.exp(rng.uniform(math.log(axis.low), math.log(axis.high)))
    else:
        value = rng.uniform(axis.low, axis.high)
    return round(value) if axis.integer else value


def sweep_points(spec: ExperimentSpec) -> list[dict[str, Scalar]]:
    """Every point of the sweep as {path: value}; one empty point when there is no sweep."""
    sweep = spec.sweep
    if sweep is None or not sweep.parameters:
        return [{}]
    paths = list(sweep.parameters)
    if sweep.mode == "random":
        rng = random.Random(sweep.seed)
        return [
            {path: sample_value(sweep.parameters[path], rng) for path in paths}
            for _ in range(sweep.samples)
        ]
    grids = [axis_values(sweep.parameters[path]) for path in paths]
    return [dict(zip(paths, combo, strict=True)) for combo in itertools.product(*grids)]


def count_points(spec: ExperimentSpec) -> int:
    sweep = spec.sweep
    if sweep is None or not sweep.parameters:
        return 1
    if sweep.mode == "random":
        return sweep.samples
    return math.prod(axis.value_count() for axis in sweep.parameters.values())


def count_runs(spec: ExperimentSpec) -> int:
    """An upper bound on the runs `expand` makes, computed without expanding."""
    baselines = 2 if spec.baseline_hardware == "same" else 1
    sets = len(spec.techniques)
    return count_points(spec) * len(spec.seeds) * len(spec.accelerators) * (sets + baselines)


def _set_path(target: dict[str, Any], path: list[str], value: Any, loc: tuple[str, ...]) -> None:
    node = target
    for part in path[:-1]:
        if not isinstance(node.get(part), dict):
            raise ExpansionError(loc, f"unknown sweep parameter '{'.'.join(loc[-1:])}'")
        node = node[part]
    if path[-1] not in node:
        raise ExpansionError(loc, f"unknown sweep parameter '{loc[-1]}'")
    node[path[-1]] = value


def _validate_paths(spec: ExperimentSpec) -> None:
    if spec.sweep is None:
        return
    for path in spec.sweep.parameters:
        loc = ("sweep", "parameters", path)
        head, _, rest = path.partition(".")
        if not rest:
            raise ExpansionError(loc, f"sweep parameter '{path}' needs the form 'group.field'")
        if head == "training":
            fields = TrainingConfig.model_fields
        elif head == "accelerator":
            fields = AcceleratorConfig.model_fields
        elif head in TECHNIQUE_NAMES:
            fields = BY_NAME[head].params_model.model_fields
        else:
            raise ExpansionError(
                loc,
                f"sweep parameter '{path}': '{head}' is not one of training, accelerator, "
                f"{', '.join(TECHNIQUE_NAMES)}",
            )
        top = rest.split(".")[0]
        if top not in fields:
            raise ExpansionError(loc, f"sweep parameter '{path}': '{head}' has no field '{top}'")
        if head == "training" and top == "seed":
            raise ExpansionError(loc, "sweep the seed with the spec's 'seeds' list")


def _technique_sets(spec: ExperimentSpec) -> list[list[dict[str, Any]]]:
    sets = []
    for entry in spec.techniques:
        members = entry if isinstance(entry, list) else [entry]
        sets.append([member.model_dump() for member in members])
    return sets


def _accelerators(spec: ExperimentSpec) -> list[dict[str, Any]]:
    return [
        (PRESETS[choice] if isinstance(choice, str) else choice).model_dump()
        for choice in spec.accelerators
    ]


def training_key(training_config: dict[str, Any], techniques: list[dict[str, Any]]) -> str:
    canonical = json.dumps([training_config, techniques], sort_keys=True, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def _apply(point: dict[str, Scalar], head: str, base: dict[str, Any]) -> dict[str, Any]:
    result = json.loads(json.dumps(base))
    for path, value in point.items():
        group, _, rest = path.partition(".")
        if group == head:
            _set_path(result, rest.split("."), value, ("sweep", "parameters", path))
    return result


def _validated(
    model: type[BaseModel] | TypeAdapter[Any],
    data: dict[str, Any],
    point: dict[str, Scalar],
    head: str,
) -> dict[str, Any]:
    try:
        if isinstance(model, TypeAdapter):
            return model.validate_python(data).model_dump()
        return model.model_validate(data).model_dump()
    except ValidationError as exc:
        swept = {p: v for p, v in point.items() if p.partition(".")[0] == head}
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        path = next(iter(swept), head)
        raise ExpansionError(
            ("sweep", "parameters", path) if swept else (head,),
            f"{head}.{where} = {first.get('input')!r} from sweep point {swept}: {first['msg']}",
        ) from exc


def expand(spec: ExperimentSpec, max_runs: int) -> Expansion:
    """Expand a spec into trainings and runs, or raise ExpansionError naming the bad field."""
    _validate_paths(spec)
    bound = count_runs(spec)
    if bound > max_runs:
        raise ExpansionError(
            ("sweep",) if spec.sweep else ("techniques",),
            f"the spec expands to up to {bound} runs, over the limit of {max_runs}; "
            "narrow the sweep or use random sampling with fewer samples",
        )
    technique_sets = _technique_sets(spec)
    accelerators = _accelerators(spec)
    baseline = [{"name": BASELINE}]
    expansion = Expansion()
    seen_runs: set[tuple[str, str, str]] = set()

    def add_run(
        key: str,
        accel: dict[str, Any],
        hardware: dict[str, Any],
        params: dict[str, Any],
        baseline_hardware: BaselineHardware,
    ) -> None:
        accelerator_key = json.dumps(accel, sort_keys=True)
        if (key, accelerator_key, baseline_hardware) in seen_runs:
            return
        seen_runs.add((key, accelerator_key, baseline_hardware))
        training = expansion.trainings[key]
        seeds = group_key(
            training.training_config, training.technique_params, hardware, baseline_hardware
        )
        expansion.runs.append(
            RunPlan(key, accel["name"], hardware, accelerator_key, params, baseline_hardware, seeds)
        )

    for point in sweep_points(spec):
        for seed in spec.seeds:
            config = _apply(point, "training", spec.training.model_dump())
            config["seed"] = seed
            config = _validated(TrainingConfig, config, point, "training")
            config = resolve_recipe(TrainingConfig.model_validate(config)).model_dump()
            run_accelerators = [
                _validated(
                    AcceleratorConfig, _apply(point, "accelerator", accel), point, "accelerator"
                )
                for accel in accelerators
            ]
            sets = [
                [
                    _validated(_technique_adapter, _apply(point, t["name"], t), point, t["name"])
                    for t in members
                ]
                for members in technique_sets
            ]
            for members in [baseline, *sets]:
                label = technique_label([_technique_adapter.validate_python(m) for m in members])
                key = training_key(config, members)
                is_baseline = label == BASELINE
                expansion.trainings.setdefault(
                    key, TrainingPlan(key, label, members, config, is_baseline=is_baseline)
                )
                names = {m["name"] for m in members}
                for accel in run_accelerators:
                    params = {"technique": label, "accelerator": accel["name"], "seed": seed}
                    params.update(
                        (path, value)
                        for path, value in point.items()
                        if path.partition(".")[0] in {"training", "accelerator", *names}
                    )
                    if not is_baseline:
                        hardware = hardware_for(accel, names)
                        add_run(key, accel, hardware, params, spec.baseline_hardware)
                        continue
                    # Every accelerator gets the dense baseline; 'same' adds its own baseline run
                    # (not merged with the dense one even where the two configs coincide).
                    kinds: list[BaselineHardware] = ["dense"]
                    if spec.baseline_hardware == "same":
                        kinds.append("same")
                    for kind in kinds:
                        add_run(key, accel, baseline_hardware_for(accel, kind), params, kind)
    return expansion
