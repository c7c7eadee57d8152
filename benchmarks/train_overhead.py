"""Wall time per training epoch of each technique relative to the baseline.

Two workloads, in one run: LeNet-5 on MNIST and ResNet-8 (width 16) on Fashion-MNIST, each on
a fixed subset so the whole benchmark takes a few minutes on two cores. Epoch time excludes
evaluation. Every run is timed on its epochs after the first, which carries one-off costs
(first touches of the data and of every buffer) and is ADA-GP's backprop-only warm-up;
"adagp (GP-dominant)" pins the GP run at 4 batches per BP batch from the first epoch after the
warm-up (no waiting for the loss to flatten), the regime where GP steps dominate.

Targets: mercury <= 2.0x, sparsetrain <= 1.3x, adagp <= 1.0x once GP steps dominate.
Measured for ADA-GP (`--only "adagp (GP-dominant)" --repeat 3`, defaults otherwise) on a quiet
machine (2 threads), three runs: LeNet-5 1.29x, 1.33x, 1.34x; ResNet-8 1.10x, 1.04x, 1.09x (the
third with glibc told never to return freed memory, to see whether page faults weigh: they do
not); the whole benchmark at --repeat 1 gave 1.22x and 0.96x. Earlier implementations: 1.30x
and 1.33x (autograd through the prediction), 1.20x and 1.26x (closed-form predictor gradients,
PyTorch operations). This one runs the predictor's output-sized arithmetic in fused compiled
loops (backend/techniques/adagp/feedback_kernels.py) and its Adam step fused; measured in one
process with the previous one, rounds interleaved (3,200 images): ResNet-8 epoch 1.32x -> 0.99x
of the baseline's, LeNet-5 1.26x -> 1.20x. ResNet-8 is at the target's edge, LeNet-5 above it. Per
batch (ResNet-8): a GP batch costs about 0.8x of a baseline batch (forward, the dW it forms,
and the prediction: e B, the gate, the projection, about 1.4 ms per layer), a BP batch, which
also trains the predictors, about 1.9x. LeNet-5's layers are small: the cost there is per
call, and a GP batch costs about as much as a baseline batch.
The "GP floor" line printed per workload is what this design cannot go below: a GP batch
forms every layer's dW = dy x^T on the array, so it costs at least the forward pass, those
dW products and the optimiser step, measured in plain PyTorch (no predictor, no recorder)
against a plain baseline step, interleaved in one process. LeNet-5's floor is high because
its baseline backward skips little besides dW: its first conv needs no BWD-DATA anyway.
A later run of the same command (same code, 2 threads) gave LeNet-5 1.14x, ResNet-8 1.12x,
floors 0.73x and 0.64x: the spread between runs (LeNet-5 1.14-1.34x, ResNet-8 0.96-1.12x) is
as large as any gain tried since. Where a LeNet-5 GP batch's time goes (per-batch timers in one
process, baseline interleaved): forward 3.4 ms, the technique's work 3.8 ms (dW formed 1.5,
the prediction 1.6, gains, bias sums and the output error the rest), optimiser 0.7, against a
baseline batch's forward 3.6, backward 3.8 and optimiser 0.9. Tried and dropped, each measured
against the current code in one process: the kernels multithreaded (numba prange over
channels; each kernel 1.2-1.6x slower beside PyTorch's OpenMP pool, with numba's omp or
workqueue threading layer), and e B computed in a single-threaded compiled loop instead of
PyTorch's two-thread GEMM, which is erratic for this skinny shape (classes x per-sample
elements, 0.2-0.7 ms for LeNet-5's first conv): epoch 1.24x -> 1.19x on LeNet-5 but 1.02x ->
1.08x on ResNet-8.

Steady state is what is timed: a worker process is long-lived and trains many runs, so before
timing, each technique trains two batches of each workload once. That compiles its numba kernels
(about 2 s in all, or a fraction of that when numba's on-disk cache has them) and warms
PyTorch up, costs a real first run pays once per process and not per epoch.

On a shared machine the load drifts between runs; --repeat R runs R rounds, each timing the
baseline, every technique, then the baseline again, and reports the median epoch time and the
median of each round's ratio to that round's baseline (the mean of its two), with the rounds'
smallest and largest ratio beside it (min-max).

"adagp direct (GP-dom.)" is the same pinned schedule with the `direct` predictor (the paper's
design, backend/techniques/adagp/direct.py): a GP batch runs the forward without autograd, the
pooled statistics and each layer's small predictor, and the optimiser step; no dW product. Its
target is the same, <= 1.0x of the baseline's epoch. The "GP floor" line is the `feedback`
design's and is printed only when "adagp (GP-dominant)" runs.
Measured (`--only "adagp direct (GP-dom.)" --train-samples 1600 --epochs 3 --repeat 3`, one
intra-op thread, on a shared two-core machine at load 8-14; median ratio and the rounds'
min-max, two runs of the same code): LeNet-5 0.82x (0.82-1.34x) and 1.10x (0.99-1.36x);
ResNet-8 0.68x (0.43-1.01x) and 0.73x (0.65-0.97x); a third run after the statistics lost a
copy and the predictors' Adam was fused, at load 19: LeNet-5 1.19x (0.78-1.24x), ResNet-8 0.99x
(0.74-1.20x). Under that load the rounds' spread (0.4-0.6) exceeds any difference between the
runs, so the target is neither met nor missed with confidence; a quiet machine has to decide it.
Its medians lie under the target for ResNet-8 and at or above it for LeNet-5 (small layers: the
per-call costs of the statistics and the five predictors weigh as much as the backward they
replace). The "direct per batch" line (`direct_batches`) times a GP batch and a BP batch
against a baseline batch on the same images, interleaved batch by batch, which the load's drift
moves far less. A fourth run (same command, load 8-13): epochs LeNet-5 0.97x (0.91-1.10x),
ResNet-8 0.59x (0.54-0.83x); per batch LeNet-5 GP 0.95x, BP 2.00x (4:1 epoch ~1.16x), ResNet-8
GP 0.55x, BP 1.12x (~0.66x). So: ResNet-8 meets the target with room; LeNet-5 does not, its GP
batch costing about a baseline batch and its BP batch (predictor training through autograd and
Adam over five small networks) two. The pinned
schedule is a wall-time regime, not an accuracy one: it applies GP 4:1 whatever the cosine
(test accuracy there: LeNet-5 0.204 against the baseline's 0.390, ResNet-8 0.666 against 0.734).

    python benchmarks/train_overhead.py [--train-samples N] [--epochs E] [--repeat R]
                                        [--only NAME ...]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn

from backend.settings import get_settings
from backend.specs.recipes import resolve_recipe
from backend.specs.training import TrainingConfig
from backend.techniques.adagp.params import AdaGPParams
from backend.techniques.adagp.predictors import weight_grad
from backend.techniques.baseline.params import BaselineParams
from backend.techniques.mercury.params import MercuryParams
from backend.techniques.sparsetrain.params import SparseTrainParams
from backend.training import run_training
from backend.training.datasets import load_dataset
from backend.training.engine import _Run, attach_hooks, make_optimizer
from backend.training.models import build_model
from backend.training.technique import Step
from worker.intra_op_threads import configure_threads

FASHION_MNIST_DIR = get_settings().fashion_mnist_dir  # as the worker reads it

TECHNIQUES = {
    "baseline": [BaselineParams()],
    "mercury": [MercuryParams()],
    "sparsetrain": [SparseTrainParams()],
    "adagp": [AdaGPParams()],
    "adagp (GP-dominant)": [
        AdaGPParams(plateau_improvement=1.0, gp_batches=4, min_gp_batches=4, max_gp_batches=4)
    ],
    "adagp direct (GP-dom.)": [
        AdaGPParams(
            predictor="direct",
            plateau_improvement=1.0,
            gp_batches=4,
            min_gp_batches=4,
            max_gp_batches=4,
        )
    ],
}


def epoch_seconds(config: TrainingConfig, name: str) -> tuple[float, float]:
    """Mean time of the epochs after the first (after ADA-GP's warm-up), and test accuracy."""
    result = run_training(config, TECHNIQUES[name], fashion_mnist_dir=FASHION_MNIST_DIR)
    warmup = getattr(TECHNIQUES[name][0], "warmup_epochs", 0)
    epochs = result.epochs[max(1, warmup) :] or result.epochs
    return statistics.mean(e.seconds for e in epochs), result.test_accuracy


def gp_floor(config: TrainingConfig, batches: int = 20, rounds: int = 3) -> float:
    """Median over batches of (forward without autograd + every layer's dW = dy x^T + the
    optimiser step) / (a baseline step: forward, backward, optimiser step), the two timed
    alternately on the same batches; the first round warms up and is not counted."""
    config = resolve_recipe(config)
    data = load_dataset(
        config.dataset,
        None,
        batches * config.batch_size,
        64,
        fashion_mnist_dir=FASHION_MNIST_DIR,
    )
    torch.manual_seed(0)
    model = build_model(config.model, data.input_shape, data.num_classes, config.width)
    model.train()
    optimizer = make_optimizer(model, config)
    seen: list[tuple[nn.Module, torch.Tensor, torch.Tensor]] = []
    for module in model.modules():
        if isinstance(module, nn.Conv2d | nn.Linear):
            module.register_forward_hook(lambda m, inputs, y: seen.append((m, inputs[0], y)))
    ratios = []
    for round_ in range(rounds):
        for batch in range(batches):
            rows = slice(batch * config.batch_size, (batch + 1) * config.batch_size)
            images, labels = data.train_images[rows], data.train_labels[rows]
            started = time.perf_counter()
            optimizer.zero_grad(set_to_none=True)
            F.cross_entropy(model(images), labels).backward()
            optimizer.step()
            baseline = time.perf_counter() - started
            seen.clear()
            started = time.perf_counter()
            with torch.no_grad():
                model(images)
            for module, x, y in seen:  # y stands in for dy: the cost depends on shapes only
                module.weight.grad = weight_grad(module, x, y)
            optimizer.step()
            if round_:
                ratios.append((time.perf_counter() - started) / baseline)
    return statistics.median(ratios)


def direct_batches(
    config: TrainingConfig, batches: int = 20, rounds: int = 3
) -> tuple[float, float]:
    """Median over batches of a `direct` GP batch's and BP batch's time over a baseline batch's,
    the three trained side by side on the same batches by the real training loop (one GEMM
    hook chain each), interleaved batch by batch; the first round warms up and is not counted.
    Less exposed to load drifting than epoch ratios: the three batches being compared run
    within milliseconds of each other."""
    config = resolve_recipe(config).model_copy(
        update={"train_samples": batches * config.batch_size, "test_samples": 64}
    )
    pinned = dict(predictor="direct", warmup_epochs=0, plateau_improvement=1.0)
    every_gp = AdaGPParams(**pinned, gp_batches=1000, min_gp_batches=1000, max_gp_batches=1000)
    every_bp = AdaGPParams(**{**pinned, "warmup_epochs": 100})
    runs = [
        _Run(config, params, None, FASHION_MNIST_DIR)
        for params in ([BaselineParams()], [every_gp], [every_bp])
    ]
    for run in runs:
        attach_hooks(run.model, run.hooks)
        run.model.train()
    data = runs[0].data
    gp_ratios, bp_ratios = [], []
    for round_ in range(rounds):
        for batch in range(batches):
            rows = slice(batch * config.batch_size, (batch + 1) * config.batch_size)
            images, labels = data.train_images[rows], data.train_labels[rows]
            step = Step(0, batch, round_ * batches + batch, labels)
            seconds = []
            for run in runs:
                started = time.perf_counter()
                for technique in run.techniques:
                    technique.start_batch(step)
                run.train_batch(step, images, labels)
                seconds.append(time.perf_counter() - started)
            if round_:
                gp_ratios.append(seconds[1] / seconds[0])
                bp_ratios.append(seconds[2] / seconds[0])
    for run in runs:
        attach_hooks(run.model, None)
    return statistics.median(gp_ratios), statistics.median(bp_ratios)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-samples", type=int, default=6400)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument(
        "--only", nargs="+", choices=list(TECHNIQUES), help="time only these (and the baseline)"
    )
    parser.add_argument("--repeat", type=int, default=1, help="alternating rounds per technique")
    args = parser.parse_args()
    configure_threads()
    cases = [
        TrainingConfig(model="lenet5", dataset="mnist", batch_size=64),
        TrainingConfig(model="resnet8", dataset="fashion-mnist", width=16, batch_size=64),
    ]
    for base in cases:
        config = base.model_copy(
            update={
                "train_samples": args.train_samples,
                "test_samples": 1000,
                "epochs": args.epochs,
            }
        )
        print(f"\n{config.model} on {config.dataset}: {args.train_samples} images, "
              f"batch {config.batch_size}, {config.epochs} epochs")  # fmt: skip
        names = [n for n in TECHNIQUES if not args.only or n == "baseline" or n in args.only]
        warm_up = config.model_copy(
            update={"train_samples": 2 * config.batch_size, "test_samples": 64, "epochs": 1}
        )
        for name in names:
            run_training(warm_up, TECHNIQUES[name], fashion_mnist_dir=FASHION_MNIST_DIR)
        seconds: dict[str, list[float]] = {name: [] for name in names}
        accuracy: dict[str, float] = {}
        for _ in range(args.repeat):
            # the baseline opens and closes each round: whatever drifts during the round
            # weighs on it as on the techniques timed in between
            opening, accuracy["baseline"] = epoch_seconds(config, "baseline")
            for name in names[1:]:
                epoch, accuracy[name] = epoch_seconds(config, name)
                seconds[name].append(epoch)
            closing, _ = epoch_seconds(config, "baseline")
            seconds["baseline"].append((opening + closing) / 2)
        print(f"  {'technique':<24}{'s/epoch':>9}{'ratio':>8}{'min-max':>13}{'test acc':>10}")
        for name in names:
            ratios = [t / b for t, b in zip(seconds[name], seconds["baseline"], strict=True)]
            spread = f"{min(ratios):.2f}-{max(ratios):.2f}x"
            print(f"  {name:<24}{statistics.median(seconds[name]):>9.3f}"
                  f"{statistics.median(ratios):>7.2f}x{spread:>13}"
                  f"{accuracy[name]:>10.3f}")  # fmt: skip
        if "adagp direct (GP-dom.)" in names:
            gp, bp = direct_batches(config)
            print(f"  direct per batch, interleaved: GP {gp:.2f}x, BP {bp:.2f}x of a baseline "
                  f"batch; at 4 GP : 1 BP an epoch ~ {0.8 * gp + 0.2 * bp:.2f}x")  # fmt: skip
        if "adagp (GP-dominant)" in names:
            floor = gp_floor(config)
            print(f"  GP floor (forward + dW + step, plain PyTorch): {floor:.2f}x of a baseline "
                  f"step; at 4 GP : 1 BP an epoch >= {0.8 * floor + 0.2:.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
