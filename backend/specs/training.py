"""What a training is: the model, the data and the optimiser.

Shared by the API (validation, OpenAPI docs), the CLI and the training engine
(backend/training). Each technique's knobs live in its own folder
(backend/techniques/NAME/params.py), built on `Spec`;
the technique table (backend/specs/techniques.py) makes the spec's union of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from backend.specs.recipes import LrSchedule
from backend.specs.titles import field_title

ModelName = Literal["mlp", "lenet5", "vgg-small", "resnet8", "resnet20", "transformer-tiny"]
DatasetName = Literal["digits", "mnist", "fashion-mnist", "idx-dir", "cifar10-dir"]
MODEL_NAMES: tuple[str, ...] = ModelName.__args__  # type: ignore[attr-defined]
DATASET_NAMES: tuple[str, ...] = DatasetName.__args__  # type: ignore[attr-defined]


class Spec(BaseModel):
    """A part of a spec: unknown fields refused, values frozen once validated."""

    model_config = ConfigDict(extra="forbid", frozen=True, field_title_generator=field_title)


class TrainingConfig(Spec):
    """One training: which network learns which data, and how.

    Fields left at None take the model's and data set's recipe (backend/specs/recipes.py),
    resolved when an experiment expands, so stored configs hold concrete values."""

    model: ModelName = Field("lenet5", description="network from the model zoo")
    dataset: DatasetName = Field("digits", description="data set to train and test on")
    dataset_path: str | None = Field(
        None,
        description="folder of the data set, required for 'idx-dir' and 'cifar10-dir'; it must "
        "lie inside the server's data root (a relative path is taken from there)",
    )
    width: int = Field(16, ge=1, le=512, description="base channel width for the CNNs")
    epochs: int | None = Field(
        None, ge=1, le=200, description="passes over the training set (None: the recipe's)"
    )
    batch_size: int = Field(64, ge=1, le=4096, description="mini-batch size")
    optimizer: Literal["sgd", "adam"] = Field("sgd", description="weight optimiser")
    learning_rate: float | None = Field(
        None, gt=0, le=10, description="optimiser (peak) learning rate (None: the recipe's)"
    )
    momentum: float = Field(0.9, ge=0, lt=1, description="SGD momentum")
    weight_decay: float | None = Field(
        None, ge=0, le=1, description="L2 weight decay (None: the recipe's)"
    )
    lr_schedule: LrSchedule | None = Field(
        None,
        description="'cosine': linear warm-up, then cosine decay to zero at the last batch; "
        "'constant': the learning rate throughout (None: the recipe's)",
    )
    warmup_fraction: float | None = Field(
        None, ge=0, lt=1, description="share of all batches in linear warm-up (None: the recipe's)"
    )
    bn_recalibration_images: int | None = Field(
        None,
        ge=0,
        le=1_000_000,
        description="training images over which BatchNorm statistics are recomputed before each "
        "evaluation, 0: keep the running averages of training (None: the recipe's)",
    )
    train_samples: int | None = Field(
        None, ge=1, description="use only the first N training images (None: all)"
    )
    test_samples: int | None = Field(
        None, ge=1, description="use only the first N test images (None: all)"
    )
    seed: int = Field(0, ge=0, le=2**31 - 1, description="seed for weights, data order and noise")

    @model_validator(mode="after")
    def _path_for_folder_datasets(self) -> TrainingConfig:
        if self.dataset in ("idx-dir", "cifar10-dir") and not self.dataset_path:
            raise ValueError(f"dataset_path is required for dataset '{self.dataset}'")
        return self


def dataset_folder(path: str, data_root: Path) -> Path:
    """The folder a `dataset_path` names, symbolic links resolved; ValueError unless it lies
    inside `data_root`. Checked when a spec is submitted and again where the data is read, so
    a training never opens (nor tells the existence of) anything else on the server."""
    root = data_root.resolve()
    if "\x00" in path:
        raise ValueError("dataset_path must not contain a NUL character")
    folder = (root / path).resolve()  # an absolute path stays itself
    if not folder.is_relative_to(root):
        raise ValueError("dataset_path must lie inside the server's data root")
    return folder
