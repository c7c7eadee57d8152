"""Record every layer's GEMMs during training and measure their sparsity: the workload.

The recorder counts how often each pass ran and, on sampled mini-batches (every
`measure_every`-th, always on a batch that runs backward), measures per-row / per-column non-zero
counts of each pass's operands on the real tensors. Each operand keeps a fixed-size uniform
sample of its rows (columns) pooled over all measured batches (sparsity.RowSample, SAMPLE_ROWS
rows, seeded from the run's seed); the stored per-lane counts are that sample and the stored
density is the sample's, so zero-skipping cycles and storage traffic see the same sparsity.
Operands measured only as a density (attention products) and the density of each GEMM's output
as written (density_c: FWD output before any activation) are means over the measured batches.
For convolutions the recorder also measures the 1-D dataflow's work per tensor row
(backend.sim.row_dataflow), from the latest measured batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import torch
from torch import Tensor, nn

from backend.sim import row_dataflow
from backend.sim.workload import GemmOp, TrainingPass
from backend.training import sparsity
from backend.training.gemm_shapes import attention_gemms, conv_gemms, linear_gemms
from backend.training.layers import GemmLayer, MatMulSite
from backend.training.sparsity import OperandCounts, RowSample
from backend.training.technique import EpochFigures

FWD, BWD_DATA, BWD_WEIGHT = TrainingPass.FWD, TrainingPass.BWD_DATA, TrainingPass.BWD_WEIGHT
MEASURE_EVERY = 8  # batches between workload measurements (each costs about one backward)


class OperandStats:
    """One operand's pooled row sample (when counts are measured) or its running mean density."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.sample: RowSample | None = None
        self.density_sum = 0.0
        self.measured = 0
        self.line_macs: np.ndarray | None = None  # 1-D dataflow work per row of the tensor

    def add(self, observed: OperandCounts) -> None:
        if self.sample is None:
            self.sample = RowSample(self.rng)
        self.sample.add(observed)

    def add_density(self, value: float) -> None:
        self.density_sum += value
        self.measured += 1

    @property
    def counts(self) -> np.ndarray | None:
        return None if self.sample is None else self.sample.counts.copy()

    @property
    def density(self) -> float:
        if self.sample is not None:
            return self.sample.density
        return self.density_sum / self.measured if self.measured else 1.0


@dataclass
class PassRecord:
    rng: np.random.Generator
    executions: int = 0
    a: OperandStats = field(init=False)
    b: OperandStats = field(init=False)
    c: OperandStats = field(init=False)

    def __post_init__(self) -> None:
        self.a, self.b, self.c = (OperandStats(self.rng) for _ in range(3))


@dataclass
class LayerRecord:
    gemms: dict[TrainingPass, GemmOp]  # one mini-batch's dense GEMMs, from the lowering
    weight_count: int
    rng: np.random.Generator
    passes: dict[TrainingPass, PassRecord] = field(init=False)

    def __post_init__(self) -> None:
        self.passes = {p: PassRecord(self.rng) for p in TrainingPass}

    # per-epoch element counts for the run's overall FWD / BWD densities
    epoch_nonzero: dict[str, float] = field(default_factory=lambda: {"x": 0.0, "grad": 0.0})
    epoch_elements: dict[str, float] = field(default_factory=lambda: {"x": 0.0, "grad": 0.0})


