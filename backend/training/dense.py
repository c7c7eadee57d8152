"""The dense workload of one training iteration, without training (`orrery simulate MODEL`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from backend.sim.workload import Workload
from backend.specs.training import TrainingConfig
from backend.training.datasets import dataset_input_shape
from backend.training.hook_chain import HookChain
from backend.training.layers import attach_hooks, instrument
from backend.training.models import build_model
from backend.training.recorder import WorkloadRecorder

NUM_CLASSES = 10  # every data set of the registry has ten classes


def dense_workload(config: TrainingConfig) -> Workload:
    """One mini-batch of `config.model` on the data set's input shape, every pass dense.

    One forward and backward pass on random inputs fixes each layer's GEMM shapes (and which
    layers need BWD-DATA); nothing is measured, so all densities are 1.
    """
    shape = dataset_input_shape(config.dataset, config.dataset_path)
    generator = torch.Generator().manual_seed(config.seed)
    model = build_model(config.model, shape, NUM_CLASSES, config.width)
    instrument(model)
    recorder = WorkloadRecorder(measure=False)
    attach_hooks(model, HookChain([], recorder))
    images = torch.rand(config.batch_size, *shape, generator=generator)
    labels = torch.randint(0, NUM_CLASSES, (config.batch_size,), generator=generator)
    recorder.start_batch(0, runs_backward=True)
    F.cross_entropy(model(images), labels).backward()
    recorder.end_batch(backward_ran=True)
    return Workload(
        model=config.model,
        dataset=config.dataset,
        batch_size=config.batch_size,
        iterations=1,
        ops=recorder.build_ops(),
        technique="baseline",
    )
