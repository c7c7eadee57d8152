"""ADA-GP: GP batches skip the backward pass while the predictor's own cost appears in the
workload; the GP fraction counts warm-up; the predictor learns; techniques compose."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest
import torch

from backend.specs.accelerator import PRESETS, ZeroSkipping
from backend.specs.training import TrainingConfig
from backend.techniques.adagp import GP_FRACTION
from backend.techniques.adagp.params import AdaGPParams
from backend.techniques.adagp.predictors import FeedbackPredictor
from backend.techniques.adagp.training import AdaGP
from backend.techniques.mercury.params import MercuryParams
from backend.techniques.sparsetrain.params import SparseTrainParams
from worker.sim.simulate import simulate
from worker.sim.workload import GemmOp, TrainingPass
from worker.training import engine, run_training
from worker.training.results import TrainingResult
from worker.training.technique import Step

CONFIG = TrainingConfig(
    model="lenet5", dataset="digits", epochs=2, train_samples=640, batch_size=32, seed=2
)
# warm-up epoch, then BP GP GP BP GP GP ... (GP opens right after warm-up, run pinned at 2)
PINNED = AdaGPParams(
    warmup_epochs=1, plateau_improvement=1.0, gp_batches=2, min_gp_batches=2, max_gp_batches=2
)
BATCHES = 20  # per epoch: 640 / 32
SECOND_EPOCH_GP = 13  # BP GP GP x 6 and a final BP: 7 BP and 13 GP batches


@pytest.fixture
def backward_counts(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How many backward passes computed each model parameter's gradient (autograd hooks)."""
    counts: Counter[str] = Counter()
    build = engine.build_model

    def counting_build(*args: object, **kwargs: object) -> torch.nn.Module:
        model = build(*args, **kwargs)
        for name, parameter in model.named_parameters():
            parameter.register_hook(lambda grad, name=name: counts.update([name]))
        return model

    monkeypatch.setattr(engine, "build_model", counting_build)
    return counts


def _after_each_gp_step(
    monkeypatch: pytest.MonkeyPatch, technique: AdaGP, check: Callable[[], None]
) -> None:
    """The training uses `technique`; `check` runs after it set a GP batch's gradients."""
    monkeypatch.setattr(engine, "build_techniques", lambda _params: [technique])
    before_step = technique.before_step

    def checking(step: Step, backward_ran: bool, loss: float) -> None:
        before_step(step, backward_ran, loss)
        if not backward_ran:
            check()

    monkeypatch.setattr(technique, "before_step", checking)


def _ops(result: TrainingResult) -> dict[tuple[str, str, str], GemmOp]:
    return {(op.layer, op.pass_, op.role): op for op in result.workload.ops}


