"""ADA-GP: alternate backpropagated (BP) and predicted (GP) gradients, adaptively.

A GP batch runs the forward pass only: no autograd graph, no BWD-DATA, no backward through the
network; each conv/linear layer's weight (and bias) gradient comes from its predictor and the
optimiser steps on it. A BP batch is ordinary backprop; its true gradients train (or refresh)
the predictors and measure how good their predictions are.

The hook wires the parts: the predictors (predictors.py), the measurement of their cosines and
the calibrated step (calibration.py), the adaptive BP/GP rule (schedule.py), the per-layer state
(layer_state.py) and what the workload charges (cost.py).

GP fraction: per epoch, that epoch's GP batches over its batches (warm-up epochs report 0.0), so
the run's fraction, GP batches over all batches with warm-up included, is the mean over epochs
(the `gp_fraction` figure's `over_training`, backend/techniques/adagp/__init__.py). Per layer
and epoch, `cosine` and `reference_cosine` (means over the epoch's BP batches) are stored in the
epoch's per-layer figures.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from backend.techniques.adagp import cost
from backend.techniques.adagp.calibration import COSINE_DOTS, cosine, gain, measure
from backend.techniques.adagp.layer_state import LayerState
from backend.techniques.adagp.params import AdaGPParams
from backend.techniques.adagp.predictors import (
    FeedbackTraining,
    FormedPrediction,
    form_feedback,
    output_error,
    running_mean,
)
from backend.techniques.adagp.schedule import AdaptiveSchedule
from worker.training.layers import GemmLayer
from worker.training.technique import EpochFigures, Step, Technique, WorkloadOps


@dataclass
class BatchCounts:
    """BP and GP batches and their summed training loss, over an epoch or the run; the
    concatenated predicted cosines measured on the epoch's BP batches."""

    bp: int = 0
    gp: int = 0
    loss_sum: float = 0.0
    cosines: list[float] = field(default_factory=list)


