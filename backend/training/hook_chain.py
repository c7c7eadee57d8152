"""Route each layer hook to the run's techniques, then to the workload recorder.

Techniques see a gradient in list order; the recorder measures what they leave, i.e. what the
accelerator would multiply.
"""

from __future__ import annotations

from torch import Tensor

from backend.training.layers import GemmLayer, MatMulSite, ReuseMap
from backend.training.recorder import WorkloadRecorder
from backend.training.technique import Technique


class HookChain:
    def __init__(self, techniques: list[Technique], recorder: WorkloadRecorder) -> None:
        self.techniques = techniques
        self.recorder = recorder

    def reuse_map(self, layer: GemmLayer, x: Tensor) -> ReuseMap | None:
        for technique in self.techniques:
            reuse = technique.reuse_map(layer, x)
            if reuse is not None:
                return reuse
        return None

    def after_forward(self, layer: GemmLayer, x: Tensor, y: Tensor) -> None:
        for technique in self.techniques:
            technique.after_forward(layer, x, y)
        self.recorder.after_forward(layer, x, y)

    def output_grad(self, layer: GemmLayer, grad: Tensor) -> Tensor:
        for technique in self.techniques:
            grad = technique.output_grad(layer, grad)
        return self.recorder.output_grad(layer, grad)

    def matmul_forward(self, site: MatMulSite, a: Tensor, b: Tensor) -> None:
        self.recorder.matmul_forward(site, a, b)
