"""The 1-D convolution ("row") dataflow: PEs convolve input rows with kernel rows, skipping zeros.

SparseTrain's accelerator computes a convolution as 1-D convolutions of rows (paper); how rows are
placed on the PEs is not published, so the mapping below is ours (an Eyeriss-like row-stationary
placement), stated once and checked against a per-PE, per-time-step reference in the tests.

Notation, for one group of a convolution (backend.sim.workload.ConvGeometry): Cg = C / groups input
and Kg = K / groups output channels, kernel R x S, input H x W, output OH x OW, and
h(oh, r) = oh * stride_h - pad_h + r * dilation_h, the input (or dX) row that kernel row r meets
for output row oh; a row outside [0, H) lies in the vertical padding.

A *1-D task* is one PE convolving one row with one kernel row. The PE array (rows x cols PEs)
holds, per pass:

    pass        PE row lane (u, r)        PE column j            time step t      output row
    FWD         kernel row W[k, c, r],    output row (n, oh)     c in Cg          Y[n, k, oh]
                u = k in Kg               input x[n, c, h(oh, r)]
    BWD-DATA    kernel row W[k, c, r],    gradient row (n, oh)   k in Kg          dX[n, c, h]
                u = c in Cg               dY[n, k, oh]                            h = h(oh, r)
    BWD-WEIGHT  gradient row dW[k, c, r], k in Kg                (n, oh), N*OH    dW[k, c, r]
                u = c in Cg               x[n, c, h(oh, r)] with dY[n, k, oh]

Reductions: in FWD the R PEs of filter k in a column add their partial output rows down the
column (r reduced in space) and the column's output row accumulates over c in place (C reduced in
time). In BWD-DATA the R PEs of channel c in column (n, oh) produce partial rows of the R dX rows
h(oh, r), accumulated on chip (K reduced in time; r scatters to neighbouring dX rows, summed as
they drain). In BWD-WEIGHT each PE keeps its dW row stationary and accumulates over every (n, oh)
(the batch and output rows reduced in time).

Folding over time: when R <= rows, f = rows // R lanes u sit on R consecutive PE rows each, giving
ceil(U / f) row folds that each hold all R kernel rows; when R > rows, each u's kernel rows are
cut into ceil(R / rows) pieces of at most `rows`, giving U * ceil(R / rows) row folds. Columns fold
into ceil(J / cols) column folds of consecutive j. Folds run one after the other. Within a fold the
PEs run the time steps in lockstep (a step's rows reach every PE at once and a column's partial
sums meet), so a step takes as long as the fold's busiest PE: load imbalance. Each fold adds
rows + cols - 2 cycles of fill and drain (as output stationary), and, as in SCALE-Sim, the count
is the index of the last cycle: cycles = sum over folds (sum over t of the step time + rows +
cols - 2) - 1.

Work of a task, one MAC per PE per cycle:
- dense (no zero-skipping, or a pass with no sparse operand): S * OW products, padding included,
  exactly the im2col GEMM's MACs;
- skipping zeros: the PE walks the compressed non-zeros of the *skipped* row and issues exactly the
  products of those non-zeros with real (non-padding) elements of the partner row. A task whose
  input, dX or x row lies in the vertical padding does nothing. The skipped row is the sparser
  operand of the pass (lower measured density; A on a tie): FWD x or W, BWD-DATA dY or W,
  BWD-WEIGHT dY or x. Per skipped row this is
      x row:  sum over w of nz(x[w]) * #{(ow, s): ow * stride_w - pad_w + s * dilation_w = w}
      dY row: sum over ow of nz(dY[ow]) * #{s: the product lands on a real column of dX / x}
      W row:  sum over s of nz(W[s]) * #{ow: the product meets a real column of x / dX}
  measured per row on the real tensors by the training (GemmOp.a_line_macs / b_line_macs, rows in
  the tensor's (n, channel, row) order, W's in (k, c, r) order). A count array shorter than the
  tensor (a sample of rows) is repeated in order to cover it; without counts every task of the
  skipped operand does ceil(density * S * OW).

GEMMs without convolution geometry (linear layers, attention, MERCURY's projection, ADA-GP's
predictors) fall back to output stationary: a linear layer is a 1-D convolution whose kernel row
spans the whole input row, so PE (i, j) computing row i of A against column j of B with zero
skipping along k (backend.sim.zero_skipping) is the same dataflow. MERCURY's reuse on a conv
(rows of A not computed, k folded) scales the step time by the fraction of the GEMM left, as the
1-D mapping has no im2col rows to drop. SRAM requests and DRAM traffic are counted as output
stationary's (backend.sim.memory).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from backend.sim.systolic import ceil_div
from backend.sim.workload import ConvGeometry, GemmOp, TrainingPass


@dataclass(frozen=True)
class TaskSpace:
    """The 1-D tasks of one group of one pass: lanes u x kernel rows r, columns j, time steps t,
    and the dense products of one task."""

    lanes: int  # U
    kernel_rows: int  # R
    columns: int  # J
    steps: int  # T
    products: int  # S * OW


def task_space(op: GemmOp) -> TaskSpace:
    g = op.conv
    assert g is not None
    cg, kg = g.in_channels // g.groups, g.out_channels // g.groups
    rows_out = g.batch * g.out_h
    lanes, columns, steps = {
        TrainingPass.FWD: (kg, rows_out, cg),
        TrainingPass.BWD_DATA: (cg, rows_out, kg),
        TrainingPass.BWD_WEIGHT: (cg, kg, rows_out),
    }[op.pass_]
    return TaskSpace(lanes, g.kernel_h, columns, steps, g.kernel_w * g.out_w)


def row_folds(lanes: np.ndarray, kernel_rows: np.ndarray, rows: np.ndarray) -> np.ndarray:
    per_fold = np.maximum(rows // np.maximum(kernel_rows, 1), 1)
    return np.where(
        kernel_rows <= rows, ceil_div(lanes, per_fold), lanes * ceil_div(kernel_rows, rows)
    )


@dataclass(frozen=True)
class RowMapping:
    """Folds, fill/drain and SCALE-Sim-style mapping efficiency of the row dataflow."""

    row_folds: np.ndarray
    col_folds: np.ndarray
    fill_drain: np.ndarray
    mapping_efficiency: np.ndarray

    @property
    def folds(self) -> np.ndarray:
        return self.row_folds * self.col_folds


def map_rows(
    lanes: np.ndarray,
    kernel_rows: np.ndarray,
    columns: np.ndarray,
    rows: np.ndarray,
    cols: np.ndarray,
) -> RowMapping:
    rf = row_folds(lanes, kernel_rows, rows)
    cf = ceil_div(columns, cols)
    efficiency = (lanes * kernel_rows / (np.maximum(rf, 1) * rows)) * (
        columns / (np.maximum(cf, 1) * cols)
    )
    return RowMapping(rf, cf, np.broadcast_to(rows + cols - 2, rf.shape), efficiency)


def dense_row_cycles(
    space_steps: np.ndarray, products: np.ndarray, mapping: RowMapping, kept: np.ndarray
) -> np.ndarray:
    """Cycles of one group with every task dense; `kept` is the fraction of the GEMM MERCURY
    leaves (1.0 without reuse)."""
    steps = np.ceil(space_steps * products * kept - 1e-9)
    return mapping.folds * (steps + mapping.fill_drain) - 1


class SparseRows:
    """One sparse conv pass, ready to be timed on any array shape: the per-task work of the
    skipped operand, gathered once (per group) into the layout its folds reduce over."""

    def __init__(self, op: GemmOp) -> None:
        self.space = task_space(op)
        self.op = op
        skip_a = op.density_a <= op.density_b
        self.density = op.density_a if skip_a else op.density_b
        counts = op.a_line_macs if skip_a else op.b_line_macs
        self.uniform = counts is None or len(counts) == 0
        if self.uniform:
            return
        g = op.conv
        assert g is not None
        tensor = _skipped_tensor(op.pass_, skip_a)
        self.groups = [
            _group_work(op.pass_, tensor, _rows_of(tensor, counts, g), g, group)
            for group in range(g.groups)
        ]

    def step_cycles(self, rows: int, cols: int) -> float:
        """Sum over folds of the step times (fill and drain excluded), mean over groups."""
        s = self.space
        if self.uniform:
            rf = int(row_folds(np.int64(s.lanes), np.int64(s.kernel_rows), np.int64(rows)))
            work = np.ceil(self.density * s.products - 1e-9)
            return float(rf * -(-s.columns // cols) * s.steps * work)
        total = sum(work.steps(rows, cols, s) for work in self.groups)
        return total / len(self.groups)


class _ColumnWork:
    """Work that depends on the column j, the kernel row r and the step t, not on the lane u:
    x[r, j, t]. Sums per (kernel-row piece, column tile) are kept: a sweep over array shapes
    meets the same ones again."""

    def __init__(self, x: np.ndarray) -> None:
        self.x = x  # (R, J, T)
        self._busiest: dict[tuple[int, int, int], float] = {}

    def steps(self, rows: int, cols: int, s: TaskSpace) -> float:
        total = 0.0
        for piece, repeats in _row_pieces(s, rows):
            key = (piece.start, piece.stop, cols)
            if key not in self._busiest:
                per_column = self.x[piece].max(axis=0)  # (J, T)
                pad = -per_column.shape[0] % cols
                if pad:
                    per_column = np.concatenate([per_column, np.zeros((pad, s.steps))])
                busiest = per_column.reshape(-1, cols, s.steps).max(axis=1)
                self._busiest[key] = float(busiest.sum())
            total += repeats * self._busiest[key]
        return total


@dataclass(frozen=True)
class _LaneWork:
    """Work that depends on the lane u, the kernel row r and the step t: y[u, r, t], done only
    where the task's row is real: real[r, j]."""

    y: np.ndarray  # (U, R, T)
    real: np.ndarray  # (R, J) bool

    def steps(self, rows: int, cols: int, s: TaskSpace) -> float:
        per_fold = max(rows // s.kernel_rows, 1) if s.kernel_rows <= rows else 1
        total = 0.0
        for piece, _ in _row_pieces(s, rows):
            y = self.y[:, piece, :]
            pad = -y.shape[0] % per_fold
            if pad:
                y = np.concatenate([y, np.zeros((pad, *y.shape[1:]))])
            lanes = y.reshape(-1, per_fold, *y.shape[1:]).max(axis=1)  # (folds, r, T)
            real = self.real[piece]
            pad = -real.shape[1] % cols
            if pad:
                real = np.concatenate([real, np.zeros((real.shape[0], pad), bool)], axis=1)
            patterns, counts = np.unique(
                real.reshape(real.shape[0], -1, cols).any(axis=2).T, axis=0, return_counts=True
            )
            for pattern, count in zip(patterns, counts, strict=True):
                busiest = (lanes * pattern[None, :, None]).max(axis=1)
                total += int(count) * float(busiest.sum())
        return total


def _row_pieces(s: TaskSpace, rows: int) -> list[tuple[slice, int]]:
    """The kernel-row sets of the row folds, with how many row folds hold each."""
    if s.kernel_rows <= rows:
        per_fold = max(rows // s.kernel_rows, 1)
        return [(slice(0, s.kernel_rows), -(-s.lanes // per_fold))]
    return [
        (slice(p, min(p + rows, s.kernel_rows)), s.lanes) for p in range(0, s.kernel_rows, rows)
    ]


def _skipped_tensor(pass_: TrainingPass, skip_a: bool) -> str:
    return {
        TrainingPass.FWD: ("x", "w"),
        TrainingPass.BWD_DATA: ("dy", "w"),
        TrainingPass.BWD_WEIGHT: ("dy", "x"),
    }[pass_][0 if skip_a else 1]


def _rows_of(tensor: str, counts: np.ndarray, g: ConvGeometry) -> np.ndarray:
    shape = {
        "x": (g.batch, g.in_channels, g.height),
        "dy": (g.batch, g.out_channels, g.out_h),
        "w": (g.out_channels, g.in_channels // g.groups, g.kernel_h),
    }[tensor]
    values = np.asarray(counts, dtype=np.float64)
    if values.size != int(np.prod(shape)):
        values = np.resize(values, int(np.prod(shape)))
    return values.reshape(shape)


def _horizontal_products(g: ConvGeometry) -> tuple[np.ndarray, np.ndarray]:
    """For every (ow, s): the input column w it meets, and whether w is real (not padding)."""
    ow = np.arange(g.out_w)[:, None]
    s = np.arange(g.kernel_w)[None, :]
    w = ow * g.stride_w - g.pad_w + s * g.dilation_w
    return w, (w >= 0) & (w < g.width)


def input_taps(g: ConvGeometry) -> np.ndarray:
    """Per input column w: the (ow, s) products an input non-zero there takes part in."""
    w, real = _horizontal_products(g)
    return np.bincount(w[real], minlength=g.width).astype(np.float64)


def gradient_taps(g: ConvGeometry) -> np.ndarray:
    """Per output column ow: the kernel taps whose product with dY[ow] meets a real column."""
    return _horizontal_products(g)[1].sum(axis=1).astype(np.float64)


def kernel_taps(g: ConvGeometry) -> np.ndarray:
    """Per kernel column s: the output columns whose product with W[s] meets a real column."""
    return _horizontal_products(g)[1].sum(axis=0).astype(np.float64)


@lru_cache(maxsize=256)
def input_rows(g: ConvGeometry) -> tuple[np.ndarray, np.ndarray]:
    """h(oh, r) as an (OH, R) array, clipped into [0, H), and whether it is a real row."""
    oh = np.arange(g.out_h)[:, None]
    r = np.arange(g.kernel_h)[None, :]
    h = oh * g.stride_h - g.pad_h + r * g.dilation_h
    real = (h >= 0) & (h < g.height)
    return np.clip(h, 0, g.height - 1), real


def _group_work(
    pass_: TrainingPass, tensor: str, rows: np.ndarray, g: ConvGeometry, group: int
) -> _ColumnWork | _LaneWork:
    cg, kg = g.in_channels // g.groups, g.out_channels // g.groups
    cs, ks = slice(group * cg, (group + 1) * cg), slice(group * kg, (group + 1) * kg)
    h, real = input_rows(g)  # (OH, R)
    n, oh_count, r_count = g.batch, g.out_h, g.kernel_h
    if tensor == "w":  # FWD / BWD-DATA skipping the kernel row: lanes are k (FWD) or c
        w = rows[ks]  # (Kg, Cg, R)
        y = w.transpose(0, 2, 1) if pass_ is TrainingPass.FWD else w.transpose(1, 2, 0)
        real_nj = np.broadcast_to(real.T[:, None, :], (r_count, n, oh_count))
        return _LaneWork(y=y, real=real_nj.reshape(r_count, -1))
    if tensor == "x":
        x = rows[:, cs][:, :, h] * real[None, None]  # (N, Cg, OH, R)
        if pass_ is TrainingPass.FWD:  # x[r, j=(n, oh), t=c]
            return _ColumnWork(x.transpose(3, 0, 2, 1).reshape(r_count, n * oh_count, cg))
        # BWD-WEIGHT skipping x: y[u=c, r, t=(n, oh)], every column (k) real
        y = x.transpose(1, 3, 0, 2).reshape(cg, r_count, n * oh_count)
        return _LaneWork(y=y, real=np.ones((r_count, kg), bool))
    dy = rows[:, ks]  # (N, Kg, OH)
    if pass_ is TrainingPass.BWD_DATA:  # x[r, j=(n, oh), t=k]
        work = dy.transpose(0, 2, 1)[None] * real.T[:, None, :, None]  # (R, N, OH, Kg)
        return _ColumnWork(work.reshape(r_count, n * oh_count, kg))
    # BWD-WEIGHT skipping dY: x[r, j=k, t=(n, oh)]
    work = dy.transpose(1, 0, 2)[None] * real.T[:, None, None, :]  # (R, Kg, N, OH)
    return _ColumnWork(work.reshape(r_count, kg, n * oh_count))
