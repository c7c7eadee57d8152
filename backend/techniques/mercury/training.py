"""MERCURY: reuse the outputs of input vectors whose RPQ signatures match (MCACHE).

Per mini-batch and layer: sign every FWD row (signatures.py), stream the signatures through the
layer's MCACHE model (mcache.py) and copy each hit's output from its owner, exactly; BWD-WEIGHT
folds each hit group onto its owner's input (layers.py), BWD-DATA stays dense. After each epoch
the adaptive rule may lengthen signatures (validation loss stalled) and switch off layers whose
hit rate fell below `min_hit_rate`.

Figures per epoch, per layer and over every layer: `hit_rate`, the share of FWD rows that hit
(weighted by rows: the first layer's many cheap background windows dominate it), and
`reuse_macs`, the share of the FWD and BWD-WEIGHT MACs that reuse skipped (a FWD hit row skips
the layer's MACs per row, d x outputs; a folded BWD-WEIGHT position skips as many; BWD-DATA stays
dense and is left out). A batch's BWD-WEIGHT counts only when its backward ran. Per layer, the
figures are that layer's while its reuse is on (`reuse_on` says whether it was). The epoch's
figures count every layer, and a layer whose reuse is off (switched off by the adaptive rule,
or excluded) as reusing nothing: its rows and MACs are in the denominator with no hit, so the
rates do not rise when a layer switches off. Every epoch trains on as many batches, so the
training's figure, the mean over epochs, is the share over the whole training (exactly so while
every batch runs its backward).

The adaptive rule's switch-off is recorded where it is decided: in the epoch at whose end a
layer's hit rate fell below `min_hit_rate`, that layer's figures carry `reuse_off_below`, the
threshold it fell below (its hit rate is beside it); from the next epoch on it is not reused.

The classifier (the layer producing the logits, found by its role: layers.mark_classifier) is
not reused unless `reuse_classifier` is on: there a hit copies another image's logits, its
prediction (measured: -21 points on LeNet-5/MNIST at 16 bits). `excluded_layers` names more.

Defaults measured with benchmarks/mercury_defaults.py (LeNet-5 on 10k MNIST images, 3 epochs,
seeds 0-2, classifier excluded, accuracy change against the same seed's baseline at 95.97%):
centred 16 bits -1.69 points at hit rate 0.75; plain (uncentred) 16 bits collapses to 11%;
centred 32 bits -0.22 points at hit rate 0.57; plain 32 bits -0.25 points at hit rate 0.59-0.62.
Hence 32 bits. At 32 bits both are within 1 point and plain reuses slightly more; centring stays
on because it fails gracefully when a user shortens the signature (16 bits: -1.7 points against
-84.5). With `max_bits` also 32 the adaptive rule does not lengthen signatures unless `max_bits`
is raised.

Knob `centre_inputs` (default on, see MercuryParams): a layer signs x - mu, mu a running mean
of its input vectors (`centre_momentum`, updated with each mini-batch before it is signed).
Post-ReLU inputs all lie in the positive orthant, where most hyperplanes through the origin put
them on the same side: plain sign signatures collide for vectors far apart (and x with 2x), and
copying such "similar" vectors' outputs collapses accuracy (LeNet-5/MNIST at 16 bits). Centred
hyperplanes cut through the data cloud and stop that collapse, but vectors near the origin then
all fall on the side of -R mu and collide, costing about 2 points at 64 bits. Reuse stays exact:
a hit copies the cached output of its owner.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from backend.sim.workload import GemmOp, TrainingPass
from backend.techniques.mercury.mcache import CacheModel, owners
from backend.techniques.mercury.params import MercuryParams
from backend.techniques.mercury.signatures import RandomProjection
from backend.training.layers import GemmLayer, ReuseMap
from backend.training.technique import EpochFigures, Step, Technique, WorkloadOps, add_extra


@dataclass
class _LayerState:
    projection: RandomProjection
    row_macs: int  # MACs of one row of the FWD GEMM (d x outputs), and of one BWD-WEIGHT position
    reusing: bool = True
    epoch_rows: int = 0  # FWD rows of this epoch, reused or not
    epoch_looked_up: int = 0  # of those, rows signed and looked up (reuse on)
    epoch_hits: int = 0
    switched_off: bool = False  # at the end of this epoch, by the adaptive rule
    epoch_weight_rows: int = 0  # rows of this epoch's batches whose BWD-WEIGHT ran
    epoch_folded: int = 0  # hits those batches' BWD-WEIGHT folded
    fwd_hits: int = 0  # over the training
    folded_hits: int = 0  # hits of batches whose BWD-WEIGHT folded them
    signature_batches: dict[int, int] = field(default_factory=lambda: defaultdict(int))


class Mercury(Technique):
    name = "mercury"

    def __init__(self, params: MercuryParams) -> None:
        self.params = params
        self.cache = CacheModel(params.cache, params.cache_entries, params.cache_ways)
        self.bits = params.signature_bits
        self.layers: dict[str, _LayerState] = {}
        self.previous_loss: float | None = None
        self._batch_hits: dict[str, int] = {}
        self._batch_rows: dict[str, int] = {}
        self._bits_this_epoch = self.bits

    def setup(self, model: nn.Module, layers: list[GemmLayer], seed: int) -> None:
        generator = torch.Generator().manual_seed(seed + 3)
        for layer in layers:
            projection = RandomProjection(layer.inner, self.params.max_bits, generator)
            reusing = layer.name not in self.params.excluded_layers and (
                self.params.reuse_classifier or not layer.is_classifier
            )
            self.layers[layer.name] = _LayerState(projection, layer.weight.numel(), reusing)

    def start_batch(self, step: Step) -> None:
        self._batch_hits = {}
        self._batch_rows = {}
        self._bits_this_epoch = self.bits

    def reuse_map(self, layer: GemmLayer, x: Tensor) -> ReuseMap | None:
        state = self.layers.get(layer.name)
        if state is None or not state.reusing:
            return None
        if self.params.centre_inputs:
            state.projection.observe(x, self.params.centre_momentum)
        signatures = state.projection.signatures(x, self.bits)
        reuse = ReuseMap(
            torch.from_numpy(owners(signatures, self.cache)), self.params.backward_reuse
        )
        hits = reuse.hits
        state.epoch_looked_up += len(signatures)
        state.epoch_hits += hits
        state.fwd_hits += hits
        state.signature_batches[self.bits] += 1
        self._batch_hits[layer.name] = hits
        return reuse

    def after_forward(self, layer: GemmLayer, x: Tensor, y: Tensor) -> None:
        """Count the layer's FWD rows (an output position of a conv, a row of a linear layer's
        output), whether reuse is on in it or not."""
        state = self.layers.get(layer.name)
        if state is None:
            return
        channels = y.shape[1] if layer.is_conv else y.shape[-1]
        rows = y.numel() // channels
        state.epoch_rows += rows
        self._batch_rows[layer.name] = rows

    def before_step(self, step: Step, backward_ran: bool, loss: float) -> None:
        if not backward_ran:
            return
        for name, rows in self._batch_rows.items():
            self.layers[name].epoch_weight_rows += rows
        if self.params.backward_reuse:
            for name, hits in self._batch_hits.items():
                self.layers[name].folded_hits += hits
                self.layers[name].epoch_folded += hits

    def end_epoch(self, epoch: int, validation_loss: float) -> None:
        if not self.params.adaptive:
            return
        for state in self.layers.values():
            rows = state.epoch_looked_up
            if state.reusing and rows and state.epoch_hits / rows < self.params.min_hit_rate:
                state.reusing = False
                state.switched_off = True
        previous = self.previous_loss
        stalled = (
            previous is not None
            and previous > 0
            and (previous - validation_loss) / previous < self.params.min_improvement
        )
        if stalled:
            self.bits = min(self.bits + self.params.bits_step, self.params.max_bits)
        self.previous_loss = validation_loss

    def epoch_figures(self) -> EpochFigures:
        per_layer: dict[str, dict[str, float]] = {}
        rows = hits = macs = skipped = 0
        for name, state in self.layers.items():
            figures = per_layer[name] = {"reuse_on": float(state.epoch_looked_up > 0)}
            layer_macs = (state.epoch_rows + state.epoch_weight_rows) * state.row_macs
            layer_skipped = (state.epoch_hits + state.epoch_folded) * state.row_macs
            if state.epoch_looked_up:
                figures["hit_rate"] = state.epoch_hits / state.epoch_looked_up
                figures["reuse_macs"] = layer_skipped / layer_macs if layer_macs else 0.0
                figures["signature_bits"] = float(self._bits_this_epoch)
            if state.switched_off:
                figures["reuse_off_below"] = self.params.min_hit_rate
            rows += state.epoch_rows
            hits += state.epoch_hits
            macs += layer_macs
            skipped += layer_skipped
            state.epoch_rows = state.epoch_looked_up = state.epoch_hits = 0
            state.epoch_weight_rows = state.epoch_folded = 0
            state.switched_off = False
        return EpochFigures(
            {
                "hit_rate": hits / rows if rows else 0.0,
                "reuse_macs": skipped / macs if macs else 0.0,
            },
            per_layer,
        )

    def annotate_workload(self, ops: WorkloadOps) -> None:
        for name, state in self.layers.items():
            fwd = ops.find(name, TrainingPass.FWD)
            if fwd is None or fwd.executions == 0:
                continue
            lookups = sum(state.signature_batches.values()) * fwd.m
            fwd.reused_row_fraction = state.fwd_hits / (fwd.executions * fwd.m)
            add_extra(fwd, "mcache_lookups", lookups)
            add_extra(fwd, "mcache_writes", lookups - state.fwd_hits)
            add_extra(fwd, "result_copies", state.fwd_hits * fwd.n)
            weight = ops.find(name, TrainingPass.BWD_WEIGHT)
            if weight is not None and weight.executions:
                weight.folded_k_fraction = 1 - state.folded_hits / (weight.executions * weight.k)
                add_extra(weight, "fp_adds", state.folded_hits * weight.m)
            for bits, batches in sorted(state.signature_batches.items()):
                ops.add(self._signature_op(fwd, bits, batches))

    @staticmethod
    def _signature_op(fwd: GemmOp, bits: int, batches: int) -> GemmOp:
        """R x for every row: an m x d x bits GEMM fed by the FWD input stream (the input is read
        once, for both), then one sign compare per bit."""
        return GemmOp(
            layer=f"{fwd.layer}.signature",
            pass_=TrainingPass.FWD,
            m=fwd.m,
            k=fwd.k,
            n=bits,
            executions=batches,
            role="overhead",
            runs_on="projection",
            fused_with=fwd.layer,
            density_a=fwd.density_a,
            a_row_nnz=fwd.a_row_nnz,
            extra_ops={"compares": float(fwd.m * bits)},
        )
