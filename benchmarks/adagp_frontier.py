"""ADA-GP's frontier: GP fraction against accuracy loss, per predictor design, over seeds.

For each model (LeNet-5 on MNIST; ResNet-8 with BatchNorm on Fashion-MNIST at a small width) and
each seed, the baseline and every ADA-GP design train with the same config; printed per design:
- GP fraction: GP batches / all batches of the run, warm-up included (from the workload: BWD-DATA
  executions of a layer that has one, over the run's iterations), mean over seeds;
- test accuracy: mean +- 95% confidence half-width (Student's t, n-1 degrees of freedom);
- accuracy delta to the baseline paired by seed (mean +- 95% CI), in points;
- simulated speedup and energy ratio on the eyeriss-like preset (the baseline on the same
  preset), mean over seeds;
- the predicted-gradient cosine per layer (last epoch, mean over seeds) next to the reference
  cosine (previous BP batch's true gradient with the current one).
Target: GP fraction >= 0.3 with test accuracy within 1 point of the baseline (seed means).

The default longest GP run was chosen on pilot seed 100, the lengthen/shorten ratios on pilot
seeds 100-102 (`--seeds 100 101 102`); the reported evaluation uses seeds 0-2. Default sizes
(what the shared two-core machine allowed in the time): LeNet-5 on 6,400 MNIST images, ResNet-8
on 2,000 Fashion-MNIST images, 10 epochs each. Each training runs on one intra-op thread (on a
shared two-core machine two threads per process slow training down by an order of magnitude).

    python benchmarks/adagp_frontier.py [--quick] [--models lenet5 resnet8] [--seeds 0 1 2]
        [--designs NAME ...] [--epochs E] [--train-samples N] [--save FILE]

Measured frontier (evaluation seeds 0-2; `python benchmarks/adagp_frontier.py --models resnet8`
and `--models lenet5`, each with `--designs` naming the rows below; deltas in points, paired by
seed, mean +- 95% CI; speedup on eyeriss-like, mean over seeds):

    ResNet-8 width 8, 2,000 Fashion-MNIST images   GP frac   delta pts        speedup
    feedback (default)                             0.185     -0.57 +- 0.38    0.80x
    feedback, lengthen at 1x reference             0.308     -1.47 +- 1.00    0.85x
    feedback, plateau vs previous loss             0.292     -1.63 +- 2.14    0.84x
    feedback, no BatchNorm projection              0.042     -0.07 +- 1.00    0.85x
    none (control), 1:1 after warm-up              0.448     -3.97 +- 2.31    1.57x
    LeNet-5, 6,400 MNIST images
    feedback (default)                             0.401     +0.05 +- 0.45    0.92x
    feedback, lengthen at 1x reference             0.415     -0.13 +- 0.38    0.93x
    feedback, plateau vs previous loss             0.021     +0.00 +- 0.00    0.81x
    none (control), 1:1 after warm-up              0.450     -0.52 +- 0.50    1.45x

No design reaches GP fraction >= 0.3 within 1 point on ResNet-8: there the loss grows with the
GP fraction (3-6 points per unit of GP fraction for the feedback designs, 9 for the control),
and the default keeps accuracy by letting GP act less (0.19 against LeNet-5's 0.40). On
LeNet-5 the default meets the target. Every feedback design is slower than the baseline on
eyeriss-like: the workload charges the predictor (its e B products on every batch, its
training on BP batches, the gate and the projection), which an array without a predictor unit
runs itself; the `none` control, which predicts nothing, shows what skipping BWD-DATA alone is
worth.

The statement above is for the frontier's sizes. At the `--full` paper check's size (ResNet-8
width 16 on 20,000 Fashion-MNIST images, 10 epochs, seeds 0-2, the default design:
`python benchmarks/paper_check.py --full --only adagp`) GP acts more and keeps accuracy: GP
fraction 0.307 at -0.49 +- 0.65 points in one run, 0.284 at -0.23 +- 0.40 in another of the same
code and seeds on another machine (a training repeats bit for bit only under the same PyTorch
build, thread count and CPU, and ten epochs amplify a last-bit difference), so the target's 0.3
sits inside the run-to-run spread there.

Pilot seeds 100-102 (the designs the ratios were chosen from, lengthening at 1x the reference
unless said; `--seeds 100 101 102`; GP fraction / delta pts):
ResNet-8: lengthen at 1x 0.303 / -0.73 +- 1.23, at 2x (now the default) 0.211 / -0.33 +- 0.87,
max GP run 1 0.206 / -0.53 +- 2.91, plateau 0.1 0.274 / -0.53 +- 0.94; LeNet-5: 1x 0.418 /
-0.27 +- 0.26, 2x 0.398 / -0.15 +- 0.00, max GP run 1 0.284 / -0.20 +- 0.25, plateau 0.1 0.359 /
-0.18 +- 0.31. Before the largest-drop plateau rule, GP never opened on LeNet-5 (fraction 0.000
on every design, pilot seeds 100-101).

Why ResNet-8 lost accuracy with few GP batches (the former default, no BatchNorm projection,
plateau vs previous loss, lengthen at 1x; re-run on seeds 0-2: -1.0, -1.0 and -0.1 points at GP
fraction 0.18, 0.07 and 0.03; measured on seed 0 unless said, the GP batches' true gradients by
`benchmarks/adagp_gp_batches.py --params '{"normalized_projection": false, "plateau_reference":
"previous_loss", "lengthen_ratio": 1, "shorten_ratio": 0.5}'` [--apply true]):
- data order: a run's batch order comes from its own generator (seed + 1), so a seed's
  baseline and ADA-GP runs see the same batches; they are bit-identical up to the first GP
  batch. Scale of the noise: one skipped batch in epoch 9 moves test accuracy by -0.2, -0.3 and
  +0.2 points (seeds 0-2); the baseline's spread across seeds is 78.7, 81.3, 78.1 %;
- BatchNorm: its scale and shift get no gradient on GP batches (skipped by the optimiser: no
  momentum, no weight decay) and its running statistics update in the GP batch's forward as in
  any training-mode forward. Replacing the predicted conv/linear gradients of the GP batches by
  the true ones, BatchNorm still frozen, weight decay and momentum as they are (`--apply true`):
  78.8, 80.9, 78.1 % on seeds 0-2 against the baseline's 78.7, 81.3, 78.1 (delta -0.1 mean,
  -0.4 at worst); with BatchNorm's true gradients too (`--norm true`) the run is the baseline,
  bit for bit. Freezing BatchNorm costs at most a few tenths, the size of the noise;
- the predictions: on GP batches the convs' predicted dW had cosine 0.08-0.35 with the true
  one (classifier 0.97), calibrated norm 0.13-0.37 of the true norm, and a component along
  the layer's weights (cosine -0.007 to -0.072) that the true dW, behind BatchNorm, never has
  (0.000): the predicted output gradient ignored BatchNorm's projection. Projected as
  BatchNorm's backward projects (backend/techniques/adagp/predictors.py; the default,
  `--params '{}'`), the cosines became 0.20-0.74 and
  GP, now judged good enough by the rule, acts far more (0.31 at 1x), which costs accuracy in
  proportion: to first order a calibrated GP step at cosine c makes c^2 of a true step's
  progress.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import dataclass

import torch
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

DESIGNS: dict[str, list] = {
    "baseline": [BaselineParams()],
    "feedback (default)": [AdaGPParams()],
    "feedback, no BatchNorm projection": [AdaGPParams(normalized_projection=False)],
    "feedback, plateau vs previous loss": [AdaGPParams(plateau_reference="previous_loss")],
    "feedback, max GP run 1": [AdaGPParams(max_gp_batches=1)],
    "feedback, max GP run 4": [AdaGPParams(max_gp_batches=4)],
    "feedback, lengthen at 1x reference": [AdaGPParams(lengthen_ratio=1.0, shorten_ratio=0.5)],
    "feedback, plateau 0.1": [AdaGPParams(plateau_improvement=0.1)],
    "history (running mean)": [AdaGPParams(predictor="history")],
    "none (control), 1:1 after warm-up": [
        AdaGPParams(
            predictor="none",
            plateau_improvement=1.0,
            gp_batches=1,
            min_gp_batches=1,
            max_gp_batches=1,
        )
    ],
}
MODELS = {
    "lenet5": dict(model="lenet5", dataset="mnist"),
    "resnet8": dict(model="resnet8", dataset="fashion-mnist", width=8),
}
PRESET = "eyeriss-like"


@dataclass
class Outcome:
    accuracy: float
    gp_fraction: float
    cycles: float
    energy: float
    cosines: dict[str, tuple[float, float]]  # layer -> (predicted, reference), last epoch
    seconds: float


def gp_fraction(workload: Workload) -> float:
    """GP batches / all batches: the batches on which no BWD-DATA ran."""
    data = [op for op in workload.ops if op.pass_ == TrainingPass.BWD_DATA and op.role == "compute"]
    if not data:
        return 0.0
    return 1.0 - data[0].executions / workload.iterations


def train(config: TrainingConfig, design: str) -> Outcome:
    started = time.perf_counter()
    result = run_training(config, DESIGNS[design], fashion_mnist_dir=FASHION_MNIST_DIR)
    simulated = simulate(result.workload, PRESETS[PRESET]).totals
    last = result.epochs[-1].per_layer
    cosines = {
        layer: (figures["cosine"], figures.get("reference_cosine", float("nan")))
        for layer, figures in last.items()
        if "cosine" in figures
    }
    return Outcome(
        result.test_accuracy,
        gp_fraction(result.workload),
        simulated.total_cycles,
        simulated.energy_pj,
        cosines,
        time.perf_counter() - started,
    )


def mean_ci(values: list[float]) -> tuple[float, float]:
    """Mean and 95% confidence half-width (Student's t with n-1 degrees of freedom)."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, float("nan")
    half = stats.t.ppf(0.975, len(values) - 1) * statistics.stdev(values) / len(values) ** 0.5
    return mean, half


def report(model: str, outcomes: dict[str, dict[int, Outcome]]) -> None:
    base = outcomes["baseline"]
    print(f"\n{model}: {PRESET} preset for cycles and energy")
    print(f"  {'design':<36}{'GP frac':>8}{'test acc (95% CI)':>20}{'delta pts (95% CI)':>21}"
          f"{'speedup':>9}{'energy':>8}{'target':>8}")  # fmt: skip
    for design, runs in outcomes.items():
        seeds = sorted(runs)
        acc, acc_ci = mean_ci([runs[s].accuracy for s in seeds])
        deltas = [100 * (runs[s].accuracy - base[s].accuracy) for s in seeds if s in base]
        delta, delta_ci = mean_ci(deltas) if deltas else (float("nan"), float("nan"))
        frac = statistics.fmean(runs[s].gp_fraction for s in seeds)
        speedup = statistics.fmean(base[s].cycles / runs[s].cycles for s in seeds if s in base)
        energy = statistics.fmean(runs[s].energy / base[s].energy for s in seeds if s in base)
        met = "yes" if frac >= 0.3 and delta >= -1.0 else "no"
        print(f"  {design:<36}{frac:>8.3f}{100 * acc:>11.2f} +-{100 * acc_ci:>5.2f}"
              f"{delta:>+12.2f} +-{delta_ci:>5.2f}{speedup:>8.3f}x{energy:>8.3f}"
              f"{met if design != 'baseline' else '':>8}")  # fmt: skip
    for design, runs in outcomes.items():
        layers = sorted({layer for o in runs.values() for layer in o.cosines})
        if not layers:
            continue
        cells = []
        for layer in layers:
            pairs = [o.cosines[layer] for o in runs.values() if layer in o.cosines]
            predicted = statistics.fmean(p for p, _ in pairs)
            reference = statistics.fmean(r for _, r in pairs)
            cells.append(f"{layer} {predicted:.2f}/{reference:.2f}")
        print(f"  cosine predicted/reference, last epoch, {design}: " + ", ".join(cells))


def _stored_baselines(path: str) -> dict[tuple, Outcome]:
    stored: dict[tuple, Outcome] = {}
    with open(path) as rows:
        for line in rows:
            row = json.loads(line)
            if row["design"] != "baseline":
                continue
            key = tuple(
                row[k] for k in ("model", "seed", "train_samples", "test_samples", "epochs")
            )
            fields = {k: row[k] for k in Outcome.__dataclass_fields__}
            fields["cosines"] = {k: tuple(v) for k, v in fields["cosines"].items()}
            stored[key] = Outcome(**fields)
    return stored


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 epochs on 3,200 images")
    parser.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--designs", nargs="+", choices=list(DESIGNS), default=list(DESIGNS))
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--train-samples", type=int, default=None, help="per model if unset")
    parser.add_argument("--test-samples", type=int, default=None, help="per model if unset")
    parser.add_argument("--save", help="append every run's outcome as JSON lines to this file")
    parser.add_argument(
        "--baselines",
        help="JSON lines saved by --save: baseline runs of the same model, seed and sizes are "
        "read from there instead of trained again (the baseline does not depend on ADA-GP)",
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    designs = ["baseline", *[d for d in args.designs if d != "baseline"]]
    epochs = 3 if args.quick else args.epochs
    default_samples = {"lenet5": 6400, "resnet8": 2000}
    stored = _stored_baselines(args.baselines) if args.baselines else {}
    for model in args.models:
        samples = 3200 if args.quick else args.train_samples or default_samples[model]
        test = args.test_samples or {"lenet5": 2000, "resnet8": 1000}[model]
        test = min(test, 1000) if args.quick else test
        print(f"\n{model}: {samples} training images, {test} test images, {epochs} epochs, "
              f"batch 64, seeds {args.seeds}", flush=True)  # fmt: skip
        outcomes: dict[str, dict[int, Outcome]] = {d: {} for d in designs}
        for seed in args.seeds:
            config = TrainingConfig(
                **MODELS[model], epochs=epochs, train_samples=samples, test_samples=test,
                batch_size=64, seed=seed,
            )  # fmt: skip
            for design in designs:
                key = (model, seed, samples, test, epochs)
                if design == "baseline" and key in stored:
                    outcomes[design][seed] = stored[key]
                    print(f"  seed {seed} baseline read from {args.baselines}", flush=True)
                    continue
                outcome = train(config, design)
                outcomes[design][seed] = outcome
                line = f"acc {outcome.accuracy:.4f} GP {outcome.gp_fraction:.3f}"
                print(f"  seed {seed} {design:<36} {line} ({outcome.seconds:.0f} s)", flush=True)
                if args.save:
                    with open(args.save, "a") as out:
                        row = {
                            "model": model, "seed": seed, "design": design,
                            "train_samples": samples, "test_samples": test, "epochs": epochs,
                            **vars(outcome),
                        }  # fmt: skip
                        out.write(json.dumps(row) + "\n")
        report(model, outcomes)


if __name__ == "__main__":
    main()
