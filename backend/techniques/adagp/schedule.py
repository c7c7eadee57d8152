"""ADA-GP's adaptive rule: which batches are BP and which GP, and how long a GP run is.

The rule looks at each layer's smoothed predicted and reference cosines (calibration.py), and
at the worst layer: a layer's predictions matter as much as its gradient's share of the update,
and the cosine of all layers concatenated is dominated by the layer with the largest gradient
(the classifier, predicted almost exactly), which hid BatchNorm convs predicted at cosine 0.03
on ResNet-8. GP may act only after `warmup_epochs` and once the training loss has flattened: an
epoch whose mean training loss dropped by less than `plateau_improvement` x a reference opens
GP for the rest of the run (it acts where it hurts least). The reference (`plateau_reference`)
is the largest epoch-to-epoch drop of the run so far ("largest_drop": the loss curve's slope
against its own steepest, so a loss decaying geometrically towards zero counts as flat once its
drops are small) or the previous epoch's loss ("previous_loss": a relative improvement;
measured on LeNet-5/MNIST, 6,400 images, the loss falls 28-42% per epoch to the tenth epoch, so
GP never acted there). Then cycles of `bp_batches` BP and a GP run whose length grows by one
when every layer's smoothed predicted cosine reaches `lengthen_ratio` x its smoothed reference
(negative references count as 0) and shrinks by one when some layer's falls below
`shorten_ratio` x its reference or the loss rose, within [min_gp_batches, max_gp_batches].

Plain numbers in, decisions out: no torch here.
"""

from __future__ import annotations

from collections.abc import Iterable

from backend.techniques.adagp.params import AdaGPParams

LOSS_RISE_TOLERANCE = 0.1  # a BP loss this much above its running mean counts as rising


class AdaptiveSchedule:
    """The BP/GP cycle, the GP run's length and the plateau gate, over one training."""

    def __init__(self, params: AdaGPParams) -> None:
        self.params = params
        self.gp_run = params.gp_batches
        self.phase_is_gp = True
        self.phase_left = 0
        self.gp_open = params.plateau_improvement >= 1.0  # the loss has flattened: GP may act
        self.previous_epoch_loss: float | None = None
        self.largest_drop = 0.0  # the largest epoch-to-epoch drop of the mean training loss
        self.loss_mean: float | None = None  # running mean of BP batches' training loss

    def next_is_gp(self, epoch: int) -> bool:
        """Whether the next batch (of `epoch`) is a GP batch; advances the cycle."""
        if epoch < self.params.warmup_epochs or not self.gp_open:
            return False
        if self.phase_left == 0:
            self.phase_is_gp = not self.phase_is_gp and self.gp_run > 0
            self.phase_left = self.gp_run if self.phase_is_gp else self.params.bp_batches
        self.phase_left -= 1
        return self.phase_is_gp

    def end_epoch(self, epoch: int, loss: float) -> None:
        """Open GP once the epoch's mean training loss `loss` has flattened."""
        previous, self.previous_epoch_loss = self.previous_epoch_loss, loss
        if previous is None or previous <= 0:
            return
        drop = previous - loss
        self.largest_drop = max(self.largest_drop, drop)
        if epoch + 1 < self.params.warmup_epochs:
            return
        reference = (
            previous if self.params.plateau_reference == "previous_loss" else self.largest_drop
        )
        if reference > 0 and drop < self.params.plateau_improvement * reference:
            self.gp_open = True

    def after_bp_batch(
        self, loss: float, cosines: Iterable[tuple[float | None, float | None]]
    ) -> None:
        """Adapt the GP run to a BP batch's training loss and to each layer's smoothed
        (predicted, reference) cosines, None where not measured yet."""
        self._adapt(loss, list(cosines))
        self.loss_mean = loss if self.loss_mean is None else 0.9 * self.loss_mean + 0.1 * loss

    def _adapt(self, loss: float, cosines: list[tuple[float | None, float | None]]) -> None:
        """Lengthen the GP run when every layer's predictions beat its reference by the
        lengthen ratio, shorten it when one layer's fall below the shorten ratio (or the loss
        rose)."""
        if not self.gp_open:
            return
        measured: list[tuple[float, float]] = []
        for predicted, reference in cosines:
            if predicted is None:
                continue
            if reference is None:
                return
            measured.append((predicted, reference))
        if not measured:
            return
        lengthen, shorten = (
            [predicted >= ratio * max(reference, 0.0) for predicted, reference in measured]
            for ratio in (self.params.lengthen_ratio, self.params.shorten_ratio)
        )
        rising = self.loss_mean is not None and loss > self.loss_mean * (1 + LOSS_RISE_TOLERANCE)
        if rising or not all(shorten):
            self.gp_run = max(self.gp_run - 1, self.params.min_gp_batches)
        elif all(lengthen):
            self.gp_run = min(self.gp_run + 1, self.params.max_gp_batches)
