"""MERCURY's signature length and centring, measured: hit rate and accuracy per setting.

For each miniature (LeNet-5 on MNIST, and the wider VGG-small on MNIST) trains the baseline and
MERCURY at every (signature_bits, centre_inputs) setting, once per seed, with the recipe's
optimisation settings and MERCURY's other defaults (classifier excluded, adaptive signature
length, set-associative MCACHE). Prints per setting the test accuracy (mean +- sd over seeds),
the accuracy change against the same seed's baseline (mean and range), and the hit rate (share
of FWD rows reused, over all reusing layers) in the first and the last epoch, with the last
epoch's per-layer hit rates. MERCURY's defaults are chosen among the settings whose mean
accuracy change stays within 1 point on every miniature measured (see
backend/techniques/mercury/training.py for the figures and the choice).

    python benchmarks/mercury_defaults.py [--seeds 0 1 2] [--bits 16 24 32]
        [--only lenet5|vgg-small] [--train-samples N] [--test-samples N]
"""

from __future__ import annotations

import argparse
import statistics

from backend.specs.training import TrainingConfig
from backend.techniques.baseline.params import BaselineParams
from backend.techniques.mercury.params import MercuryParams
from backend.training import run_training
from worker.intra_op_threads import configure_threads

MINIATURES = {
    "lenet5": TrainingConfig(model="lenet5", dataset="mnist"),
    "vgg-small": TrainingConfig(model="vgg-small", dataset="mnist", width=32),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--bits", nargs="+", type=int, default=[16, 24, 32])
    parser.add_argument("--centre", nargs="+", choices=["on", "off"], default=["on", "off"])
    parser.add_argument("--only", nargs="+", choices=list(MINIATURES), default=list(MINIATURES))
    parser.add_argument("--train-samples", type=int, default=10_000)
    parser.add_argument("--test-samples", type=int, default=5_000)
    args = parser.parse_args()
    configure_threads()
    for name in args.only:
        config = MINIATURES[name].model_copy(
            update={"train_samples": args.train_samples, "test_samples": args.test_samples}
        )
        print(f"\n{name} (width {config.width}) on {config.dataset}: "
              f"{args.train_samples} training / {args.test_samples} test images, "
              f"seeds {args.seeds}")  # fmt: skip
        baseline = {
            seed: 100
            * run_training(
                config.model_copy(update={"seed": seed}), [BaselineParams()]
            ).test_accuracy
            for seed in args.seeds
        }
        print(f"baseline: {statistics.mean(baseline.values()):.2f} +- "
              f"{statistics.stdev(baseline.values()):.2f} %")  # fmt: skip
        print("| bits | centred | accuracy % | delta (range) | hit rate first / last epoch | "
              "last epoch per layer |")  # fmt: skip
        print("| --- | --- | --- | --- | --- | --- |")
        for bits in args.bits:
            for centre in args.centre:
                params = MercuryParams(
                    signature_bits=bits, max_bits=max(bits, 32), centre_inputs=centre == "on"
                )
                accuracy, first, last, layers = {}, [], [], {}
                for seed in args.seeds:
                    result = run_training(config.model_copy(update={"seed": seed}), [params])
                    accuracy[seed] = 100 * result.test_accuracy
                    first.append(result.epochs[0].figures.get("hit_rate", 0.0))
                    last.append(result.epochs[-1].figures.get("hit_rate", 0.0))
                    for layer, figures in result.epochs[-1].per_layer.items():
                        if "hit_rate" in figures:
                            layers.setdefault(layer, []).append(figures["hit_rate"])
                deltas = [accuracy[s] - baseline[s] for s in args.seeds]
                per_layer = ", ".join(f"{k} {statistics.mean(v):.2f}" for k, v in layers.items())
                print(
                    f"| {bits} | {centre} | {statistics.mean(accuracy.values()):.2f} +- "
                    f"{statistics.stdev(accuracy.values()):.2f} | "
                    f"{statistics.mean(deltas):+.2f} ({min(deltas):+.1f}..{max(deltas):+.1f}) | "
                    f"{statistics.mean(first):.3f} / {statistics.mean(last):.3f} | {per_layer} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
