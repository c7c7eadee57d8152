"""How good each layer's predictions are, measured on BP batches, and the step size that follows.

Measurement. On every `cosine_every`-th BP batch the cosine between the predicted and the true
weight gradient (all layers concatenated) is measured; on every BP batch so is a reference
measured in the same run: the cosine between the previous BP batch's true gradient and this
one's (what "reuse the last gradient" would reach). Both are smoothed per layer over BP batches
(momentum `cosine_momentum`); the adaptive rule (schedule.py) reads the smoothed ones.

Calibration (`calibrated_scale`): a layer's predicted gradient p is rescaled to the norm
max(cos, 0) |g|, cos the layer's smoothed predicted cosine and |g| the running norm of its true
gradient on BP batches: the least-squares step along the prediction (<p, g>/<p, p> p) with its
terms averaged over batches, so a predictor barely correlated with the true gradient takes
proportionally small steps and no step is longer than a true gradient (a running gain
<p, g>/<p, p> applied to a later, larger p let long GP runs diverge).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from backend.techniques.adagp.layer_state import LayerState

NORM_MOMENTUM = 0.9  # running norm of the true gradient
COSINE_DOTS = 5  # <p, g>, <p, p>, <g, g>, <g_prev, g>, <g_prev, g_prev>


def blend(momentum: float, running: Any, new: Any) -> Any:  # floats or tensors
    return momentum * running + (1 - momentum) * new


def cosine(dot: Tensor, a_squares: Tensor, b_squares: Tensor) -> Tensor:
    return dot / (a_squares * b_squares).sqrt().clamp_min(1e-30)


def smooth(momentum: float, running: float | None, new: float) -> float:
    return new if running is None else blend(momentum, running, new)


def measure(state: LayerState, true: Tensor, guess: Tensor | None, momentum: float) -> Tensor:
    """A BP batch's true weight gradient (flat) against the layer's prediction `guess` (None:
    not measured on this batch) and against the previous BP batch's true gradient: records and
    smooths both cosines (smoothing `momentum`), updates the running norm and keeps the true
    gradient for the next reference. Returns the five dot products (COSINE_DOTS), which summed
    over layers give the cosine of all layers concatenated."""
    previous = state.previous
    dots = torch.zeros(COSINE_DOTS, dtype=torch.float64)
    dots[2] = torch.vdot(true, true)
    if guess is not None:
        guess = guess.reshape(-1)
        dots[0], dots[1] = torch.vdot(guess, true), torch.vdot(guess, guess)
        state.cosines.append(cosine(dots[0], dots[1], dots[2]))
        state.cosine_mean = smooth(momentum, state.cosine_mean, float(state.cosines[-1]))
        state.predicted_measurements += 1
    if previous is not None:
        dots[3], dots[4] = torch.vdot(previous, true), torch.vdot(previous, previous)
        state.references.append(cosine(dots[3], dots[4], dots[2]))
        state.reference_mean = smooth(momentum, state.reference_mean, float(state.references[-1]))
        state.reference_measurements += 1
    norm = float(dots[2].sqrt())
    state.grad_norm = (
        norm if state.grad_norm is None else blend(NORM_MOMENTUM, state.grad_norm, norm)
    )
    state.previous = true.clone()
    return dots


def gain(state: LayerState, prediction: Tensor, calibrated: bool) -> float:
    """The factor that takes a prediction to the calibrated norm max(cos, 0) |g| (1 when not
    `calibrated`)."""
    if not calibrated:
        return 1.0
    if state.cosine_mean is None or state.grad_norm is None:
        return 0.0  # not yet measured: no step
    norm = float(prediction.norm())
    return max(state.cosine_mean, 0.0) * state.grad_norm / norm if norm > 0 else 0.0
