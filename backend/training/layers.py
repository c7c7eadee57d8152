"""The layers an accelerator runs as GEMMs, with the seams the techniques hook into.

Every nn.Conv2d and nn.Linear of a zoo model is wrapped in a `GemmLayer`; every product of two
activations (attention) is a `MatMulSite`. Through `LayerHooks` a technique can
- replace output rows by the output of an earlier, similar row (MERCURY's reuse map),
- look at a layer's input and output (measurements, ADA-GP's predictors),
- rewrite the gradient arriving at a layer's output (SparseTrain's pruning).

Rows are the rows of the FWD GEMM's A: one per output pixel of a conv (batch-major, then
raster order), one per input vector of a linear layer.

The *classifier* is the GEMM layer whose output is the network's output, the logits; it is
found by its role (`mark_classifier` runs the model once and sees whose output comes out), not
by its name, so it is found in every zoo model and in any model built the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn


@dataclass(frozen=True)
class ReuseMap:
    """owner[i] is the row whose output row i receives (owner[i] == i: row i is computed).
    fold_weight_grad: BWD-WEIGHT uses each group's representative input for the whole group."""

    owner: Tensor
    fold_weight_grad: bool

    @cached_property
    def hits(self) -> int:
        """How many rows receive another row's output."""
        owner = self.owner.numpy()
        return int(np.count_nonzero(owner != np.arange(len(owner))))

    @property
    def folds(self) -> bool:
        """Whether BWD-WEIGHT folds hit groups: asked for, and there is a hit to fold."""
        return self.fold_weight_grad and self.hits > 0


class LayerHooks(Protocol):
    def reuse_map(self, layer: GemmLayer, x: Tensor) -> ReuseMap | None: ...
    def after_forward(self, layer: GemmLayer, x: Tensor, y: Tensor) -> None: ...
    def output_grad(self, layer: GemmLayer, grad: Tensor) -> Tensor: ...
    def matmul_forward(self, site: MatMulSite, a: Tensor, b: Tensor) -> None: ...


# A conv's rows are handled channel-major, (K, B*H*W): per channel one long contiguous run of
# rows, which index_select / index_add_ walk far faster than B*H*W short rows of K values.
def conv_columns(y: Tensor) -> Tensor:
    """(B, K, H, W) -> (K, B*H*W): column i is output row i."""
    return y.transpose(0, 1).reshape(y.shape[1], -1)


def conv_uncolumns(columns: Tensor, shape: torch.Size) -> Tensor:
    batch, channels, height, width = shape
    return columns.view(channels, batch, height, width).transpose(0, 1).contiguous()


def fold_columns(columns: Tensor, owner: Tensor) -> Tensor:
    """Sum each group's columns onto its owner column; other columns become zero."""
    return torch.zeros_like(columns).index_add_(1, owner, columns)


def _conv_backward(grad: Tensor, x: Tensor, weight: Tensor, conv: nn.Conv2d, needs_x: bool,
                   needs_w: bool) -> tuple[Tensor | None, Tensor | None]:  # fmt: skip
    """BWD-DATA and BWD-WEIGHT of a conv from one output gradient, in one call."""
    grad_x, grad_w, _ = torch.ops.aten.convolution_backward(
        grad, x, weight, None, conv.stride, conv.padding, conv.dilation, False, [0, 0],
        conv.groups, (needs_x, needs_w, False),
    )  # fmt: skip
    return grad_x, grad_w


class _ReusedConv2d(torch.autograd.Function):
    """Conv whose output pixels may be copies of other pixels' outputs.

    Backward: BWD-DATA is dense (each pixel's own gradient), BWD-WEIGHT optionally folds each
    group's gradients onto the representative window: dW = sum_g (sum_{p in g} dy_p) x_rep^T.
    """

    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor, bias: Tensor | None, reuse: ReuseMap,
                conv: nn.Conv2d) -> Tensor:  # fmt: skip
        y = F.conv2d(x, weight, bias, conv.stride, conv.padding, conv.dilation, conv.groups)
        if reuse.hits:
            y = conv_uncolumns(conv_columns(y).index_select(1, reuse.owner), y.shape)
        ctx.save_for_backward(x, weight)
        ctx.conv, ctx.has_bias, ctx.owner = conv, bias is not None, reuse.owner
        ctx.fold = reuse.folds
        return y

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        x, weight = ctx.saved_tensors
        needs_x, needs_w, needs_b = ctx.needs_input_grad[:3]
        fold = ctx.fold and needs_w
        dense_w = needs_w and not fold
        grad_x = grad_w = None
        if needs_x or dense_w:
            grad_x, grad_w = _conv_backward(grad, x, weight, ctx.conv, needs_x, dense_w)
        if fold:
            folded = conv_uncolumns(fold_columns(conv_columns(grad), ctx.owner), grad.shape)
            _, grad_w = _conv_backward(folded, x, weight, ctx.conv, False, True)
        grad_b = grad.sum((0, 2, 3)) if ctx.has_bias and needs_b else None
        return grad_x, grad_w, grad_b, None, None


