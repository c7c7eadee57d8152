"""The one small interface every acceleration technique implements.

The training loop calls these hooks; a technique overrides only the ones it needs, so several
can run in one training. Each technique is a folder of backend/techniques/ with one entry point
(README "Adding a technique"); its subclass of `Technique` is the folder's `training.py`.
Order within a mini-batch:

    start_batch -> runs_backward? -> [per layer: reuse_map, after_forward]
      BP step: backward [per layer: output_grad] -> before_step -> optimizer step
      GP step: (no backward) -> before_step -> optimizer step
    ... end_epoch -> epoch_figures
    at the end: annotate_workload
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor, nn

from backend.sim.workload import GemmOp
from backend.training.layers import GemmLayer, ReuseMap


@dataclass(frozen=True)
class Step:
    """Where a mini-batch sits in the training."""

    epoch: int
    batch: int  # within the epoch
    index: int  # over the whole training
    labels: Tensor | None = field(default=None, compare=False)  # the mini-batch's targets


@dataclass
class EpochFigures:
    """What a technique measured during one epoch: run-level figures and per-layer ones."""

    scalars: dict[str, float] = field(default_factory=dict)
    per_layer: dict[str, dict[str, float]] = field(default_factory=dict)


class WorkloadOps:
    """The workload's GEMM ops under construction, by (layer, pass); techniques annotate them
    and may add their overhead GEMMs."""

    def __init__(self, ops: list[GemmOp]) -> None:
        self.ops = ops

    def find(self, layer: str, pass_: str, role: str = "compute") -> GemmOp | None:
        for op in self.ops:
            if op.layer == layer and op.pass_ == pass_ and op.role == role:
                return op
        return None

    def add(self, op: GemmOp) -> None:
        self.ops.append(op)


def add_extra(op: GemmOp, name: str, total: float) -> None:
    """Add `total` ops (summed over the training) to an op's per-execution extra_ops."""
    if op.executions > 0 and total > 0:
        op.extra_ops[name] = op.extra_ops.get(name, 0.0) + total / op.executions


class Technique:
    """Does nothing: plain training. Subclasses override the hooks they need."""

    name = "baseline"

    def setup(self, model: nn.Module, layers: list[GemmLayer], seed: int) -> None:
        """Called once before training, after the model is built."""

    def start_batch(self, step: Step) -> None:
        """Called before each mini-batch."""

    def runs_backward(self, step: Step) -> bool:
        """False when this technique wants the batch trained without a backward pass."""
        return True

    def reuse_map(self, layer: GemmLayer, x: Tensor) -> ReuseMap | None:
        """Rows of the layer's output to copy from other rows (None: compute all)."""
        return None

    def after_forward(self, layer: GemmLayer, x: Tensor, y: Tensor) -> None:
        """Sees a layer's input and output."""

    def output_grad(self, layer: GemmLayer, grad: Tensor) -> Tensor:
        """May rewrite the gradient arriving at a layer's output."""
        return grad

    def before_step(self, step: Step, backward_ran: bool, loss: float) -> None:
        """Called just before the optimiser step; gradients are in `.grad`."""

    def end_epoch(self, epoch: int, validation_loss: float) -> None:
        """Called after each epoch's evaluation."""

    def epoch_figures(self) -> EpochFigures:
        """What this technique measured since the previous call (one epoch)."""
        return EpochFigures()

    def annotate_workload(self, ops: WorkloadOps) -> None:
        """Add this technique's measurements and overheads to the workload."""
