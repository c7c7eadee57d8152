"""SparseTrain's threshold source, measured: tau from the previous step's gradient against tau
from the gradient being pruned, and the dense baseline.

Trains LeNet-5 on MNIST once per seed with the baseline and with SparseTrain at each
`threshold_from` (its other knobs at their defaults, the recipe's optimisation settings) and
prints per setting the test accuracy (mean and 95% confidence interval over seeds, Student's t
with n-1 degrees of freedom), the accuracy change against the same seed's baseline (mean and 95%
interval), the backward-pass density (`density_bwd`, last epoch, mean over seeds) and each
seed's accuracy; then the change from "current" to "previous", paired by seed. Each training
runs on one intra-op thread (the machine is shared).

    python benchmarks/sparsetrain_threshold.py [--seeds 0 1 2] [--epochs 3]
        [--train-samples 3000] [--test-samples 2000]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from pydantic import BaseModel

from backend.analysis.groups import Estimate, estimate
from backend.specs.training import TrainingConfig
from backend.techniques.baseline.params import BaselineParams
from backend.techniques.sparsetrain.params import SparseTrainParams
from backend.training import run_training

SETTINGS: dict[str, BaseModel] = {
    "baseline": BaselineParams(),
    "sparsetrain, tau from previous": SparseTrainParams(threshold_from="previous"),
    "sparsetrain, tau from current": SparseTrainParams(threshold_from="current"),
}


def interval(values: list[float], sign: str = "") -> str:
    """Mean [95% CI], or the mean alone for one value."""
    found = estimate(values)
    assert isinstance(found, Estimate)
    mean = f"{found.mean:{sign}.2f}"
    if found.ci_low is None or found.ci_high is None:
        return mean
    return f"{mean} [{found.ci_low:{sign}.2f}, {found.ci_high:{sign}.2f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--train-samples", type=int, default=3000)
    parser.add_argument("--test-samples", type=int, default=2000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    config = TrainingConfig(
        model="lenet5",
        dataset="mnist",
        epochs=args.epochs,
        train_samples=args.train_samples,
        test_samples=args.test_samples,
    )
    started = time.perf_counter()
    accuracy: dict[str, dict[int, float]] = {name: {} for name in SETTINGS}
    density: dict[str, list[float]] = {name: [] for name in SETTINGS}
    for seed in args.seeds:
        for name, params in SETTINGS.items():
            result = run_training(config.model_copy(update={"seed": seed}), [params])
            accuracy[name][seed] = 100 * result.test_accuracy
            density[name].append(result.epochs[-1].figures["density_bwd"])
    print(
        f"LeNet-5 on MNIST: {args.train_samples} training / {args.test_samples} test images, "
        f"{args.epochs} epochs, seeds {args.seeds} ({time.perf_counter() - started:.0f} s)"
    )
    print(
        "| setting | test accuracy % (95% CI) | change, points (95% CI) | density_bwd | "
        "accuracy per seed |"
    )
    print("| --- | --- | --- | --- | --- |")
    base = accuracy["baseline"]
    for name in SETTINGS:
        values = [accuracy[name][seed] for seed in args.seeds]
        deltas = [accuracy[name][seed] - base[seed] for seed in args.seeds]
        change = "-" if name == "baseline" else interval(deltas, "+")
        per_seed = " ".join(f"{value:.1f}" for value in values)
        print(
            f"| {name} | {interval(values)} | {change} | "
            f"{statistics.fmean(density[name]):.3f} | {per_seed} |"
        )
    previous = accuracy["sparsetrain, tau from previous"]
    current = accuracy["sparsetrain, tau from current"]
    paired = [previous[seed] - current[seed] for seed in args.seeds]
    print(f"previous - current, paired by seed: {interval(paired, '+')} points")


if __name__ == "__main__":
    main()
