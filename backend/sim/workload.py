"""A training workload as the simulator sees it: GEMMs with what the techniques measured on them.

The training engine fills these in from what a real training did; the simulator turns them into
cycles, memory traffic and energy. Every GEMM multiplies A (m x k) by B (k x n), the convention of
SCALE-Sim: for a convolution m = output pixels of the whole mini-batch, k = C*R*S (one im2col
window) and n = output channels.

A workload is stored once per training and re-simulated on any accelerator, so everything here
is plain data that survives a round trip through JSON.
"""

from __future__ import annotations

import base64
import zlib
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from typing import Any, Literal

import numpy as np


class TrainingPass(StrEnum):
    FWD = "fwd"  # y = W x
    BWD_DATA = "bwd_data"  # dx = W^T dy
    BWD_WEIGHT = "bwd_weight"  # dW = dy x^T


GemmRole = Literal["compute", "overhead"]


@dataclass(frozen=True)
class ConvGeometry:
    """The convolution a GEMM was lowered from, so memory models can move the real tensors
    (input feature map with its halo, output gradient, dX in image space) instead of im2col
    windows. Which tensor each operand is follows from the GEMM's pass (backend.sim.lowering).
    Channel counts are the whole layer's; a GEMM is one of `groups` groups."""

    batch: int
    in_channels: int  # C
    out_channels: int  # K
    height: int  # H of the input
    width: int  # W of the input
    kernel_h: int  # R
    kernel_w: int  # S
    stride_h: int = 1
    stride_w: int = 1
    pad_h: int = 0
    pad_w: int = 0
    dilation_h: int = 1
    dilation_w: int = 1
    groups: int = 1

    @property
    def out_h(self) -> int:
        return (self.height + 2 * self.pad_h - self.dilation_h * (self.kernel_h - 1) - 1) // (
            self.stride_h
        ) + 1

    @property
    def out_w(self) -> int:
        return (self.width + 2 * self.pad_w - self.dilation_w * (self.kernel_w - 1) - 1) // (
            self.stride_w
        ) + 1


# Where an overhead GEMM runs: the systolic array; ADA-GP's gradient predictor unit; or MERCURY's
# signature projection unit, fed by the FWD input stream of the layer named in `fused_with`. On
# an accelerator without the unit the GEMM runs on the array.
GemmUnit = Literal["array", "predictor", "projection"]


@dataclass
class GemmOp:
    """One GEMM of one training pass of one layer, aggregated over the whole training.

    `executions` counts the mini-batches in which this GEMM ran; the workload's `iterations`
    counts all mini-batches, so a pass skipped by ADA-GP's predicted-gradient steps has
    executions < iterations. Densities of A and B are measured on a fixed-size uniform sample
    of rows (columns) pooled over the measured mini-batches (backend.training.recorder), the same
    sample the per-lane counts are; reuse fractions are means over the executions.
    """

    layer: str
    pass_: TrainingPass
    m: int
    k: int
    n: int
    executions: int
    role: GemmRole = "compute"
    # Fraction of non-zero elements in A and B, measured (1.0 = dense).
    density_a: float = 1.0
    density_b: float = 1.0
    # Fraction of non-zero elements in C as the GEMM writes it (FWD: the layer's output before
    # any activation; BWD-DATA: the input gradient; BWD-WEIGHT: the weight gradient). 1.0 when
    # not measured, e.g. in workloads stored before it was.
    density_c: float = 1.0
    # Non-zero count of each row of A and each column of B (i.e. along k), so zero-skipping
    # cycles see the real load imbalance between PE rows/columns. Each is a uniform sample of
    # rows (columns) pooled over the measured mini-batches, so its length need not be m (n):
    # lane loads are drawn from it (workloads stored before sampling hold one batch's counts).
    a_row_nnz: np.ndarray | None = None
    b_col_nnz: np.ndarray | None = None
    # For the 1-D convolution dataflow (backend.sim.row_dataflow), per 1-D row of the tensor behind
    # A and B (x and dY rows in (n, channel, row) order, W rows in (k, c, r) order): the products
    # a PE issues convolving that row when it skips the row's zeros. Same mini-batch as above.
    a_line_macs: np.ndarray | None = None
    b_line_macs: np.ndarray | None = None
    # MERCURY: fraction of A's rows whose output is copied from the MCACHE instead of computed.
    reused_row_fraction: float = 0.0
    # MERCURY BWD-WEIGHT: fraction of the k (reduction) dimension left after summing the rows
    # of each hit group (k_effective = k * folded_k_fraction).
    folded_k_fraction: float = 1.0
    # Work outside the GEMM, per execution: e.g. "mcache_lookups", "mcache_writes",
    # "result_copies" (words), "int_adds", "compares", "random_numbers", "weight_updates".
    extra_ops: dict[str, float] = field(default_factory=dict)
    # Independent GEMMs of this shape run back to back (grouped/depthwise convolutions, attention
    # heads x batch); every count above is per group.
    groups: int = 1
    runs_on: GemmUnit = "array"
    # The convolution behind this GEMM; None for linear layers, attention and workloads stored
    # before geometry was recorded (those are simulated with the im2col convention).
    conv: ConvGeometry | None = None
    # The layer whose same-pass compute GEMM streams this GEMM's A operand (MERCURY's signature
    # projection reads the FWD input as it enters the array): A costs no DRAM reads of its own.
    fused_with: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, np.ndarray):
                value = encode_counts(value)
            elif isinstance(value, TrainingPass):
                value = value.value
            elif isinstance(value, dict):
                value = dict(value)
            elif isinstance(value, ConvGeometry):
                value = asdict(value)
            out[f.name] = value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GemmOp:
        values = dict(data)
        values["pass_"] = TrainingPass(values["pass_"])
        for name in COUNT_FIELDS:
            if values.get(name) is not None:
                values[name] = decode_counts(values[name])
        if values.get("conv") is not None:
            values["conv"] = ConvGeometry(**values["conv"])
        return cls(**values)


@dataclass
class Workload:
    """Everything one training asked of an accelerator."""

    model: str
    dataset: str
    batch_size: int
    iterations: int
    ops: list[GemmOp]
    technique: str = "baseline"

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "dataset": self.dataset,
            "batch_size": self.batch_size,
            "iterations": self.iterations,
            "technique": self.technique,
            "ops": [op.to_dict() for op in self.ops],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Workload:
        return cls(
            model=data["model"],
            dataset=data["dataset"],
            batch_size=data["batch_size"],
            iterations=data["iterations"],
            technique=data.get("technique", "baseline"),
            ops=[GemmOp.from_dict(op) for op in data["ops"]],
        )


COUNT_FIELDS = ("a_row_nnz", "b_col_nnz", "a_line_macs", "b_line_macs")


def encode_counts(counts: np.ndarray) -> dict[str, Any]:
    """Pack an integer array as compressed base64 so a workload stays small in JSON."""
    array = np.ascontiguousarray(counts, dtype="<u4")
    packed = base64.b64encode(zlib.compress(array.tobytes(), 6)).decode("ascii")
    return {"dtype": "<u4", "length": int(array.size), "zlib_b64": packed}


def decode_counts(packed: dict[str, Any] | list[int]) -> np.ndarray:
    if isinstance(packed, list):
        return np.asarray(packed, dtype=np.int64)
    raw = zlib.decompress(base64.b64decode(packed["zlib_b64"]))
    return np.frombuffer(raw, dtype=packed["dtype"]).astype(np.int64)
