"""Lowering layers to the GEMMs of one training step (one mini-batch, dense, executions=1).

Convention (SCALE-Sim's): A is m x k, B is k x n, C = A B is m x n. For each pass the operand
that carries the gradient is A, so SparseTrain's pruned gradients are always A's zeros:

    conv2d (P = N*OH*OW output positions, one group: Cg = C/g inputs, Kg = K/g filters)
        FWD         Y    = Xcol W        m = P    k = Cg*R*S  n = Kg    A = im2col(x), B = W
        BWD-DATA    dXcol = dY W^T       m = P    k = Kg      n = Cg*R*S A = dY,  B = W^T
        BWD-WEIGHT  dW^T = dY^T Xcol     m = Kg   k = P       n = Cg*R*S A = dY^T, B = im2col(x)
    linear (N rows, e.g. batch x tokens)
        FWD m=N k=in n=out;  BWD-DATA m=N k=out n=in;  BWD-WEIGHT m=out k=N n=in
    attention matmuls, per (batch, head) as groups; the second operand plays the weight's role
        scores  S = Q K^T:  FWD m=Lq k=d n=Lk; BWD-DATA dQ = dS K: m=Lq k=Lk n=d;
                            BWD-WEIGHT dK = dS^T Q: m=Lk k=Lq n=d
        context O = P V:    FWD m=Lq k=Lk n=d; BWD-DATA dP = dO V^T: m=Lq k=d n=Lk;
                            BWD-WEIGHT dV = P^T dO: m=Lk k=Lq n=d

BWD-DATA is the im2col-space product (its col2im scatter-add is not costed), so all three passes
of a layer have the same dense MAC count. Groups are GEMMs run back to back (GemmOp.groups).
"""

from __future__ import annotations

from dataclasses import replace

from backend.sim.workload import ConvGeometry, GemmOp, TrainingPass


def conv_output_size(size: int, kernel: int, stride: int, padding: int, dilation: int = 1) -> int:
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def _three_passes(
    layer: str,
    fwd: tuple[int, int, int],
    bwd_data: tuple[int, int, int],
    bwd_weight: tuple[int, int, int],
    groups: int,
) -> list[GemmOp]:
    shapes = {
        TrainingPass.FWD: fwd,
        TrainingPass.BWD_DATA: bwd_data,
        TrainingPass.BWD_WEIGHT: bwd_weight,
    }
    return [
        GemmOp(layer=layer, pass_=pass_, m=m, k=k, n=n, executions=1, groups=groups)
        for pass_, (m, k, n) in shapes.items()
    ]


def lower_conv2d(
    layer: str,
    batch: int,
    in_channels: int,
    out_channels: int,
    height: int,
    width: int,
    kernel: int | tuple[int, int],
    stride: int | tuple[int, int] = 1,
    padding: int | tuple[int, int] = 0,
    groups: int = 1,
    dilation: int | tuple[int, int] = 1,
) -> list[GemmOp]:
    kh, kw = _pair(kernel)
    sh, sw = _pair(stride)
    ph, pw = _pair(padding)
    dh, dw = _pair(dilation)
    if in_channels % groups or out_channels % groups:
        raise ValueError(f"{layer}: channels {in_channels}->{out_channels} not divisible by groups")
    out_h = conv_output_size(height, kh, sh, ph, dh)
    out_w = conv_output_size(width, kw, sw, pw, dw)
    if out_h < 1 or out_w < 1:
        raise ValueError(f"{layer}: empty output for input {height}x{width}")
    positions = batch * out_h * out_w
    window = in_channels // groups * kh * kw
    filters = out_channels // groups
    geometry = ConvGeometry(
        batch=batch,
        in_channels=in_channels,
        out_channels=out_channels,
        height=height,
        width=width,
        kernel_h=kh,
        kernel_w=kw,
        stride_h=sh,
        stride_w=sw,
        pad_h=ph,
        pad_w=pw,
        dilation_h=dh,
        dilation_w=dw,
        groups=groups,
    )
    ops = _three_passes(
        layer,
        fwd=(positions, window, filters),
        bwd_data=(positions, filters, window),
        bwd_weight=(filters, positions, window),
        groups=groups,
    )
    return [replace(op, conv=geometry) for op in ops]


def lower_linear(layer: str, rows: int, in_features: int, out_features: int) -> list[GemmOp]:
    """`rows` is every input vector of the mini-batch (batch size, times tokens for sequences)."""
    return _three_passes(
        layer,
        fwd=(rows, in_features, out_features),
        bwd_data=(rows, out_features, in_features),
        bwd_weight=(out_features, rows, in_features),
        groups=1,
    )


def lower_attention(
    layer: str,
    batch: int,
    heads: int,
    query_len: int,
    head_dim: int,
    key_len: int | None = None,
) -> list[GemmOp]:
    """The two activation-activation matmuls of scaled dot-product attention.

    The Q/K/V/output projections are linear layers (lower_linear). Returns the passes of
    `{layer}.scores` (Q K^T) then `{layer}.context` (P V).
    """
    lq, lk, d = query_len, key_len if key_len is not None else query_len, head_dim
    groups = batch * heads
    scores = _three_passes(
        f"{layer}.scores",
        fwd=(lq, d, lk),
        bwd_data=(lq, lk, d),
        bwd_weight=(lk, lq, d),
        groups=groups,
    )
    context = _three_passes(
        f"{layer}.context",
        fwd=(lq, lk, d),
        bwd_data=(lq, d, lk),
        bwd_weight=(lk, lq, d),
        groups=groups,
    )
    return scores + context


def _pair(value: int | tuple[int, int]) -> tuple[int, int]:
    if isinstance(value, tuple):
        return value
    return value, value
