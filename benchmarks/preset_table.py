"""Speedup and energy ratio of each technique on each accelerator preset, against the dense
baseline, next to the ideal bound that the measured workload allows.

Trains each model once per technique (seed 0, real data) and simulates every stored workload on
every preset: a technique's run gets the preset's extensions its technique uses, the baseline
none (as an experiment's runs do with `baseline_hardware: dense`). Nothing is tuned.

The ideal bound is what the workload would give if cycles were proportional to the MACs that
must be done and memory were free: dense MACs of the baseline over the technique's MACs left
after its own savings (MERCURY's reused rows and folded reduction, ADA-GP's skipped passes) and,
where the preset skips zeros, after skipping the zeros of the sparser operand of every GEMM
(measured densities); overhead GEMMs (signatures, predictors) are not counted. It bounds from
above what any of these arrays could reach on this workload; the gap to the simulated speedup is
the price of the array's mapping, its fills, its extensions and its memory.

    python benchmarks/preset_table.py [--models lenet5 vgg-small resnet8] [--train-samples N]
                                      [--epochs E] [--width W]
"""

from __future__ import annotations

import argparse
import time

from backend.settings import get_settings
from backend.sim import Workload, simulate
from backend.specs.accelerator import PRESETS, AcceleratorConfig
from backend.specs.techniques import accelerator_for, techniques_of
from backend.specs.training import TrainingConfig
from backend.techniques.adagp.params import AdaGPParams
from backend.techniques.baseline.params import BaselineParams
from backend.techniques.mercury.params import MercuryParams
from backend.techniques.sparsetrain.params import SparseTrainParams
from backend.training import run_training
from worker.intra_op_threads import configure_threads

FASHION_MNIST_DIR = get_settings().fashion_mnist_dir  # as the worker reads it

DATASETS = {"lenet5": "mnist", "mlp": "digits", "vgg-small": "fashion-mnist",
            "resnet8": "fashion-mnist"}  # fmt: skip
TECHNIQUES = {
    "mercury": MercuryParams(),
    "sparsetrain": SparseTrainParams(),
    "adagp": AdaGPParams(),
}


def ideal_bound(baseline: Workload, workload: Workload, accel: AcceleratorConfig) -> float:
    """Dense MACs over the MACs the technique must still do on this hardware (see above)."""
    dense = sum(op.m * op.k * op.n * op.groups * workload.iterations
                for op in baseline.ops if op.role == "compute")  # fmt: skip
    left = 0.0
    for op in workload.ops:
        if op.role != "compute":
            continue
        m, k = op.m, op.k
        if accel.mcache.enabled:
            m, k = m * (1 - op.reused_row_fraction), k * op.folded_k_fraction
        share = min(op.density_a, op.density_b) if accel.zero_skipping.enabled else 1.0
        left += m * k * op.n * op.groups * op.executions * share
    return dense / left if left else float("inf")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["lenet5", "vgg-small", "resnet8"])
    parser.add_argument("--train-samples", type=int, default=4000)
    parser.add_argument("--test-samples", type=int, default=2000)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--width", type=int, default=16)
    args = parser.parse_args()
    configure_threads()
    print(f"seed 0, {args.train_samples} training images, {args.epochs} epochs, width "
          f"{args.width}; presets: {', '.join(PRESETS)}")  # fmt: skip
    for model in args.models:
        config = TrainingConfig(
            model=model, dataset=DATASETS[model], width=args.width, epochs=args.epochs,
            train_samples=args.train_samples, test_samples=args.test_samples, seed=0,
        )  # fmt: skip
        started = time.perf_counter()
        baseline = run_training(config, [BaselineParams()], fashion_mnist_dir=FASHION_MNIST_DIR)
        trained = {
            name: run_training(config, [params], fashion_mnist_dir=FASHION_MNIST_DIR)
            for name, params in TECHNIQUES.items()
        }
        print(f"\n== {model} on {config.dataset} (trained in {time.perf_counter() - started:.0f} s)"
              f"; baseline accuracy {100 * baseline.test_accuracy:.2f}%")  # fmt: skip
        header = ("technique", "preset", "speedup", "ideal bound", "energy ratio",
                  "accuracy (pt vs baseline)", "stall share")  # fmt: skip
        rows = [header]
        for name, result in trained.items():
            for preset_name, preset in PRESETS.items():
                plain = preset.with_extensions(frozenset())
                hardware = accelerator_for(preset, techniques_of(result.workload.technique))
                base = simulate(baseline.workload, plain).totals
                run = simulate(result.workload, hardware).totals
                rows.append((
                    name, preset_name,
                    f"{base.total_cycles / run.total_cycles:.3f}x",
                    f"{ideal_bound(baseline.workload, result.workload, hardware):.2f}x",
                    f"{run.energy_pj / base.energy_pj:.3f}",
                    f"{100 * result.test_accuracy:.2f} "
                    f"({100 * (result.test_accuracy - baseline.test_accuracy):+.2f})",
                    f"{run.stall_cycles / run.total_cycles:.0%}",
                ))  # fmt: skip
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        for row in rows:
            print("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))


if __name__ == "__main__":
    main()
