"""ADA-GP's predictors against their two controls, at the same forced schedules, paired by seed.

A predictor is worth its cost only if the accuracy it keeps lies above what skipping the
backward pass keeps without predicting anything, and it can be read only where that gap is
wide. So every predictor trains at the same forced BP:GP schedules beside two controls:

- `none`: GP batches step on a zero gradient (the optimiser's momentum still moves weights):
  the floor a predictor must beat;
- `oracle`: GP batches step on the exact backprop gradient of every conv/linear layer, charged
  as GP batches: a perfect, free predictor, the ceiling (on a model without BatchNorm, such as
  LeNet-5, it trains exactly as the baseline does).

The predictors (`direct`, the default; `feedback`; `history`) run with every knob at its default
(backend/techniques/adagp/params.py) but the schedule. A forced schedule: one warm-up epoch of
backprop, then from the first batch after it cycles of 1 BP batch and `g` GP batches (`1:g`,
`--ratios`), whatever the predictions' cosines (plateau_improvement 1, gp_batches =
min_gp_batches = max_gp_batches = g): the GP fraction is the schedule's, the same for every
predictor, so only what a GP batch steps on differs. Each training runs on one intra-op thread.

Printed per schedule and predictor, over the seeds (means, 95% Student-t intervals of paired
differences, n - 1 degrees of freedom): test accuracy; its difference to `none` (run minus the
same seed's `none` run) and to `oracle`; and where it sits between them, the share of the
oracle - none gap it closes (mean difference to `none` over the mean gap: 0 is `none`, 1 is
`oracle`). First, the gap itself, oracle - none, with its interval: where that interval reaches
0 the workload cannot tell a useful predictor from none, and the rows below it say nothing.

    python benchmarks/adagp_controls.py --seeds 0 1 2 3 4
        [--model lenet5] [--dataset fashion-mnist] [--train-samples 6000] [--test-samples 10000]
        [--epochs 4] [--ratios 1:1 1:3] [--predictors direct feedback history none oracle]
        [--save FILE]

The training knobs other than these are the ADA-GP miniature's (its `training` section,
backend/techniques/adagp/miniature.yaml: SGD, rate 0.05, momentum 0.9, cosine schedule, batch
64). The measured table and its exact command are in docs/papers.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
import yaml

from backend.analysis.groups import Estimate, estimate
from backend.settings import get_settings
from backend.specs.training import TrainingConfig
from backend.techniques.adagp.params import AdaGPParams
from backend.training import run_training

FASHION_MNIST_DIR = get_settings().fashion_mnist_dir  # as the worker reads it
MINIATURE = Path(__file__).resolve().parents[1] / "backend/techniques/adagp/miniature.yaml"
PREDICTORS = ("direct", "feedback", "history", "none", "oracle")


def forced(predictor: str, gp_batches: int) -> AdaGPParams:
    """The predictor at a forced 1 BP : `gp_batches` GP schedule after one warm-up epoch."""
    return AdaGPParams(
        predictor=predictor,
        warmup_epochs=1,
        plateau_improvement=1.0,
        bp_batches=1,
        gp_batches=gp_batches,
        min_gp_batches=gp_batches,
        max_gp_batches=gp_batches,
    )


def ratio(text: str) -> int:
    """'1:3' -> 3 GP batches per BP batch."""
    bp, _, gp = text.partition(":")
    if bp != "1" or not gp.isdigit() or int(gp) < 1:
        raise argparse.ArgumentTypeError(f"a schedule is 1:g with g >= 1, not {text!r}")
    return int(gp)


def interval(found: Estimate | None, scale: float = 100.0) -> str:
    """'mean [low, high]' in points (the fractions times `scale`)."""
    if found is None:
        return "-"
    if found.ci_low is None or found.ci_high is None:
        return f"{scale * found.mean:+6.2f}"
    return (
        f"{scale * found.mean:+6.2f} [{scale * found.ci_low:+6.2f}, {scale * found.ci_high:+6.2f}]"
    )


def report(schedule: str, accuracy: dict[str, dict[int, float]]) -> None:
    """The schedule's table: the gap, then each predictor between the controls."""
    seeds = sorted(set.intersection(*(set(runs) for runs in accuracy.values())))
    floor, ceiling = accuracy.get("none"), accuracy.get("oracle")
    print(f"\nschedule {schedule}, seeds {seeds} (points; paired differences, 95% intervals)")
    gap = None
    if floor is not None and ceiling is not None:
        gap = estimate([ceiling[s] - floor[s] for s in seeds])
        assert gap is not None
        resolved = gap.ci_low is not None and gap.ci_low > 0
        print(f"  oracle - none gap {interval(gap)}: "
              + ("resolved (its interval lies above 0)" if resolved
                 else "NOT resolved: this workload cannot tell a predictor from none"))  # fmt: skip
    print(f"  {'predictor':<10}{'accuracy %':>12}  {'minus none':>25}  {'minus oracle':>25}"
          "  share of the gap closed")  # fmt: skip
    for predictor, runs in accuracy.items():
        mean = statistics.fmean(100 * runs[s] for s in seeds)
        over_floor = estimate([runs[s] - floor[s] for s in seeds]) if floor else None
        under_ceiling = estimate([runs[s] - ceiling[s] for s in seeds]) if ceiling else None
        share = "-"
        if over_floor is not None and gap is not None and gap.mean != 0:
            share = f"{over_floor.mean / gap.mean:+.2f}"
        print(f"  {predictor:<10}{mean:>12.2f}  {interval(over_floor):>25}  "
              f"{interval(under_ceiling):>25}  {share}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", nargs="+", type=int, required=True)
    parser.add_argument("--model", default="lenet5")
    parser.add_argument("--dataset", default="fashion-mnist")
    parser.add_argument("--width", type=int, default=None, help="the miniature's if unset")
    parser.add_argument("--train-samples", type=int, default=6000)
    parser.add_argument("--test-samples", type=int, default=10000)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--ratios", nargs="+", type=ratio, default=[1, 3], metavar="1:G")
    parser.add_argument("--predictors", nargs="+", choices=PREDICTORS, default=list(PREDICTORS))
    parser.add_argument("--save", help="append every run's outcome as JSON lines to this file")
    args = parser.parse_args()
    if len(args.seeds) < 2:
        parser.error("--seeds: at least 2, for an interval")
    torch.set_num_threads(1)
    training = yaml.safe_load(MINIATURE.read_text())["training"]
    training |= dict(model=args.model, dataset=args.dataset, epochs=args.epochs,
                     train_samples=args.train_samples, test_samples=args.test_samples)  # fmt: skip
    if args.width is not None:
        training["width"] = args.width
    print(f"{args.model} on {args.dataset}: {args.train_samples} images, {args.test_samples} "
          f"test images, {args.epochs} epochs (1 warm-up), seeds {args.seeds}")  # fmt: skip
    tables: dict[str, dict[str, dict[int, float]]] = {}
    for gp in args.ratios:
        schedule = f"1:{gp}"
        tables[schedule] = {p: {} for p in args.predictors}
        for seed in args.seeds:
            config = TrainingConfig(**training, seed=seed)
            for predictor in args.predictors:
                started = time.perf_counter()
                result = run_training(
                    config, [forced(predictor, gp)], fashion_mnist_dir=FASHION_MNIST_DIR
                )
                tables[schedule][predictor][seed] = result.test_accuracy
                fraction = statistics.fmean(e.figures["gp_fraction"] for e in result.epochs)
                seconds = time.perf_counter() - started
                print(f"  {schedule} seed {seed} {predictor:<9} acc {result.test_accuracy:.4f} "
                      f"GP {fraction:.3f} ({seconds:.0f} s)", flush=True)  # fmt: skip
                if args.save:
                    with open(args.save, "a") as out:
                        row = {"schedule": schedule, "seed": seed, "predictor": predictor}
                        row |= {"accuracy": result.test_accuracy, "gp_fraction": fraction}
                        row |= {"config": config.model_dump(mode="json"), "seconds": seconds}
                        out.write(json.dumps(row) + "\n")
        report(schedule, tables[schedule])


if __name__ == "__main__":
    main()
