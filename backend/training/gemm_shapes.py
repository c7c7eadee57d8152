"""The GEMMs of each training pass of a layer, from the simulator's own lowering.

The convention (backend/sim/lowering.py) is A (m x k) @ B (k x n); for a conv with P output
pixels over the mini-batch and K filters of C x R x S:

    FWD         m = P,  k = C*R*S, n = K     A = im2col(x), B = W
    BWD-DATA    m = P,  k = K,     n = C*R*S A = dy,        B = W^T
    BWD-WEIGHT  m = K,  k = P,     n = C*R*S A = dy^T,      B = im2col(x)

A linear layer is the same with its input rows (batch x tokens) in place of P. Attention's two
activation products are one GEMM per (batch, head) (`groups`). The engine drops BWD-DATA where
no gradient flows to a layer's input (the first layer: its input is the data).
"""

from __future__ import annotations

from torch import nn

from backend.sim.lowering import lower_attention, lower_conv2d, lower_linear
from backend.sim.workload import GemmOp, TrainingPass


def _keep(ops: list[GemmOp], input_needs_grad: bool) -> dict[TrainingPass, GemmOp]:
    return {op.pass_: op for op in ops if input_needs_grad or op.pass_ != TrainingPass.BWD_DATA}


def conv_gemms(
    name: str, conv: nn.Conv2d, x_shape: tuple[int, ...], input_needs_grad: bool
) -> dict[TrainingPass, GemmOp]:
    if isinstance(conv.padding, str):
        raise ValueError(f"{name}: string padding is not lowered")
    batch, channels, height, width = x_shape
    ops = lower_conv2d(
        name,
        batch,
        channels,
        conv.out_channels,
        height,
        width,
        kernel=tuple(conv.kernel_size),  # type: ignore[arg-type]
        stride=tuple(conv.stride),  # type: ignore[arg-type]
        padding=tuple(conv.padding),  # type: ignore[arg-type]
        groups=conv.groups,
        dilation=tuple(conv.dilation),  # type: ignore[arg-type]
    )
    return _keep(ops, input_needs_grad)


def linear_gemms(
    name: str, linear: nn.Linear, x_shape: tuple[int, ...], input_needs_grad: bool
) -> dict[TrainingPass, GemmOp]:
    rows = 1
    for size in x_shape[:-1]:
        rows *= size
    return _keep(
        lower_linear(name, rows, linear.in_features, linear.out_features), input_needs_grad
    )


def attention_gemms(
    name: str, a_shape: tuple[int, ...], b_shape: tuple[int, ...]
) -> dict[TrainingPass, GemmOp]:
    """The passes of one attention product site, named '<attention>.scores' (Q @ K^T, with b =
    K^T of shape (batch, heads, d, Lk)) or '<attention>.context' (P @ V)."""
    attention, _, role = name.rpartition(".")
    batch, heads, query_len = a_shape[0], a_shape[1], a_shape[2]
    if role == "scores":
        head_dim, key_len = a_shape[3], b_shape[3]
    elif role == "context":
        key_len, head_dim = a_shape[3], b_shape[3]
    else:
        raise ValueError(f"{name}: an attention site must be named '.scores' or '.context'")
    ops = lower_attention(attention, batch, heads, query_len, head_dim, key_len)
    return {op.pass_: op for op in ops if op.layer == name}
