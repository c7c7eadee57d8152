"""ADA-GP's predictor designs side by side: `direct` (the paper's: a layer's weight gradient
predicted from its output alone), `feedback` (the current default) and two controls, each under
the same adaptive schedule, on every preset.

Designs (`--designs`, all others at their defaults, backend/techniques/adagp/params.py):
- `direct`: predictor 'direct' (backend/techniques/adagp/direct.py);
- `feedback`: predictor 'feedback', the default;
- `none`: predictor 'none', a zero gradient (the schedule measures its cosine as 0, so GP acts
  only where the previous BP gradient's reference is not positive);
- `history`: predictor 'history' with history_momentum 0, i.e. the previous BP batch's true
  gradient reused (its predicted cosine equals the reference).

Models: LeNet-5 on MNIST at the ADA-GP miniature's size (the training section of
backend/techniques/adagp/miniature.yaml: 12,000 images, 5,000 test images, 6 epochs) and ResNet-8
(width 8, BatchNorm) on 2,000 Fashion-MNIST images, 1,000 test images, 10 epochs (the sizes of
benchmarks/adagp_frontier.py). Each training runs on one intra-op thread. Printed per model and
design: GP fraction (GP batches / all batches, warm-up included, mean over seeds), the accuracy
change to the baseline paired by seed in points (mean and 95% interval, Student's t), and per
preset the simulated speedup (baseline cycles / design cycles) and energy ratio (design /
baseline), means over seeds with the speedup's 95% interval.

    python benchmarks/adagp_direct.py --seeds 100 101 102          # pilot
    python benchmarks/adagp_direct.py --seeds 0 1 2                # evaluation
        [--models lenet5 resnet8] [--designs direct feedback none history] [--epochs E]
        [--train-samples N] [--test-samples N] [--warmup-epochs W] [--save FILE]

Rule for the default design, written before any evaluation seed ran: on the pilot seeds
100-102, the candidates are `direct` and `feedback` (the controls are not candidates); a
candidate qualifies when its accuracy change's 95% interval lies above -1 point on both models;
of the qualifying ones the default is the one with the largest simulated speedup on adagp-like
(mean over the two models of the seed-mean speedups); a difference under 0.02x is a tie, and a
tie goes to the simpler design, `direct` (no labels, no dW product on the array, no backward on
GP batches). When neither qualifies `feedback` stays. The evaluation seeds 0-2 then report the
chosen default and the controls; a control that qualifies with a larger speedup than the chosen
design is reported as such (the predictor adds nothing there) and the choice is the lead's.
Nothing is tuned to a paper's figure.

Measured 2026-12-04 (the four commands above: LeNet-5 with `--designs direct feedback none
history`, ResNet-8 with `--designs direct feedback`; GP fraction, accuracy change in points
paired by seed with its 95% interval, speedup on adagp-like and eyeriss-like, means over seeds):

    pilot seeds 100-102         GP frac  delta pts        adagp-like  eyeriss-like
    LeNet-5   direct            0.030    +0.05 +- 0.15    0.885x      0.944x
              feedback          0.289    +0.07 +- 0.17    0.720x      0.765x
              none (control)    0.027    +0.01 +- 0.15    1.010x      1.015x
              history (control) 0.045    -0.01 +- 0.06    1.016x      1.024x
    ResNet-8  direct            0.000    +0.00 +- 0.00    0.990x      0.995x
              feedback          0.194    -0.83 +- 1.25    0.641x      0.689x
    evaluation seeds 0-2
    LeNet-5   direct            0.044    -0.09 +- 0.27    0.892x      0.952x
              feedback          0.292    -0.07 +- 0.16    0.720x      0.765x
              none (control)    0.033    -0.01 +- 0.11    1.013x      1.020x
              history (control) 0.030    -0.02 +- 0.10    1.008x      1.013x
    ResNet-8  direct            0.000    +0.00 +- 0.00    0.990x      0.995x
              feedback          0.165    -0.67 +- 1.27    0.633x      0.681x

The rule on the pilot seeds: `direct` qualifies on both models; `feedback` does not (its
ResNet-8 interval reaches -2.08 points). So `direct` became the default. What the figures say:
no design gains. `direct`'s predictions rarely pass the schedule's cosine threshold, so GP
acts on 3-4% of LeNet-5's batches and on none of ResNet-8's, and each batch pays the
predictor's forward; `feedback` acts on 17-29% of the batches but costs more than the
BWD-DATA it skips. Both controls, which predict nothing, qualify with a larger speedup than
`direct` (1.01x): the predictor adds nothing at these sizes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import yaml
from pydantic import BaseModel
from scipy import stats

from backend.settings import get_settings
from backend.sim.simulate import simulate
from backend.sim.workload import TrainingPass, Workload
from backend.specs.accelerator import PRESETS
from backend.specs.training import TrainingConfig
from backend.techniques.adagp.params import AdaGPParams
from backend.techniques.baseline.params import BaselineParams
from backend.training import run_training

FASHION_MNIST_DIR = get_settings().fashion_mnist_dir  # as the worker reads it
MINIATURE = Path(__file__).resolve().parents[1] / "backend/techniques/adagp/miniature.yaml"

DESIGNS: dict[str, dict[str, object]] = {
    "direct": {"predictor": "direct"},
    "feedback": {"predictor": "feedback"},
    "none": {"predictor": "none"},
    "history": {"predictor": "history", "history_momentum": 0.0},
}
MODELS = ("lenet5", "resnet8")


def model_config(model: str, seed: int, args: argparse.Namespace) -> TrainingConfig:
    if model == "lenet5":
        training = yaml.safe_load(MINIATURE.read_text())["training"]
    else:
        training = dict(model="resnet8", dataset="fashion-mnist", width=8, epochs=10,
                        batch_size=64, train_samples=2000, test_samples=1000)  # fmt: skip
    for key, value in (
        ("epochs", args.epochs),
        ("train_samples", args.train_samples),
        ("test_samples", args.test_samples),
    ):
        if value is not None:
            training[key] = value
    return TrainingConfig(**training, seed=seed)


def technique(design: str, warmup_epochs: int | None) -> list[BaseModel]:
    if design == "baseline":
        return [BaselineParams()]
    knobs = dict(DESIGNS[design])
    if warmup_epochs is not None:
        knobs["warmup_epochs"] = warmup_epochs
    return [AdaGPParams.model_validate(knobs)]


@dataclass
class Outcome:
    accuracy: float
    gp_fraction: float
    cycles: dict[str, float] = field(default_factory=dict)  # per preset
    energy: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0


def gp_fraction(workload: Workload) -> float:
    """GP batches / all batches: the batches on which no BWD-DATA ran."""
    data = [op for op in workload.ops if op.pass_ == TrainingPass.BWD_DATA and op.role == "compute"]
    return 1.0 - data[0].executions / workload.iterations if data else 0.0


def train(config: TrainingConfig, params: list[BaseModel]) -> Outcome:
    started = time.perf_counter()
    result = run_training(config, params, fashion_mnist_dir=FASHION_MNIST_DIR)
    outcome = Outcome(result.test_accuracy, gp_fraction(result.workload))
    for preset, accelerator in PRESETS.items():
        totals = simulate(result.workload, accelerator).totals
        outcome.cycles[preset], outcome.energy[preset] = totals.total_cycles, totals.energy_pj
    outcome.seconds = time.perf_counter() - started
    return outcome


def mean_ci(values: list[float]) -> tuple[float, float]:
    """Mean and 95% half-width (Student's t, n-1 degrees of freedom; nan for one value)."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, float("nan")
    return mean, stats.t.ppf(0.975, len(values) - 1) * statistics.stdev(values) / len(values) ** 0.5


def report(model: str, outcomes: dict[str, dict[int, Outcome]]) -> None:
    base = outcomes["baseline"]
    seeds = sorted(base)
    accuracy = statistics.fmean(base[s].accuracy for s in seeds)
    print(f"\n{model}: baseline test accuracy {100 * accuracy:.2f} % (mean over seeds {seeds})")
    print(f"  {'design':<10}{'GP frac':>8}{'delta pts (95% CI)':>21}  "
          "per preset: speedup (95% CI) / energy ratio")  # fmt: skip
    for design, runs in outcomes.items():
        if design == "baseline":
            continue
        fraction = statistics.fmean(runs[s].gp_fraction for s in seeds)
        delta, delta_ci = mean_ci([100 * (runs[s].accuracy - base[s].accuracy) for s in seeds])
        cells = []
        for preset in PRESETS:
            speedup, speedup_ci = mean_ci(
                [base[s].cycles[preset] / runs[s].cycles[preset] for s in seeds]
            )
            energy = statistics.fmean(
                runs[s].energy[preset] / base[s].energy[preset] for s in seeds
            )
            cells.append(f"{preset} {speedup:.3f}x +-{speedup_ci:.3f} / {energy:.3f}")
        print(f"  {design:<10}{fraction:>8.3f}{delta:>+12.2f} +-{delta_ci:>5.2f}  "
              + ", ".join(cells))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--seeds", nargs="+", type=int, required=True)
    parser.add_argument("--designs", nargs="+", choices=list(DESIGNS), default=list(DESIGNS))
    parser.add_argument("--epochs", type=int, default=None, help="per model if unset")
    parser.add_argument("--train-samples", type=int, default=None, help="per model if unset")
    parser.add_argument("--test-samples", type=int, default=None, help="per model if unset")
    parser.add_argument(
        "--warmup-epochs", type=int, default=None, help="override ADA-GP's (smoke runs only)"
    )
    parser.add_argument("--save", help="append every run's outcome as JSON lines to this file")
    args = parser.parse_args()
    torch.set_num_threads(1)
    for model in args.models:
        outcomes: dict[str, dict[int, Outcome]] = {d: {} for d in ["baseline", *args.designs]}
        for seed in args.seeds:
            config = model_config(model, seed, args)
            if seed == args.seeds[0]:
                print(f"\n{model} on {config.dataset}: {config.train_samples} images, "
                      f"{config.test_samples} test images, {config.epochs} epochs, "
                      f"seeds {args.seeds}", flush=True)  # fmt: skip
            for design in outcomes:
                outcome = train(config, technique(design, args.warmup_epochs))
                outcomes[design][seed] = outcome
                line = f"acc {outcome.accuracy:.4f} GP {outcome.gp_fraction:.3f}"
                print(f"  seed {seed} {design:<10} {line} ({outcome.seconds:.0f} s)", flush=True)
                if args.save:
                    with open(args.save, "a") as out:
                        row = {"model": model, "seed": seed, "design": design}
                        row |= {"config": config.model_dump(mode="json"), **vars(outcome)}
                        out.write(json.dumps(row) + "\n")
        report(model, outcomes)


if __name__ == "__main__":
    main()
