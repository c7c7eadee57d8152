"""What ADA-GP keeps per conv/linear layer: its predictors' state, this batch's tensors, its
calibration and how often the measurements the workload charges ran."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from torch import Tensor, nn

if TYPE_CHECKING:
    from backend.techniques.adagp.direct import DirectState
    from backend.techniques.adagp.predictors import FeedbackPredictor
    from backend.training.layers import GemmLayer


@dataclass
class LayerState:
    layer: GemmLayer
    normalization: nn.modules.batchnorm._BatchNorm | None = None  # the BatchNorm fed by y
    history: Tensor | None = None  # running mean of true weight gradients (`history`)
    bias_history: Tensor | None = None
    previous: Tensor | None = None  # last BP batch's true weight gradient (the reference)
    cosine_mean: float | None = None  # smoothed predicted cosine
    reference_mean: float | None = None  # smoothed reference cosine
    grad_norm: float | None = None  # running norm of the true weight gradient
    feedback: FeedbackPredictor | None = None
    direct: DirectState | None = None
    x: Tensor | None = None  # this batch's input and output (`feedback`)
    y: Tensor | None = None
    output: Tensor | None = None  # y as it leaves the layer (to recognise its BatchNorm)
    true_output_grad: Tensor | None = None
    output_elements: int = 0  # summed over the training (`feedback` gate, `direct` pooling)
    cosines: list[Tensor] = field(default_factory=list)  # this epoch's BP batches
    references: list[Tensor] = field(default_factory=list)
    # BP batches on which the predicted / reference cosine was measured, and on which `feedback`
    # formed dW_pred to measure it
    predicted_measurements: int = 0
    reference_measurements: int = 0
    weight_formations: int = 0

    @property
    def weight(self) -> nn.Parameter:
        return self.layer.weight

    @property
    def bias(self) -> Tensor | None:
        return self.layer.inner.bias

    def forget_batch(self) -> None:
        self.x = self.y = self.output = self.true_output_grad = None
        if self.direct is not None:
            self.direct.features = None
