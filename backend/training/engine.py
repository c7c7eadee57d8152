"""The training loop: one seeded, deterministic loop for every technique and combination.

Per mini-batch: the techniques decide whether it runs backward (ADA-GP's predicted-gradient
steps do not); the model's GEMM layers call the techniques' hooks; the recorder measures the
workload; the learning-rate schedule steps. Per epoch: BatchNorm statistics recomputed with the
current weights, evaluation on the test set (plain dense inference), technique figures. The
config's recipe fields are resolved first (backend/specs/recipes.py), so a config built by hand
trains as the same config stored by an experiment.

The loop reads no settings and no environment: where the data lives (the data root a
`dataset_path` must lie in, Fashion-MNIST's folder) is passed in by the caller, and it trains
with the intra-op thread count the process runs with (the worker sets it:
worker/intra_op_threads.py), which the result's environment records.
"""

from __future__ import annotations

import math
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from pydantic import BaseModel
from torch import Tensor, nn

from backend.sim.workload import Workload
from backend.specs.recipes import resolve_recipe
from backend.specs.techniques import technique_label
from backend.specs.training import TrainingConfig, dataset_folder
from backend.training.datasets import Dataset, load_dataset
from backend.training.errors import TrainingCancelled
from backend.training.hook_chain import HookChain
from backend.training.layers import GemmLayer, attach_hooks, instrument, mark_classifier
from backend.training.models import build_model
from backend.training.recorder import MEASURE_EVERY, WorkloadRecorder
from backend.training.registry import build_techniques
from backend.training.results import EpochMetrics, Progress, TrainingResult
from backend.training.technique import Step, Technique, WorkloadOps

EVAL_BATCH = 512


def training_environment() -> dict[str, Any]:
    """What a training's floating-point results depend on beyond its config and seed: the
    PyTorch build, the number of intra-op threads (a reduction split over more threads adds in
    another order) and the CPU instruction set PyTorch's kernels were chosen for. Ten epochs
    amplify a last-bit difference into a visible one, so a stored run names them."""
    return {
        "torch": torch.__version__,
        "intra_op_threads": torch.get_num_threads(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "machine": platform.machine(),
    }


def make_optimizer(model: nn.Module, config: TrainingConfig) -> torch.optim.Optimizer:
    assert config.learning_rate is not None and config.weight_decay is not None
    if config.optimizer == "adam":
        return torch.optim.Adam(
            model.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay
        )
    return torch.optim.SGD(
        model.parameters(),
        lr=config.learning_rate,
        momentum=config.momentum,
        weight_decay=config.weight_decay,
    )


def learning_rate_factor(config: TrainingConfig, total_batches: int) -> Callable[[int], float]:
    """The schedule as a factor of the peak rate, per batch index: linear warm-up to 1 over
    `warmup_fraction` of the batches, then a cosine decay reaching 0 after the last batch."""
    if config.lr_schedule == "constant":
        return lambda _index: 1.0
    warmup = round((config.warmup_fraction or 0.0) * total_batches)

    def factor(index: int) -> float:
        if index < warmup:
            return (index + 1) / warmup
        progress = (index - warmup) / max(total_batches - warmup, 1)
        return 0.5 * (1 + math.cos(math.pi * progress))

    return factor


def recalibrate_batchnorm(model: nn.Module, images: Tensor, batch_size: int) -> None:
    """Recompute every BatchNorm layer's running mean and variance over `images` with the
    current weights (a cumulative average, not the exponential one of training)."""
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not norms or len(images) == 0:
        return
    momenta = [norm.momentum for norm in norms]
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None
    model.train()
    with torch.no_grad():
        for start in range(0, len(images), batch_size):
            model(images[start : start + batch_size])
    for norm, momentum in zip(norms, momenta, strict=True):
        norm.momentum = momentum


def evaluate(model: nn.Module, images: Tensor, labels: Tensor) -> tuple[float, float]:
    """Mean loss and accuracy of plain dense inference."""
    model.eval()
    total_loss, correct = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(labels), EVAL_BATCH):
            logits = model(images[start : start + EVAL_BATCH])
            target = labels[start : start + EVAL_BATCH]
            total_loss += float(F.cross_entropy(logits, target, reduction="sum"))
            correct += int((logits.argmax(1) == target).sum())
    model.train()
    return total_loss / max(len(labels), 1), correct / max(len(labels), 1)


