"""Expanding specs into trainings and runs: counts, sharing, baselines, limits, errors."""

import pytest

from backend.experiments.expand import ExpansionError, count_runs, expand, sweep_points
from backend.specs.experiment import ExperimentSpec


def spec(**overrides: object) -> ExperimentSpec:
    data: dict[str, object] = {"name": "t", "techniques": [{"name": "mercury"}]}
    data.update(overrides)
    return ExperimentSpec.model_validate(data)


def test_baseline_is_added_for_each_training_config_and_seed() -> None:
    expansion = expand(spec(seeds=[0, 1], accelerators=["edge", "tpu-like"]), 1000)
    techniques = sorted(t.technique for t in expansion.trainings.values())
    assert techniques == ["baseline", "baseline", "mercury", "mercury"]
    assert len(expansion.runs) == 2 * 2 * 2  # (baseline + mercury) x seeds x accelerators
    for run in expansion.runs:
        assert run.params["seed"] in (0, 1)


def test_a_sweep_over_accelerator_fields_trains_once() -> None:
    s = spec(sweep={"parameters": {"accelerator.rows": {"values": [8, 16, 32]}}})
    expansion = expand(s, 1000)
    assert len(expansion.trainings) == 2  # baseline and mercury, each trained once
    rows = sorted({r.accelerator_config["rows"] for r in expansion.runs})
    assert rows == [8, 16, 32]
    assert len(expansion.runs) == 6


def test_technique_sweep_keeps_one_baseline_and_labels_runs() -> None:
    s = spec(sweep={"parameters": {"mercury.signature_bits": {"start": 8, "stop": 20, "step": 4}}})
    expansion = expand(s, 1000)
    bits = sorted(
        r.params["mercury.signature_bits"]
        for r in expansion.runs
        if "mercury.signature_bits" in r.params
    )
    assert bits == [8, 12, 16, 20]
    baselines = [r for r in expansion.runs if r.params["technique"] == "baseline"]
    assert len(baselines) == 1 and "mercury.signature_bits" not in baselines[0].params


def test_composed_techniques_make_one_training() -> None:
    s = spec(techniques=[[{"name": "mercury"}, {"name": "sparsetrain", "prune_rate": 0.5}]])
    expansion = expand(s, 1000)
    labels = sorted(t.technique for t in expansion.trainings.values())
    assert labels == ["baseline", "mercury+sparsetrain"]


def test_random_sampling_is_seeded_and_respects_bounds() -> None:
    sweep = {
        "mode": "random",
        "samples": 25,
        "seed": 7,
        "parameters": {
            "training.learning_rate": {"low": 1e-3, "high": 1e-1, "log": True},
            "accelerator.rows": {"values": [8, 16]},
        },
    }
    first, second = sweep_points(spec(sweep=sweep)), sweep_points(spec(sweep=sweep))
    assert first == second and len(first) == 25
    assert all(1e-3 <= p["training.learning_rate"] <= 1e-1 for p in first)
    assert {p["accelerator.rows"] for p in first} <= {8, 16}
    other = sweep_points(spec(sweep={**sweep, "seed": 8}))
    assert other != first


def test_expansion_over_the_limit_is_refused_before_expanding() -> None:
    s = spec(
        sweep={
            "parameters": {
                "accelerator.rows": {"start": 1, "stop": 1000, "step": 1},
                "accelerator.cols": {"start": 1, "stop": 1000, "step": 1},
            }
        }
    )
    assert count_runs(s) == 2_000_000
    with pytest.raises(ExpansionError, match="over the limit of 5000") as info:
        expand(s, 5000)
    assert info.value.loc == ("sweep",)


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("training.nope", "has no field 'nope'"),
        ("gpu.rows", "is not one of"),
        ("rows", "needs the form"),
        ("training.seed", "seeds"),
    ],
)
def test_unknown_sweep_paths_are_named(path: str, message: str) -> None:
    with pytest.raises(ExpansionError, match=message) as info:
        expand(spec(sweep={"parameters": {path: {"values": [1]}}}), 1000)
    assert info.value.loc == ("sweep", "parameters", path)


