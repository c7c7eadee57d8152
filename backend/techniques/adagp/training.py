"""ADA-GP: alternate backpropagated (BP) and predicted (GP) gradients, adaptively.

A GP batch runs the forward pass only (but the `oracle` control's, predictors.py): no autograd
graph, no BWD-DATA, no backward through the network; each conv/linear layer's weight (and bias)
gradient comes from its predictor and the optimiser steps on it. `direct` (direct.py, the
paper's design) forms the prediction in the layer's forward hook, as soon as the output exists,
from pooled statistics of that output only, and sets the layer's `.grad` there (the optimiser's
step after the forward applies it: the layer's weights are not used again in the batch, so this
equals updating them at once); it keeps no activation, only the pooled statistics. A BP batch
is ordinary backprop; its true gradients train (or refresh) the predictors and measure how good
their predictions are.

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
from backend.techniques.adagp.direct import (
    DirectPredictor,
    DirectState,
    DirectTraining,
    channel_features,
    joined,
    split,
)
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
from backend.training.layers import GemmLayer
from backend.training.technique import EpochFigures, Step, Technique, WorkloadOps


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
        self.direct_training = DirectTraining(params.predictor_lr)
        self.unpredicted: list[nn.Parameter] = []  # no GEMM layer's: no gradient on GP batches

    # -- setup and schedule --------------------------------------------------------------------
    def setup(self, model: nn.Module, layers: list[GemmLayer], seed: int) -> None:
        self.states = {layer.name: LayerState(layer) for layer in layers}
        predicted = {id(p) for layer in layers for p in layer.inner.parameters()}
        self.unpredicted = [p for p in model.parameters() if id(p) not in predicted]
        if self.params.predictor == "direct":
            torch.manual_seed(seed)  # the predictors' initial hidden layers
            for state in self.states.values():
                state.direct = DirectState(
                    DirectPredictor(
                        state.weight.detach(), state.bias is not None,
                        self.params.direct_features, self.params.direct_hidden,
                        self.params.direct_channel,
                    )
                )  # fmt: skip
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
        """No backward on GP batches, but the `oracle` control's (its true gradient)."""
        return not self.predicting or self.params.predictor == "oracle"

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
        elif state.direct is not None:
            state.output_elements += y.numel()
            state.direct.features = channel_features(
                y.detach(), layer.is_conv, self.params.direct_features
            )
            if self.predicting:
                self._predict_direct(state)

    def _predict_direct(self, state: LayerState) -> None:
        """GP batch, `direct`: the layer's predicted (calibrated) gradient becomes its `.grad`
        as soon as its output exists."""
        assert state.direct is not None
        weight, bias = state.weight, state.bias
        predicted, bias_grad = split(
            state.direct.predict(weight.detach()), weight, bias is not None
        )
        factor = gain(state, predicted, self.params.calibrated_scale)
        weight.grad = predicted * factor
        if bias is not None and bias_grad is not None:
            bias.grad = (bias_grad * factor).to(bias.dtype)

    def output_grad(self, layer: GemmLayer, grad: Tensor) -> Tensor:
        state = self.states.get(layer.name)
        if state is not None and self.params.predictor == "feedback":
            state.true_output_grad = grad.detach()
        return grad

    # -- the step ------------------------------------------------------------------------------
    def before_step(self, step: Step, backward_ran: bool, loss: float) -> None:
        self.epoch.loss_sum += loss
        if self.predicting:
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
        if predictor == "oracle":  # the backward ran: keep the layers' true gradients only
            for parameter in self.unpredicted:
                parameter.grad = None

    def _learn(self) -> float | None:
        """BP batch: measure the reference (every BP batch) and, on every `cosine_every`-th BP
        batch, the predictions against the true gradients; then refresh (history) or train
        (feedback, direct: one Adam step each) the predictors. Returns the predicted cosine of
        all layers concatenated (None when not measured)."""
        predictor = self.params.predictor
        measuring = self.total.bp % self.params.cosine_every == 0
        formed: dict[str, FormedPrediction] = {}
        error = None
        if predictor == "feedback" and self.logits is not None and self.labels is not None:
            error = self._output_error()
            formed = form_feedback(self.states, error, True, form_weight=measuring)
        direct_guesses: dict[str, Tensor] = {}
        direct_losses: list[Tensor] = []
        if predictor == "direct":
            direct_guesses, direct_losses = self._direct_losses()
        sums = torch.zeros(COSINE_DOTS, dtype=torch.float64)
        measured = False
        for name, state in self.states.items():
            grad = state.weight.grad
            if grad is None:
                continue
            guess = None
            if measuring:
                guess = (
                    direct_guesses.get(name)
                    if predictor == "direct"
                    else self._guess(state, formed.get(name))
                )
            measured = measured or guess is not None
            sums += measure(state, grad.detach().reshape(-1), guess, self.params.cosine_momentum)
            if predictor == "history":
                self._refresh_history(state)
        if error is not None and formed:
            self.feedback_training.step(self.states, formed, error)
        if direct_losses:
            self.direct_training.step(
                direct_losses, [s.direct.predictor for s in self.states.values() if s.direct]
            )
        return float(cosine(sums[0], sums[1], sums[2])) if measured else None

    def _direct_losses(self) -> tuple[dict[str, Tensor], list[Tensor]]:
        """BP batch, `direct`: per layer with a true gradient, the prediction its predictor
        makes from this batch's output (weight part; only once trained) and its training loss
        against the true gradient."""
        guesses: dict[str, Tensor] = {}
        losses: list[Tensor] = []
        for name, state in self.states.items():
            direct, grad, bias = state.direct, state.weight.grad, state.bias
            if direct is None or direct.features is None or grad is None:
                continue
            trained = direct.trained
            bias_grad = bias.grad.detach() if bias is not None and bias.grad is not None else None
            if bias is not None and bias_grad is None:
                bias_grad = torch.zeros_like(bias)
            target = joined(grad.detach(), bias_grad)
            before, loss = direct.loss(state.weight.detach(), target)
            if trained:
                guesses[name] = split(before, state.weight, bias is not None)[0]
            losses.append(loss)
        return guesses, losses

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
        if predictor == "oracle":
            return state.weight.grad
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
            self.feedback_training.steps, self.direct_training.steps,
        )  # fmt: skip