def _dataset_folder(config: TrainingConfig, data_root: Path | None) -> str | None:
    """The data set's folder, checked again here against the caller's data root (the API
    checked it at submission against its own): ValueError when it lies outside, or when there
    is no data root to check it against."""
    if config.dataset_path is None:
        return None
    if data_root is None:
        raise ValueError("dataset_path needs a data root to lie in; none was given")
    return str(dataset_folder(config.dataset_path, data_root))


class _Run:
    """One training's state: model, data, techniques and the recorder wired together."""

    def __init__(
        self,
        config: TrainingConfig,
        params: list[BaseModel],
        data_root: Path | None,
        fashion_mnist_dir: Path | None,
    ) -> None:
        self.config = config
        self.data: Dataset = load_dataset(
            config.dataset,
            _dataset_folder(config, data_root),
            config.train_samples,
            config.test_samples,
            fashion_mnist_dir=fashion_mnist_dir,
        )
        torch.manual_seed(config.seed)
        self.model = build_model(
            config.model, self.data.input_shape, self.data.num_classes, config.width
        )
        self.sites = instrument(self.model)
        mark_classifier(self.model, self.data.input_shape)
        self.layers = [site for site in self.sites if isinstance(site, GemmLayer)]
        self.techniques: list[Technique] = build_techniques(params)
        for technique in self.techniques:
            technique.setup(self.model, self.layers, config.seed)
        self.recorder = WorkloadRecorder(MEASURE_EVERY, seed=config.seed)
        self.hooks = HookChain(self.techniques, self.recorder)
        self.optimizer = make_optimizer(self.model, config)
        self.batch_size = min(config.batch_size, len(self.data.train_labels))
        self.batches_per_epoch = len(self.data.train_labels) // self.batch_size
        assert config.epochs is not None
        self.schedule = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, learning_rate_factor(config, self.batches_per_epoch * config.epochs)
        )
        self.order = torch.Generator().manual_seed(config.seed + 1)
        calibration = torch.Generator().manual_seed(config.seed + 2)
        count = min(config.bn_recalibration_images or 0, len(self.data.train_labels))
        chosen = torch.randperm(len(self.data.train_labels), generator=calibration)[:count]
        self.calibration_images = self.data.train_images[chosen]

    def evaluate(self) -> tuple[float, float]:
        """Test loss and accuracy of the plain dense model, BatchNorm statistics recomputed."""
        attach_hooks(self.model, None)
        recalibrate_batchnorm(self.model, self.calibration_images, self.batch_size)
        result = evaluate(self.model, self.data.test_images, self.data.test_labels)
        attach_hooks(self.model, self.hooks)
        return result

    def train_batch(self, step: Step, images: Tensor, labels: Tensor) -> tuple[float, int]:
        backward = all(t.runs_backward(step) for t in self.techniques)
        self.recorder.start_batch(step.index, backward)
        self.optimizer.zero_grad(set_to_none=True)
        with torch.set_grad_enabled(backward):
            logits = self.model(images)
            loss = F.cross_entropy(logits, labels)
        if backward:
            loss.backward()
        loss_value = float(loss.detach())
        for technique in self.techniques:
            technique.before_step(step, backward, loss_value)
        self.optimizer.step()
        self.schedule.step()
        self.recorder.end_batch(backward)
        return loss_value, int((logits.argmax(1) == labels).sum())


