"""Orrery's training engine: train small DNNs for real with MERCURY, ADA-GP and SparseTrain,
measure what each technique did, and hand the simulator the resulting workload."""

from backend.training.dense import dense_workload
from backend.training.engine import run_training
from backend.training.errors import DatasetUnavailable, TrainingCancelled
from backend.training.results import EpochMetrics, Progress, TrainingResult

__all__ = [
    "DatasetUnavailable",
    "EpochMetrics",
    "Progress",
    "TrainingCancelled",
    "TrainingResult",
    "dense_workload",
    "run_training",
]