class WorkloadRecorder:
    def __init__(
        self, measure_every: int = MEASURE_EVERY, measure: bool = True, seed: int = 0
    ) -> None:
        self.measure_every = measure_every
        self.measure = measure
        self.rng = np.random.default_rng(seed)  # the row samples'; layers measure in order
        self.layers: dict[str, LayerRecord] = {}
        self._pending = True  # a measurement is due at the next batch that runs backward
        self._measuring = False
        self._ran_forward: set[str] = set()

    # -- batch boundaries (called by the training loop) --------------------------------------
    def start_batch(self, index: int, runs_backward: bool) -> None:
        if index % self.measure_every == 0:
            self._pending = True
        self._measuring = self.measure and self._pending and runs_backward
        if self._measuring:
            self._pending = False
        self._ran_forward.clear()

    def end_batch(self, backward_ran: bool) -> None:
        if backward_ran:
            for name in self._ran_forward:
                passes = self.layers[name].passes
                passes[BWD_WEIGHT].executions += 1
                if BWD_DATA in self.layers[name].gemms:
                    passes[BWD_DATA].executions += 1

    # -- layer hooks ---------------------------------------------------------------------------
    def _record_geometry(self, layer: GemmLayer, x: Tensor, y: Tensor) -> LayerRecord:
        record = self.layers.get(layer.name)
        needs_grad = x.requires_grad
        if record is None or (needs_grad and BWD_DATA not in record.gemms):
            inner = layer.inner
            gemms = (
                conv_gemms(layer.name, inner, tuple(x.shape), needs_grad)
                if isinstance(inner, nn.Conv2d)
                else linear_gemms(layer.name, inner, tuple(x.shape), needs_grad)
            )
            if record is None:
                record = LayerRecord(gemms, layer.weight.numel(), self.rng)
                self.layers[layer.name] = record
            else:
                record.gemms = gemms
        return record

    def after_forward(self, layer: GemmLayer, x: Tensor, y: Tensor) -> None:
        record = self._record_geometry(layer, x, y)
        record.passes[FWD].executions += 1
        self._ran_forward.add(layer.name)
        if not self._measuring:
            return
        with torch.no_grad():
            passes = record.passes
            inner = layer.inner
            mask = sparsity.nonzero_mask(x)
            if isinstance(inner, nn.Conv2d):
                passes[FWD].a.add(sparsity.conv_input_windows(mask, inner))
                passes[BWD_WEIGHT].b.add(sparsity.conv_input_columns(mask, inner, y.shape))
                geometry = record.gemms[FWD].conv
                assert geometry is not None
                x_lines = sparsity.line_macs(mask, row_dataflow.input_taps(geometry))
                passes[FWD].a.line_macs = passes[BWD_WEIGHT].b.line_macs = x_lines
                w_mask = sparsity.nonzero_mask(layer.weight.detach())
                w_lines = sparsity.line_macs(w_mask, row_dataflow.kernel_taps(geometry))
                passes[FWD].b.line_macs = passes[BWD_DATA].b.line_macs = w_lines
            else:
                passes[FWD].a.add(sparsity.row_counts(mask))
                passes[BWD_WEIGHT].b.add(sparsity.column_counts(mask))
            passes[FWD].b.add(sparsity.weight_per_output(layer.weight))
            passes[FWD].c.add_density(sparsity.density(y))
            passes[BWD_DATA].b.add(sparsity.weight_per_input(layer.weight))
            record.epoch_nonzero["x"] += float(sparsity.count(mask))
            record.epoch_elements["x"] += x.numel()

    def output_grad(self, layer: GemmLayer, grad: Tensor) -> Tensor:
        if self._measuring:
            record = self.layers[layer.name]
            mask = sparsity.nonzero_mask(grad)
            record.passes[BWD_DATA].a.add(sparsity.grad_rows(mask, layer.is_conv))
            record.passes[BWD_WEIGHT].a.add(sparsity.grad_channels(mask, layer.is_conv))
            geometry = record.gemms[FWD].conv
            if geometry is not None:
                lines = sparsity.line_macs(mask, row_dataflow.gradient_taps(geometry))
                record.passes[BWD_DATA].a.line_macs = lines
                record.passes[BWD_WEIGHT].a.line_macs = lines
            record.epoch_nonzero["grad"] += float(sparsity.count(mask))
            record.epoch_elements["grad"] += grad.numel()
        return grad

    def matmul_forward(self, site: MatMulSite, a: Tensor, b: Tensor) -> None:
        record = self.layers.get(site.name)
        if record is None:
            gemms = attention_gemms(site.name, tuple(a.shape), tuple(b.shape))
            record = LayerRecord(gemms, 0, self.rng)
            self.layers[site.name] = record
        record.passes[FWD].executions += 1
        self._ran_forward.add(site.name)
        if self._measuring:
            record.passes[FWD].a.add_density(sparsity.density(a))
            record.passes[FWD].b.add_density(sparsity.density(b))

    # -- results -------------------------------------------------------------------------------
    def epoch_densities(self) -> EpochFigures:
        """The FWD-input and BWD-gradient densities of this epoch's measured batches, overall
        and per layer (`density_fwd`, `density_bwd`: backend/specs/figures.py); resets the
        epoch counters."""
        keys = {"x": "density_fwd", "grad": "density_bwd"}
        totals = {"x": [0.0, 0.0], "grad": [0.0, 0.0]}
        densities = EpochFigures()
        for name, record in self.layers.items():
            figures: dict[str, float] = {}
            for key, figure in keys.items():
                elements = record.epoch_elements[key]
                if elements:
                    figures[figure] = record.epoch_nonzero[key] / elements
                    totals[key][0] += record.epoch_nonzero[key]
                    totals[key][1] += elements
                record.epoch_nonzero[key] = record.epoch_elements[key] = 0.0
            if figures:
                densities.per_layer[name] = figures
        for key, (nonzero, elements) in totals.items():
            if elements:
                densities.scalars[keys[key]] = nonzero / elements
        return densities

    def build_ops(self) -> list[GemmOp]:
        ops: list[GemmOp] = []
        for record in self.layers.values():
            for pass_, template in record.gemms.items():
                stats = record.passes[pass_]
                op = replace(
                    template,
                    executions=stats.executions,
                    density_a=stats.a.density,
                    density_b=stats.b.density,
                    density_c=stats.c.density,
                    a_row_nnz=stats.a.counts,
                    b_col_nnz=stats.b.counts,
                    a_line_macs=stats.a.line_macs,
                    b_line_macs=stats.b.line_macs,
                )
                if pass_ == BWD_WEIGHT and record.weight_count:
                    op.extra_ops["weight_updates"] = float(record.weight_count)
                ops.append(op)
        return ops