def test_invalid_swept_value_names_path_and_reason() -> None:
    s = spec(sweep={"parameters": {"accelerator.rows": {"values": [16, 0]}}})
    with pytest.raises(ExpansionError, match="greater than or equal to 1") as info:
        expand(s, 1000)
    assert info.value.loc == ("sweep", "parameters", "accelerator.rows")


def test_grid_and_interval_forms_are_checked() -> None:
    with pytest.raises(ValueError, match="mode 'random'"):
        spec(sweep={"parameters": {"training.learning_rate": {"low": 0.1, "high": 0.2}}})
    with pytest.raises(ValueError, match="exactly one of"):
        spec(sweep={"parameters": {"training.epochs": {"values": [1], "start": 1}}})


def test_same_baseline_hardware_adds_a_zero_skipping_baseline_per_accelerator() -> None:
    dense = expand(spec(accelerators=["edge", "tpu-like"]), 1000)
    same = expand(spec(accelerators=["edge", "tpu-like"], baseline_hardware="same"), 1000)
    assert len(same.trainings) == len(dense.trainings) == 2  # the baseline still trains once
    assert count_runs(spec(accelerators=["edge"], baseline_hardware="same")) == 3
    by_kind: dict[tuple[str, str], list] = {}
    for run in same.runs:
        kind = "baseline" if run.params["technique"] == "baseline" else "technique"
        by_kind.setdefault((kind, run.baseline_hardware), []).append(run)
    assert {key: len(runs) for key, runs in by_kind.items()} == {
        ("baseline", "dense"): 2,
        ("baseline", "same"): 2,
        ("technique", "same"): 2,
    }
    for run in by_kind[("baseline", "same")]:
        hardware = run.accelerator_config
        assert hardware["zero_skipping"]["enabled"]  # both presets can skip zeros
        assert not hardware["mcache"]["enabled"]
        assert not hardware["gradient_predictor"]["enabled"]
    for run in by_kind[("baseline", "dense")]:
        assert not run.accelerator_config["zero_skipping"]["enabled"]
    assert all(run.baseline_hardware == "dense" for run in dense.runs)


def test_same_baseline_keeps_zero_skipping_off_where_the_accelerator_has_none() -> None:
    plain = {"name": "plain", "zero_skipping": {"enabled": False}}
    expansion = expand(spec(accelerators=[plain], baseline_hardware="same"), 1000)
    baselines = [r for r in expansion.runs if r.params["technique"] == "baseline"]
    assert sorted(r.baseline_hardware for r in baselines) == ["dense", "same"]
    assert all(not r.accelerator_config["zero_skipping"]["enabled"] for r in baselines)


def test_recipe_values_are_resolved_and_stored_but_never_override_the_user() -> None:
    from backend.specs.recipes import RECIPE_FIELDS, recipe_for

    s = spec(
        training={"model": "vgg-small", "dataset": "mnist", "weight_decay": 0.0},
        sweep={"parameters": {"training.learning_rate": {"values": [0.01, 0.2]}}},
    )
    expansion = expand(s, 1000)
    recipe = recipe_for("vgg-small", "mnist")
    for training in expansion.trainings.values():
        config = training.training_config
        assert all(config[name] is not None for name in RECIPE_FIELDS)
        assert config["weight_decay"] == 0.0  # set by the user
        assert config["learning_rate"] in (0.01, 0.2)  # swept
        assert config["lr_schedule"] == recipe.lr_schedule
        assert config["bn_recalibration_images"] == recipe.bn_recalibration_images
        assert config["epochs"] == recipe.epochs == 3
    digits = expand(spec(training={"model": "lenet5", "dataset": "digits"}), 1000)
    assert {t.training_config["epochs"] for t in digits.trainings.values()} == {20}
    # Resolution is idempotent: a resolved spec expands to the same trainings (same keys).
    resolved = next(iter(digits.trainings.values())).training_config
    again = expand(spec(training={**resolved}), 1000)
    assert set(again.trainings) == set(digits.trainings)