class _ReusedLinear(torch.autograd.Function):
    """Linear layer whose output rows may be copies of other rows' outputs (see above)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor, bias: Tensor | None,
                reuse: ReuseMap) -> Tensor:  # fmt: skip
        rows = x.reshape(-1, x.shape[-1])
        y = F.linear(rows, weight, bias)
        if reuse.hits:
            y = y.index_select(0, reuse.owner)
        ctx.save_for_backward(rows, weight)
        ctx.has_bias, ctx.in_shape, ctx.owner = bias is not None, x.shape, reuse.owner
        ctx.fold = reuse.folds
        return y.reshape(*x.shape[:-1], weight.shape[0])

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        rows, weight = ctx.saved_tensors
        grad_rows = grad.reshape(-1, grad.shape[-1])
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = (grad_rows @ weight).reshape(ctx.in_shape)
        if ctx.needs_input_grad[1]:
            folded = fold_columns(grad_rows.T, ctx.owner) if ctx.fold else grad_rows.T
            grad_w = folded @ rows
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_b = grad_rows.sum(0)
        return grad_x, grad_w, grad_b, None


class GemmLayer(nn.Module):
    """A conv or linear layer (kept as `inner`, so its parameters are the model's)."""

    def __init__(self, name: str, inner: nn.Conv2d | nn.Linear) -> None:
        super().__init__()
        if isinstance(inner, nn.Conv2d) and inner.groups != 1:
            raise ValueError("grouped convolutions are not lowered to one GEMM")
        self.name = name
        self.inner = inner
        self.hooks: LayerHooks | None = None
        self.is_classifier = False  # set by `mark_classifier`

    @property
    def is_conv(self) -> bool:
        return isinstance(self.inner, nn.Conv2d)

    @property
    def weight(self) -> nn.Parameter:
        return self.inner.weight

    def forward(self, x: Tensor) -> Tensor:
        hooks = self.hooks
        if hooks is None:
            return self.inner(x)
        reuse = hooks.reuse_map(self, x)
        if reuse is None:
            y = self.inner(x)
        elif isinstance(self.inner, nn.Conv2d):
            y = _ReusedConv2d.apply(x, self.inner.weight, self.inner.bias, reuse, self.inner)
        else:
            y = _ReusedLinear.apply(x, self.inner.weight, self.inner.bias, reuse)
        if y.requires_grad:
            y.register_hook(lambda grad: hooks.output_grad(self, grad))
        hooks.after_forward(self, x, y)
        return y


class MatMulSite(nn.Module):
    """A product of two activations (a @ b), e.g. attention scores; it has no weights."""

    def __init__(self) -> None:
        super().__init__()
        self.name = ""  # set to its module path by `instrument`
        self.hooks: LayerHooks | None = None

    def forward(self, a: Tensor, b: Tensor) -> Tensor:
        if self.hooks is not None:
            self.hooks.matmul_forward(self, a, b)
        return a @ b


def instrument(model: nn.Module) -> list[GemmLayer | MatMulSite]:
    """Wrap every conv/linear of `model` in a GemmLayer named by its module path; return all
    GEMM sites in module order."""
    for parent_name, parent in list(model.named_modules()):
        for child_name, child in list(parent.named_children()):
            path = f"{parent_name}.{child_name}" if parent_name else child_name
            if isinstance(child, nn.Conv2d | nn.Linear):
                setattr(parent, child_name, GemmLayer(path, child))
            elif isinstance(child, MatMulSite):
                child.name = path
    return gemm_sites(model)


def mark_classifier(model: nn.Module, input_shape: tuple[int, ...]) -> GemmLayer | None:
    """Find the instrumented model's classifier, the GEMM layer whose output tensor is the
    model's output, by one forward pass of a zero image in eval mode (no statistics change, no
    random numbers drawn); flag it `is_classifier` and return it (None if no layer's output is
    the model's output)."""
    layers = [m for m in model.modules() if isinstance(m, GemmLayer)]
    outputs: list[tuple[Tensor, nn.Module]] = []
    handles = [
        layer.register_forward_hook(lambda module, _args, y: outputs.append((y, module)))
        for layer in layers
    ]
    was_training = model.training
    try:
        model.eval()
        with torch.no_grad():
            logits = model(torch.zeros(1, *input_shape))
    finally:
        model.train(was_training)
        for handle in handles:
            handle.remove()
    classifier = next((module for y, module in outputs if y is logits), None)
    for layer in layers:
        layer.is_classifier = layer is classifier
    return classifier


def gemm_sites(model: nn.Module) -> list[GemmLayer | MatMulSite]:
    return [m for m in model.modules() if isinstance(m, GemmLayer | MatMulSite)]


def attach_hooks(model: nn.Module, hooks: LayerHooks | None) -> None:
    for site in gemm_sites(model):
        site.hooks = hooks
