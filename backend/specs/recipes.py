"""Training recipes: the default optimisation settings of each zoo model on each data set.

A training config leaves a recipe field at None to mean "the recipe's value"; the expansion of an
experiment resolves it (`resolve_recipe`) before the run is stored, so a stored run's training
config holds every value it trained with and is reproducible from it. A value the user sets, or
sweeps, always wins over the recipe.

The recipe fields and why each default is what it is:

- `lr_schedule` "cosine": linear warm-up over `warmup_fraction` of all mini-batches, then a cosine
  decay to zero at the last batch. Annealing to zero is what makes the final weights (and so the
  test accuracy) stop depending on which mini-batches happened to come last; with a constant
  rate the last few steps move a BatchNorm network enough to swing test accuracy by tens of
  points between seeds. "constant" is plain SGD at `learning_rate`.
- `learning_rate`: the peak rate of SGD with momentum 0.9 at batch size 64.
- `weight_decay` 5e-4 for the convolutional networks, 1e-4 for the MLP (the usual values for
  small CNNs; the MLP has most of its weights in one wide input layer).
- `bn_recalibration_images`: before every evaluation, BatchNorm layers recompute their running
  mean and variance over this many training images with the weights as they are ("precise BN",
  Wu and Johnson 2021), so evaluation normalises with statistics of the model being evaluated,
  not an exponential average over weights that moved. The recalibration is a dense forward pass
  that is part of evaluation, which the simulated workload does not include. No effect on models
  without BatchNorm.
- `epochs`: 3 on the 60k-image data sets, 20 on digits (1,437 training images: 3 epochs there
  are 66 mini-batches, too few for any of the networks to settle).

Measured (3 seeds, `benchmarks/recipes.py`) for mlp, lenet5, vgg-small and resnet8 on digits,
MNIST and Fashion-MNIST; `resnet20` and `transformer-tiny` use the generic recipe and are not
measured. Folder data sets (`idx-dir`, `cifar10-dir`) use the 60k-image epochs.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from backend.specs.training import TrainingConfig

LrSchedule = Literal["constant", "cosine"]


@dataclass(frozen=True)
class Recipe:
    """The values a training config takes where it leaves a recipe field at None."""

    learning_rate: float = 0.05
    weight_decay: float = 5e-4
    lr_schedule: LrSchedule = "cosine"
    warmup_fraction: float = 0.05
    bn_recalibration_images: int = 2048
    epochs: int = 3


RECIPE_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Recipe))
GENERIC = Recipe()
SMALL_DATASET_EPOCHS = {"digits": 20}
MODEL_RECIPES: dict[str, Recipe] = {
    "mlp": Recipe(weight_decay=1e-4),
    "lenet5": Recipe(),
    "vgg-small": Recipe(),
    "resnet8": Recipe(),
}
MEASURED_MODELS: tuple[str, ...] = tuple(MODEL_RECIPES)
MEASURED_DATASETS: tuple[str, ...] = ("digits", "mnist", "fashion-mnist")


def recipe_for(model: str, dataset: str) -> Recipe:
    """The recipe of a model on a data set (the generic one for unmeasured models)."""
    recipe = MODEL_RECIPES.get(model, GENERIC)
    epochs = SMALL_DATASET_EPOCHS.get(dataset)
    if epochs is not None:
        return Recipe(**{**recipe.__dict__, "epochs": epochs})
    return recipe


def resolve_recipe(config: TrainingConfig) -> TrainingConfig:
    """The config with every recipe field left at None set to the recipe's value."""
    recipe = recipe_for(config.model, config.dataset)
    missing = {
        name: getattr(recipe, name) for name in RECIPE_FIELDS if getattr(config, name) is None
    }
    return config.model_copy(update=missing) if missing else config
