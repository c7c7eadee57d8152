"""What a training run reports: per-epoch metrics, progress updates and the final result."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from backend.sim.workload import Workload


@dataclass
class EpochMetrics:
    """One epoch: its losses and accuracies, and the figures measured in it, keyed as declared
    (`backend.specs.techniques.EPOCH_FIGURES`); a figure no technique of the run measures is
    absent. `per_layer` holds each layer's figures under the same keys."""

    epoch: int
    train_loss: float
    train_accuracy: float
    test_loss: float
    test_accuracy: float
    seconds: float  # wall time of the epoch's training batches (evaluation excluded)
    # wall time of the whole epoch: batches, evaluation and figures (what a time-left estimate
    # extrapolates)
    wall_seconds: float | None = None
    figures: dict[str, float] = field(default_factory=dict)
    per_layer: dict[str, dict[str, float]] = field(default_factory=dict)


@dataclass(frozen=True)
class Progress:
    fraction: float  # of all training batches, 0..1
    epoch: int
    batch: int
    metrics: dict[str, float]


@dataclass
class TrainingResult:
    epochs: list[EpochMetrics]
    workload: Workload
    seconds: float
    technique: str
    chance_accuracy: float | None = None  # 1 / classes: guessing's expected test accuracy
    environment: dict[str, Any] = field(default_factory=dict)  # engine.training_environment()

    @property
    def test_accuracy(self) -> float:
        return self.epochs[-1].test_accuracy

    @property
    def test_loss(self) -> float:
        return self.epochs[-1].test_loss

    def to_dict(self) -> dict[str, Any]:
        return {
            "technique": self.technique,
            "test_accuracy": self.test_accuracy,
            "test_loss": self.test_loss,
            "seconds": self.seconds,
            "chance_accuracy": self.chance_accuracy,
            "environment": self.environment,
            "epochs": [asdict(epoch) for epoch in self.epochs],
            "workload": self.workload.to_dict(),
        }