def run_training(
    config: TrainingConfig,
    techniques: list[BaseModel],
    progress: Callable[[Progress], None] | None = None,
    should_cancel: Callable[[], bool] | None = None,
    on_epoch: Callable[[EpochMetrics], None] | None = None,
    *,
    data_root: Path | None = None,
    fashion_mnist_dir: Path | None = None,
) -> TrainingResult:
    """Train `config.model` on `config.dataset` with the techniques; measure the workload.

    A `config.dataset_path` must lie inside `data_root` (None: no dataset_path is accepted);
    Fashion-MNIST is read from `fashion_mnist_dir` (None: where the Debian package puts it).
    `on_epoch` is handed each epoch's metrics as soon as they are measured (the worker stores
    them, so curves grow while the training runs); the result holds the same objects.
    """
    started = time.perf_counter()
    config = resolve_recipe(config)
    assert config.epochs is not None
    run = _Run(config, techniques, data_root, fashion_mnist_dir)
    attach_hooks(run.model, run.hooks)
    data, total_batches = run.data, run.batches_per_epoch * config.epochs
    epochs: list[EpochMetrics] = []
    for epoch in range(config.epochs):
        run.model.train()
        epoch_started = time.perf_counter()
        order = torch.randperm(len(data.train_labels), generator=run.order)
        loss_sum, correct, seen = 0.0, 0, 0
        for batch in range(run.batches_per_epoch):
            if should_cancel is not None and should_cancel():
                raise TrainingCancelled(f"cancelled in epoch {epoch + 1}, batch {batch + 1}")
            index = order[batch * run.batch_size : (batch + 1) * run.batch_size]
            labels = data.train_labels[index]
            step = Step(epoch, batch, epoch * run.batches_per_epoch + batch, labels)
            for technique in run.techniques:
                technique.start_batch(step)
            loss, hits = run.train_batch(step, data.train_images[index], labels)
            loss_sum += loss * len(index)
            correct += hits
            seen += len(index)
            if progress is not None:
                progress(
                    Progress(
                        fraction=(step.index + 1) / total_batches,
                        epoch=epoch + 1,
                        batch=batch + 1,
                        metrics={"train_loss": loss_sum / seen, "train_accuracy": correct / seen},
                    )
                )
        seconds = time.perf_counter() - epoch_started
        test_loss, test_accuracy = run.evaluate()
        for technique in run.techniques:
            technique.end_epoch(epoch, test_loss)
        metrics = _epoch_metrics(
            run, epoch, loss_sum / seen, correct / seen, test_loss, test_accuracy, seconds
        )
        metrics.wall_seconds = time.perf_counter() - epoch_started
        epochs.append(metrics)
        if on_epoch is not None:
            on_epoch(metrics)
    attach_hooks(run.model, None)
    ops = WorkloadOps(run.recorder.build_ops())
    for technique in run.techniques:
        technique.annotate_workload(ops)
    workload = Workload(
        model=config.model,
        dataset=config.dataset,
        batch_size=run.batch_size,
        iterations=total_batches,
        ops=ops.ops,
        technique=technique_label(techniques),
    )
    return TrainingResult(
        epochs,
        workload,
        time.perf_counter() - started,
        workload.technique,
        chance_accuracy=1 / data.num_classes,
        environment=training_environment(),
    )


def _epoch_metrics(
    run: _Run,
    epoch: int,
    train_loss: float,
    train_accuracy: float,
    test_loss: float,
    test_accuracy: float,
    seconds: float,
) -> EpochMetrics:
    metrics = EpochMetrics(
        epoch=epoch + 1,
        train_loss=train_loss,
        train_accuracy=train_accuracy,
        test_loss=test_loss,
        test_accuracy=test_accuracy,
        seconds=seconds,
    )
    for figures in (run.recorder.epoch_densities(), *(t.epoch_figures() for t in run.techniques)):
        metrics.figures.update(figures.scalars)
        for layer, values in figures.per_layer.items():
            metrics.per_layer.setdefault(layer, {}).update(values)
    return metrics