class AdaGP(Technique):
    name = "adagp"

    def __init__(self, params: AdaGPParams) -> None:
        self.params = params
        self.states: dict[str, LayerState] = {}
        self.schedule = AdaptiveSchedule(params)
        self.predicting = False  # this batch is a GP batch
        self.labels: Tensor | None = None
        self.logits: Tensor | None = None
        self.epoch = BatchCounts()
        self.total = BatchCounts()
        self.feedback_training = FeedbackTraining(params.predictor_lr)

    # -- setup and schedule --------------------------------------------------------------------
    def setup(self, model: nn.Module, layers: list[GemmLayer], seed: int) -> None:
        self.states = {layer.name: LayerState(layer) for layer in layers}
        if self.params.predictor == "feedback" and self.params.normalized_projection:
            for module in model.modules():
                if isinstance(module, nn.modules.batchnorm._BatchNorm):
                    module.register_forward_pre_hook(self._note_normalization)

    def _note_normalization(self, norm: nn.Module, inputs: tuple[Tensor, ...]) -> None:
        """A BatchNorm's input that is a GEMM layer's output marks that layer as normalized."""
        for state in self.states.values():
            if state.output is not None and inputs[0] is state.output:
                state.normalization = norm  # type: ignore[assignment]

    def start_batch(self, step: Step) -> None:
        self.labels = step.labels
        self.predicting = self.schedule.next_is_gp(step.epoch)

    def runs_backward(self, step: Step) -> bool:
        return not self.predicting

    def end_epoch(self, epoch: int, validation_loss: float) -> None:
        batches = self.epoch.bp + self.epoch.gp
        if batches:
            self.schedule.end_epoch(epoch, self.epoch.loss_sum / batches)

    # -- per layer -----------------------------------------------------------------------------
    def after_forward(self, layer: GemmLayer, x: Tensor, y: Tensor) -> None:
        state = self.states.get(layer.name)
        if state is None:
            return
        self.logits = y  # the last GEMM layer's output is the classifier's logits
        if self.params.predictor == "feedback":
            state.x, state.y, state.output = x.detach(), y.detach(), y
            state.output_elements += y.numel()

    def output_grad(self, layer: GemmLayer, grad: Tensor) -> Tensor:
        state = self.states.get(layer.name)
        if state is not None and self.params.predictor == "feedback":
            state.true_output_grad = grad.detach()
        return grad

    # -- the step ------------------------------------------------------------------------------
    def before_step(self, step: Step, backward_ran: bool, loss: float) -> None:
        self.epoch.loss_sum += loss
        if not backward_ran:
            self._predict()
            self.epoch.gp += 1
            self.total.gp += 1
        else:
            concatenated = self._learn()
            self.epoch.bp += 1
            self.total.bp += 1
            if concatenated is not None:
                self.epoch.cosines.append(concatenated)
            self.schedule.after_bp_batch(
                loss, ((s.cosine_mean, s.reference_mean) for s in self.states.values())
            )
        self.logits = self.labels = None
        for state in self.states.values():
            state.forget_batch()

    def _output_error(self) -> Tensor:
        assert self.logits is not None and self.labels is not None
        return output_error(self.logits, self.labels)

    def _predict(self) -> None:
        """GP batch: every layer's predicted gradient becomes its `.grad`."""
        predictor, calibrated = self.params.predictor, self.params.calibrated_scale
        formed = (
            form_feedback(self.states, self._output_error(), False)
            if predictor == "feedback"
            else {}
        )
        for name, state in self.states.items():
            bias = state.bias
            if predictor == "history" and state.history is not None:
                factor = gain(state, state.history, calibrated)
                state.weight.grad = state.history * factor
                if bias is not None and state.bias_history is not None:
                    bias.grad = state.bias_history * factor
            elif predictor == "feedback" and name in formed:
                predicted = formed[name].weight_grad
                assert predicted is not None
                factor = gain(state, predicted, calibrated)
                state.weight.grad = predicted.mul_(factor)
                if bias is not None:
                    bias.grad = formed[name].bias_grad(bias.dtype) * factor
            elif predictor == "none":
                state.weight.grad = torch.zeros_like(state.weight)

    def _learn(self) -> float | None:
        """BP batch: measure the reference (every BP batch) and, on every `cosine_every`-th BP
        batch, the predictions against the true gradients; then refresh (history) or train
        (feedback) the predictors. Returns the predicted cosine of all layers concatenated (None
        when not measured)."""
        predictor = self.params.predictor
        measuring = self.total.bp % self.params.cosine_every == 0
        formed: dict[str, FormedPrediction] = {}
        error = None
        if predictor == "feedback" and self.logits is not None and self.labels is not None:
            error = self._output_error()
            formed = form_feedback(self.states, error, True, form_weight=measuring)
        sums = torch.zeros(COSINE_DOTS, dtype=torch.float64)
        measured = False
        for name, state in self.states.items():
            grad = state.weight.grad
            if grad is None:
                continue
            guess = self._guess(state, formed.get(name)) if measuring else None
            measured = measured or guess is not None
            sums += measure(state, grad.detach().reshape(-1), guess, self.params.cosine_momentum)
            if predictor == "history":
                self._refresh_history(state)
        if error is not None and formed:
            self.feedback_training.step(self.states, formed, error)
        return float(cosine(sums[0], sums[1], sums[2])) if measured else None

    def _guess(self, state: LayerState, formed: FormedPrediction | None) -> Tensor | None:
        """This layer's prediction before the true gradient refreshes it."""
        predictor = self.params.predictor
        if predictor == "history":
            return state.history
        if predictor == "feedback" and formed is not None:
            trained = state.feedback is not None and state.feedback.trained
            return formed.weight_grad if trained else None
        if predictor == "none":
            return torch.zeros_like(state.weight)
        return None

    def _refresh_history(self, state: LayerState) -> None:
        momentum = self.params.history_momentum
        state.history = running_mean(state.history, state.weight.grad.detach(), momentum)
        bias = state.bias
        if bias is not None and bias.grad is not None:
            state.bias_history = running_mean(state.bias_history, bias.grad.detach(), momentum)

    # -- figures and workload ------------------------------------------------------------------
    def epoch_figures(self) -> EpochFigures:
        counts, self.epoch = self.epoch, BatchCounts()
        batches = counts.bp + counts.gp
        scalars = {"gp_fraction": counts.gp / batches if batches else 0.0}
        if counts.cosines:
            scalars["cosine_similarity"] = sum(counts.cosines) / len(counts.cosines)
        per_layer: dict[str, dict[str, float]] = {}
        for name, state in self.states.items():
            figures: dict[str, float] = {}
            if state.cosines:
                figures["cosine"] = float(torch.stack(state.cosines).mean())
            if state.references:
                figures["reference_cosine"] = float(torch.stack(state.references).mean())
            if figures:
                per_layer[name] = figures
            state.cosines, state.references = [], []
        return EpochFigures(scalars, per_layer)

    def annotate_workload(self, ops: WorkloadOps) -> None:
        """What each predictor charges: cost.py."""
        cost.annotate_workload(
            ops, self.params.predictor, self.states, self.total.gp, self.total.bp,
            self.feedback_training.steps,
        )  # fmt: skip
