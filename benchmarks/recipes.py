"""Baseline test accuracy of each model's default recipe, over seeds: mean and spread.

Trains the baseline (no technique) of every measured model on every data set it fits, with the
recipe's defaults (backend/specs/recipes.py: epochs, learning-rate schedule, weight decay,
BatchNorm recalibration) at the default width and the whole data set, once per seed, and prints
a Markdown table of test accuracy: mean +- sample standard deviation over the seeds, the
largest-smallest range, and the mean wall time of one training. The recipe's target is a
standard deviation of at most 1 point.

`--set field=value` overrides a training-config field in every training (e.g.
`--set lr_schedule=constant --set bn_recalibration_images=0` for the settings before recipes),
`--train-samples`/`--test-samples` cut the data sets for a quick look.

    python benchmarks/recipes.py [--models M ...] [--datasets D ...] [--seeds 0 1 2]
                                 [--set field=value ...] [--train-samples N] [--test-samples N]
"""

from __future__ import annotations

import argparse
import statistics
import time

from pydantic import TypeAdapter

from backend.settings import get_settings
from backend.specs.recipes import MEASURED_DATASETS, MEASURED_MODELS, resolve_recipe
from backend.specs.training import TrainingConfig
from backend.techniques.baseline.params import BaselineParams
from backend.training import run_training
from worker.intra_op_threads import configure_threads

FASHION_MNIST_DIR = get_settings().fashion_mnist_dir  # as the worker reads it


def parse_override(text: str) -> tuple[str, object]:
    name, sep, raw = text.partition("=")
    if not sep or name not in TrainingConfig.model_fields:
        raise SystemExit(f"--set: '{text}' must be field=value with a training-config field")
    annotation = TrainingConfig.model_fields[name].annotation
    return name, TypeAdapter(annotation).validate_strings(raw)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MEASURED_MODELS))
    parser.add_argument("--datasets", nargs="+", default=list(MEASURED_DATASETS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--set", action="append", default=[], type=parse_override)
    parser.add_argument("--train-samples", type=int)
    parser.add_argument("--test-samples", type=int)
    args = parser.parse_args()
    configure_threads()
    overrides = dict(args.set)
    print("| model | data set | epochs | lr | schedule | weight decay | BN recal. | "
          "test accuracy % (mean +- sd) | range | s/training |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for dataset in args.datasets:
        for model in args.models:
            base = TrainingConfig(
                model=model,
                dataset=dataset,
                train_samples=args.train_samples,
                test_samples=args.test_samples,
                **overrides,
            )
            config = resolve_recipe(base)
            accuracies, seconds = [], []
            for seed in args.seeds:
                started = time.perf_counter()
                result = run_training(
                    config.model_copy(update={"seed": seed}),
                    [BaselineParams()],
                    fashion_mnist_dir=FASHION_MNIST_DIR,
                )
                seconds.append(time.perf_counter() - started)
                accuracies.append(100 * result.test_accuracy)
            spread = statistics.stdev(accuracies) if len(accuracies) > 1 else 0.0
            print(
                f"| {model} | {dataset} | {config.epochs} | {config.learning_rate:g} | "
                f"{config.lr_schedule} | {config.weight_decay:g} | "
                f"{config.bn_recalibration_images} | "
                f"{statistics.mean(accuracies):.2f} +- {spread:.2f} | "
                f"{min(accuracies):.1f}-{max(accuracies):.1f} | "
                f"{statistics.mean(seconds):.0f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