def test_gp_batches_skip_the_backward_pass_while_the_predictor_cost_appears_in_the_workload(
    backward_counts: Counter[str],
) -> None:
    sparse = SparseTrainParams(prune_rate=0.5)  # counts every output gradient it really sees
    result = run_training(CONFIG, [PINNED, sparse])
    warmup, second = result.epochs
    assert warmup.figures["gp_fraction"] == 0.0
    assert second.figures["gp_fraction"] == SECOND_EPOCH_GP / BATCHES
    bp = 2 * BATCHES - SECOND_EPOCH_GP
    # autograd computed every parameter's gradient on BP batches only
    assert set(backward_counts.values()) == {bp}
    ops = _ops(result)
    assert ops[("fc1", TrainingPass.FWD, "compute")].executions == result.workload.iterations
    assert ops[("fc1", TrainingPass.BWD_DATA, "compute")].executions == bp
    assert "conv1" not in {layer for layer, pass_, _ in ops if pass_ == TrainingPass.BWD_DATA}
    # GP batches formed dW = dy_pred x^T with the layer's own BWD-WEIGHT GEMM
    assert ops[("fc1", TrainingPass.BWD_WEIGHT, "compute")].executions == 2 * BATCHES
    # SparseTrain pruned true gradients on BP batches only
    assert ops[("fc1", TrainingPass.BWD_WEIGHT, "compute")].extra_ops["fp_adds"] == pytest.approx(
        bp * 32 * 120 / (2 * BATCHES)
    )
    # the predictor: e B on every batch (GP: the prediction, BP: its training), its weight
    # gradient on BP batches, on the predictor unit
    project = ops[("conv2.predictor.feedback", TrainingPass.FWD, "overhead")]
    train = ops[("conv2.predictor.feedback", TrainingPass.BWD_WEIGHT, "overhead")]
    assert project.runs_on == train.runs_on == "predictor"
    assert project.executions == 2 * BATCHES and train.executions == bp
    conv2 = ops[("conv2", TrainingPass.FWD, "compute")]
    per_sample = conv2.conv.out_channels * conv2.conv.out_h * conv2.conv.out_w
    assert (project.m, project.k, project.n) == (32, 10, per_sample)
    # dW_pred formed on the array on every 4th BP batch to measure its cosine
    measure = ops[("conv2.predictor.measure", TrainingPass.BWD_WEIGHT, "overhead")]
    assert measure.runs_on == "array" and measure.executions == -(-bp // 4)
    assert -1 <= second.figures["cosine_similarity"] <= 1


def test_simulated_macs_skip_bwd_data_of_gp_batches_and_charge_the_predictor() -> None:
    """Closed form against the brute-force sum over the workload's GEMMs: a GP batch skips
    every BWD-DATA, BWD-WEIGHT still runs (on the predicted gradient), the predictor's GEMMs
    are overhead MACs."""
    result = run_training(CONFIG, [PINNED])
    dense = PRESETS["eyeriss-like"].model_copy(
        update={"zero_skipping": ZeroSkipping(enabled=False)}
    )
    totals = simulate(result.workload, dense).totals
    ops = result.workload.ops
    gp = SECOND_EPOCH_GP
    macs = {op.layer + op.pass_.value: op.m * op.k * op.n * op.groups for op in ops}
    skipped = sum(
        macs[op.layer + op.pass_.value] * gp
        for op in ops
        if op.pass_ == TrainingPass.BWD_DATA and op.role == "compute"
    )
    overhead = sum(
        macs[op.layer + op.pass_.value] * op.executions for op in ops if op.role == "overhead"
    )
    assert totals.macs_skipped == pytest.approx(skipped)
    assert totals.macs_overhead == pytest.approx(overhead)
    assert overhead > 0


def test_gp_fraction_counts_the_warm_up() -> None:
    result = run_training(CONFIG, [PINNED])
    fraction = GP_FRACTION.of_training([epoch.figures["gp_fraction"] for epoch in result.epochs])
    assert fraction == SECOND_EPOCH_GP / (2 * BATCHES)
    data = next(op for op in result.workload.ops if op.pass_ == TrainingPass.BWD_DATA)
    assert fraction == pytest.approx(1 - data.executions / result.workload.iterations)


def test_the_feedback_predictor_beats_the_previous_batch_reference() -> None:
    """BP only (the warm-up covers the run): after two epochs the predicted weight gradient is
    closer to the true one than the previous BP batch's true gradient is, in every layer."""
    config = CONFIG.model_copy(update={"epochs": 3, "train_samples": 1024})
    params = AdaGPParams(warmup_epochs=3, cosine_every=1)
    last = run_training(config, [params]).epochs[-1]
    assert last.figures["gp_fraction"] == 0.0
    for layer, figures in last.per_layer.items():
        if "cosine" in figures:
            assert figures["cosine"] > figures["reference_cosine"] + 0.05, layer
    assert last.per_layer["fc3"]["cosine"] > 0.9  # the classifier's dy is the output error


def test_adaptive_rule_moves_the_gp_run_within_bounds() -> None:
    never_good = AdaGPParams(warmup_epochs=0, plateau_improvement=1.0, gp_batches=3,
                             min_gp_batches=1, max_gp_batches=3, cosine_every=1,
                             shorten_ratio=100.0, lengthen_ratio=100.0)  # fmt: skip
    always_good = AdaGPParams(warmup_epochs=0, plateau_improvement=1.0, gp_batches=1,
                              min_gp_batches=1, max_gp_batches=6, cosine_every=1,
                              shorten_ratio=0.0, lengthen_ratio=0.0)  # fmt: skip
    config = CONFIG.model_copy(update={"epochs": 1})
    shrinking = run_training(config, [never_good]).epochs[0].figures["gp_fraction"]
    growing = run_training(config, [always_good]).epochs[0].figures["gp_fraction"]
    assert shrinking < 0.6 < growing


@pytest.mark.parametrize(
    ("reference", "opens_at"),
    [("largest_drop", 3), ("previous_loss", None)],
)
def test_gp_waits_for_the_training_loss_to_flatten(reference: str, opens_at: int | None) -> None:
    """A loss decaying geometrically: drops 1.0, 0.4, 0.24, 0.16 (0.24 is under a quarter of
    the largest drop), relative improvements 50%, 40%, 40%, 44% (never under 25%)."""
    params = AdaGPParams(warmup_epochs=1, plateau_improvement=0.25, plateau_reference=reference)
    technique = AdaGP(params)
    for epoch, loss in enumerate((2.0, 1.0, 0.6, 0.36, 0.2)):
        technique.epoch.bp, technique.epoch.loss_sum = 10, 10 * loss
        technique.end_epoch(epoch, validation_loss=0.0)
        technique.epoch_figures()
        assert technique.schedule.gp_open == (opens_at is not None and epoch >= opens_at), epoch
    assert AdaGP(AdaGPParams(plateau_improvement=1.0)).schedule.gp_open


def test_history_predicts_the_running_mean_of_true_gradients(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    params = AdaGPParams(predictor="history", warmup_epochs=1, history_momentum=0.5)
    technique = AdaGP(params)
    monkeypatch.setattr(engine, "build_techniques", lambda _params: [technique])
    grads: list[torch.Tensor] = []
    before_step = technique.before_step

    def recording(step: Step, backward_ran: bool, loss: float) -> None:
        grads.append(technique.states["fc2"].weight.grad.clone())
        before_step(step, backward_ran, loss)

    monkeypatch.setattr(technique, "before_step", recording)
    run_training(CONFIG.model_copy(update={"epochs": 1}), [params])
    expected = grads[0]
    for grad in grads[1:]:
        expected = 0.5 * expected + 0.5 * grad
    assert torch.allclose(technique.states["fc2"].history, expected, atol=1e-7)


def test_gp_steps_are_calibrated_to_the_cosine_times_the_true_gradient_norm(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    technique = AdaGP(PINNED)
    checked: list[str] = []

    def checking() -> None:
        for name, state in technique.states.items():
            assert state.cosine_mean is not None and state.grad_norm is not None
            expected = max(state.cosine_mean, 0.0) * state.grad_norm
            assert float(state.weight.grad.norm()) == pytest.approx(expected, rel=1e-4), name
            checked.append(name)

    _after_each_gp_step(monkeypatch, technique, checking)
    run_training(CONFIG, [PINNED])
    assert len(checked) == SECOND_EPOCH_GP * len(technique.states)


def test_mercury_and_sparsetrain_compose() -> None:
    result = run_training(CONFIG, [MercuryParams(signature_bits=12), SparseTrainParams()])
    assert result.workload.technique == "mercury+sparsetrain"
    epoch = result.epochs[-1]
    assert epoch.figures["hit_rate"] > 0
    assert epoch.per_layer["conv2"]["grad_density_pruned"] < 1
    fwd = next(o for o in result.workload.ops if o.layer == "conv1" and o.pass_ == "fwd")
    assert fwd.reused_row_fraction > 0


def _gp_weight_grads(
    monkeypatch: pytest.MonkeyPatch, params: AdaGPParams
) -> tuple[list[dict], TrainingResult]:
    """Per GP batch of a ResNet-8 training: each layer's (weight, predicted weight gradient,
    state); and the training's result."""
    technique = AdaGP(params)
    seen: list[dict] = []
    _after_each_gp_step(
        monkeypatch,
        technique,
        lambda: seen.append({
            name: (state.weight.detach().clone(), state.weight.grad.clone(), state)
            for name, state in technique.states.items()
        }),
    )  # fmt: skip
    config = CONFIG.model_copy(update={"model": "resnet8", "width": 4, "train_samples": 320})
    return seen, run_training(config, [params])


def _radial_cosines(weight: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """Per output channel: cosine between the channel's weights and its gradient."""
    w, g = weight.reshape(len(weight), -1), grad.reshape(len(grad), -1)
    return (w * g).sum(1) / (w.norm(dim=1) * g.norm(dim=1)).clamp_min(1e-30)


def test_layers_feeding_batchnorm_get_predictions_orthogonal_to_their_weights(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """BatchNorm's backward leaves a conv's true output gradient with zero mean and nothing
    along the normalised output per channel, so the true dW is orthogonal to each channel's
    weights; the projected prediction is too (unprojected it is not), and the classifier, which
    feeds no BatchNorm, is left alone."""
    projected, result = _gp_weight_grads(monkeypatch, PINNED)
    assert projected
    last = projected[-1]
    normalized = {name for name, (_, _, state) in last.items() if state.normalization is not None}
    assert normalized == {name for name in last if name != "fc"}
    for batch in projected:
        for name in normalized:
            weight, grad, _ = batch[name]
            if grad.norm() > 0:
                assert _radial_cosines(weight, grad).abs().max() < 1e-3, name
    # the projection's work is charged where the prediction is formed, for normalized layers
    ops = _ops(result)
    for name in last:
        project = ops[(f"{name}.predictor.feedback", TrainingPass.FWD, "overhead")]
        assert ("projection_ops" in project.extra_ops) == (name in normalized), name
    raw, _ = _gp_weight_grads(
        monkeypatch, PINNED.model_copy(update={"normalized_projection": False})
    )
    weight, grad, _ = raw[-1]["stages.0.conv1"]
    assert _radial_cosines(weight, grad).abs().max() > 0.01


# a conv output (B, K, H, W), a linear output (B, F) and a linear output over a sequence (B, T, F)
OUTPUT_SHAPES = {"conv": (8, 4, 5, 5), "linear": (8, 6), "sequence": (8, 3, 6)}


def _feedback_case(
    shape: tuple[int, ...], dtype: torch.dtype
) -> tuple[FeedbackPredictor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A predictor with random parameters, and an output y, output error and target on it."""
    generator = torch.Generator().manual_seed(0)

    def draw(*size: int) -> torch.Tensor:  # the same values in either precision
        return torch.randn(size, generator=generator, dtype=torch.float64).to(dtype)

    classes, is_conv = 10, len(shape) == 4
    y = draw(*shape)
    channels = y.shape[1] if is_conv else y.shape[-1]
    feedback = FeedbackPredictor(
        torch.nn.Parameter(draw(classes, y[0].numel())),
        torch.nn.Parameter(draw(channels)),
        torch.nn.Parameter(draw(channels)),
        scale=torch.tensor(0.3, dtype=dtype),
    )
    return feedback, y, draw(len(y), classes), draw(*shape)


@pytest.mark.parametrize("output", list(OUTPUT_SHAPES))
@pytest.mark.parametrize("normalized", [True, False])
def test_the_feedback_predictor_trains_on_the_gradients_autograd_gives(
    output: str, normalized: bool
) -> None:
    """The predictor's closed-form training gradients (and its prediction) equal autograd's
    through the forward written out plainly: the gated product, BatchNorm's projection and the
    MSE against the scaled true output gradient."""
    is_conv = output == "conv"
    feedback, y, error, target = _feedback_case(OUTPUT_SHAPES[output], torch.float64)
    eps = 1e-5 if normalized else None

    b, a, c = (p.detach().clone().requires_grad_() for p in feedback.parameters())
    channel = 1 if is_conv else y.dim() - 1
    shape = [1] * y.dim()
    shape[channel] = -1
    reference = (error @ b).view(y.shape) * torch.sigmoid(a.view(shape) * y + c.view(shape))
    if normalized:
        dims = [d for d in range(y.dim()) if d != channel]
        centred = y - y.mean(dims, keepdim=True)
        variance = centred.square().mean(dims, keepdim=True) + 1e-5
        along = (reference * centred).mean(dims, keepdim=True) / variance
        reference = reference - reference.mean(dims, keepdim=True) - centred * along
    torch.nn.functional.mse_loss(reference, target / 0.3).backward()

    prediction = feedback.predict(error, y, is_conv, eps, for_training=True)
    torch.testing.assert_close(prediction.output, reference.detach())
    feedback.set_gradients(prediction, error, y, target, is_conv)
    for mine, autograd in zip(feedback.parameters(), (b, a, c), strict=True):
        assert mine.grad is not None and autograd.grad is not None
        torch.testing.assert_close(mine.grad, autograd.grad)


@pytest.mark.parametrize("output", list(OUTPUT_SHAPES))
@pytest.mark.parametrize("normalized", [True, False])
def test_the_fused_float32_predictor_agrees_with_float64(output: str, normalized: bool) -> None:
    """Training runs in float32: the compiled loops' float32 version (its own machine code)
    gives the float64 prediction and training gradients to float32 precision."""
    is_conv = output == "conv"
    eps = 1e-5 if normalized else None
    results = []
    for dtype in (torch.float64, torch.float32):
        feedback, y, error, target = _feedback_case(OUTPUT_SHAPES[output], dtype)
        prediction = feedback.predict(error, y, is_conv, eps, for_training=True)
        output_sums = torch.from_numpy(prediction.channel_sums)
        feedback.set_gradients(prediction, error, y, target, is_conv)
        results.append([prediction.output, output_sums, *(p.grad for p in feedback.parameters())])
    for wide, narrow in zip(*results, strict=True):
        assert narrow is not None and wide is not None
        torch.testing.assert_close(narrow.double(), wide, rtol=1e-4, atol=1e-5)
