"""ADA-GP: GP batches skip the backward pass while the predictor's own cost appears in the
workload; the GP fraction counts warm-up; the predictor learns; techniques compose."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest
import torch

from backend.sim.simulate import simulate
from backend.sim.workload import GemmOp, TrainingPass
from backend.specs.accelerator import PRESETS, ZeroSkipping
from backend.specs.training import TrainingConfig
from backend.techniques.adagp import GP_FRACTION
from backend.techniques.adagp.direct import (
    DirectPredictor,
    DirectState,
    DirectTraining,
    channel_features,
)
from backend.techniques.adagp.params import AdaGPParams
from backend.techniques.adagp.predictors import FeedbackPredictor
from backend.techniques.adagp.training import AdaGP
from backend.techniques.baseline.params import BaselineParams
from backend.techniques.mercury.params import MercuryParams
from backend.techniques.sparsetrain.params import SparseTrainParams
from backend.training import engine, run_training
from backend.training.layers import GemmLayer
from backend.training.results import TrainingResult
from backend.training.technique import Step

CONFIG = TrainingConfig(
    model="lenet5", dataset="digits", epochs=2, train_samples=640, batch_size=32, seed=2
)
# warm-up epoch, then BP GP GP BP GP GP ... (GP opens right after warm-up, run pinned at 2)
PINNED = AdaGPParams(
    predictor="feedback",
    warmup_epochs=1,
    plateau_improvement=1.0,
    gp_batches=2,
    min_gp_batches=2,
    max_gp_batches=2,
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
    params = AdaGPParams(predictor="feedback", warmup_epochs=3, cosine_every=1)
    last = run_training(config, [params]).epochs[-1]
    assert last.figures["gp_fraction"] == 0.0
    for layer, figures in last.per_layer.items():
        if "cosine" in figures:
            assert figures["cosine"] > figures["reference_cosine"] + 0.05, layer
    assert last.per_layer["fc3"]["cosine"] > 0.9  # the classifier's dy is the output error


def test_adaptive_rule_moves_the_gp_run_within_bounds() -> None:
    never_good = AdaGPParams(predictor="feedback", warmup_epochs=0, plateau_improvement=1.0,
                             gp_batches=3, min_gp_batches=1, max_gp_batches=3, cosine_every=1,
                             shorten_ratio=100.0, lengthen_ratio=100.0)  # fmt: skip
    always_good = AdaGPParams(predictor="feedback", warmup_epochs=0, plateau_improvement=1.0,
                              gp_batches=1, min_gp_batches=1, max_gp_batches=6, cosine_every=1,
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
    params = AdaGPParams(
        predictor="feedback", warmup_epochs=1, plateau_improvement=0.25, plateau_reference=reference
    )
    technique = AdaGP(params)
    for epoch, loss in enumerate((2.0, 1.0, 0.6, 0.36, 0.2)):
        technique.epoch.bp, technique.epoch.loss_sum = 10, 10 * loss
        technique.end_epoch(epoch, validation_loss=0.0)
        technique.epoch_figures()
        assert technique.schedule.gp_open == (opens_at is not None and epoch >= opens_at), epoch
    assert AdaGP(AdaGPParams(predictor="feedback", plateau_improvement=1.0)).schedule.gp_open


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


# -- `direct`: the paper's design, the weight gradient predicted from the layer's output --------

DIRECT = PINNED.model_copy(update={"predictor": "direct"})


def _direct_layer(is_conv: bool) -> tuple[AdaGP, GemmLayer]:
    """An AdaGP hook (`direct`, uncalibrated) set up on one layer whose predictor has random
    output weights (an untrained one predicts zero)."""
    torch.manual_seed(0)
    inner = torch.nn.Conv2d(3, 4, 3) if is_conv else torch.nn.Linear(6, 5)
    layer = GemmLayer("layer", inner)
    technique = AdaGP(DIRECT.model_copy(update={"calibrated_scale": False}))
    technique.setup(torch.nn.Sequential(layer), [layer], seed=0)
    direct = technique.states["layer"].direct
    assert direct is not None
    assert direct.predictor.embedding is not None
    torch.nn.init.normal_(direct.predictor.out.weight)
    torch.nn.init.normal_(direct.predictor.embedding)
    return technique, layer


@pytest.mark.parametrize("is_conv", [True, False])
def test_the_direct_prediction_has_the_weight_shape_and_comes_from_the_output_alone(
    is_conv: bool,
) -> None:
    """On a GP batch the forward hook sets the layer's gradient from its output: the weight's
    (and bias's) shape, the predictor's rows (one per output channel) reshaped, the same whatever
    the labels and the input that produced the output, different for another output."""
    technique, layer = _direct_layer(is_conv)
    state = technique.states["layer"]
    assert state.direct is not None
    x = torch.randn(8, 3, 7, 7) if is_conv else torch.randn(8, 6)
    y = layer.inner(x).detach()
    grads = []
    for labels, seen_input in ((torch.zeros(8, dtype=torch.long), x), (torch.arange(8), -x)):
        technique.predicting, technique.labels = True, labels
        technique.after_forward(layer, seen_input, y)
        assert state.weight.grad is not None and state.bias is not None
        assert state.weight.grad.shape == state.weight.shape
        assert state.bias.grad is not None and state.bias.grad.shape == state.bias.shape
        grads.append((state.weight.grad.clone(), state.bias.grad.clone()))
    assert torch.equal(grads[0][0], grads[1][0]) and torch.equal(grads[0][1], grads[1][1])
    features = channel_features(y, is_conv, DIRECT.direct_features)
    rows = state.direct.predictor(features, state.weight).detach()
    assert features.shape == (len(state.weight), DIRECT.direct_features)
    torch.testing.assert_close(grads[0][0], rows[:, :-1].reshape(state.weight.shape))
    torch.testing.assert_close(grads[0][1], rows[:, -1])
    technique.after_forward(layer, x, 2 * y + 1)
    assert not torch.equal(state.weight.grad, grads[0][0])


def test_a_direct_gp_batch_runs_no_backward_and_steps_by_the_prediction(
    monkeypatch: pytest.MonkeyPatch, backward_counts: Counter[str]
) -> None:
    """Plain SGD (no momentum, no weight decay, constant rate): a GP batch moves every weight by
    exactly -lr x its calibrated predicted gradient, and autograd ran on BP batches only."""
    config = CONFIG.model_copy(update={
        "momentum": 0.0, "weight_decay": 0.0, "lr_schedule": "constant", "learning_rate": 0.05,
    })  # fmt: skip
    technique = AdaGP(DIRECT)
    steps: list[dict[str, tuple[torch.Tensor, torch.Tensor]]] = []
    after: list[dict[str, torch.Tensor]] = []

    def checking() -> None:
        steps.append({
            name: (state.weight.detach().clone(), state.weight.grad.clone())
            for name, state in technique.states.items()
        })  # fmt: skip
        for state in technique.states.values():  # calibrated: max(cos, 0) x the running norm
            assert state.cosine_mean is not None and state.grad_norm is not None
            expected = max(state.cosine_mean, 0.0) * state.grad_norm
            assert float(state.weight.grad.norm()) == pytest.approx(expected, rel=1e-4, abs=1e-9)

    _after_each_gp_step(monkeypatch, technique, checking)
    start_batch = technique.start_batch

    def recording(step: Step) -> None:  # the weights as the previous step left them
        if len(after) < len(steps):
            after.append({n: s.weight.detach().clone() for n, s in technique.states.items()})
        start_batch(step)

    monkeypatch.setattr(technique, "start_batch", recording)
    result = run_training(config, [DIRECT])
    assert result.epochs[-1].figures["gp_fraction"] == SECOND_EPOCH_GP / BATCHES
    assert set(backward_counts.values()) == {2 * BATCHES - SECOND_EPOCH_GP}
    assert len(after) == SECOND_EPOCH_GP - 1  # the last batch is BP, so every GP one is followed
    moved = 0
    for before, later in zip(steps, after, strict=False):
        for name, (weight, grad) in before.items():
            torch.testing.assert_close(later[name], weight - 0.05 * grad)
            moved += int(grad.abs().sum() > 0)
    assert moved > 0  # some prediction was not calibrated to zero


def test_the_direct_predictor_learns_a_gradient_set_by_output_statistics() -> None:
    """A fixed toy layer whose true dW is a fixed function of its output's statistics (channel
    k's gradient is its fixed direction D_k times the channel's mean output on the batch): the
    cosine of the prediction made before each BP batch's update rises."""
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(8, 3, 3, 3, generator=generator)
    directions = torch.randn(8, 27, generator=generator)
    torch.manual_seed(0)  # the predictor's initial hidden layer
    predictor = DirectPredictor(weight, has_bias=False, features=12, hidden=64,
                                channel_input="embedding")  # fmt: skip
    state, training = DirectState(predictor), DirectTraining(lr=1e-2)
    cosines = []
    for _ in range(150):
        levels = torch.rand(8, generator=generator) * 2 - 1  # each channel's mean, per batch
        y = levels.view(1, 8, 1, 1) + 0.3 * torch.randn(16, 8, 5, 5, generator=generator)
        state.features = channel_features(y, True, 12)
        target = y.mean((0, 2, 3)).unsqueeze(1) * directions
        trained = state.trained
        before, loss = state.loss(weight, target)
        if trained:
            cosines.append(float(torch.nn.functional.cosine_similarity(
                before.flatten(), target.flatten(), dim=0
            )))  # fmt: skip
        training.step([loss], [predictor])
    assert training.steps == 150
    early, late = sum(cosines[:10]) / 10, sum(cosines[-10:]) / 10
    assert late > 0.8 and late > early + 0.3, (early, late)


def test_the_direct_workload_charges_its_forward_on_every_batch_and_training_on_bp() -> None:
    """LeNet-5 on 8x8 digits, 40 batches of which 27 BP (counted by hand: PINNED's schedule):
    the predictor's two forward GEMMs run on all 40, its three backward GEMMs and its Adam step
    on the 27 BP batches, on the predictor unit; the layer's own backward GEMMs on BP only (a
    GP batch forms no dW on the array)."""
    result = run_training(CONFIG, [DIRECT])
    ops = _ops(result)
    total, bp = 2 * BATCHES, 2 * BATCHES - SECOND_EPOCH_GP
    assert result.workload.iterations == total
    conv2 = ops[("conv2", TrainingPass.FWD, "compute")]
    assert conv2.conv is not None
    channels = conv2.conv.out_channels  # 16 filters of 6 x 5 x 5 weights and a bias
    per_channel = 6 * 5 * 5 + 1
    features, hidden = DIRECT.direct_features, DIRECT.direct_hidden
    expected = {
        ("hidden", TrainingPass.FWD): ((channels, features, hidden), total),
        ("out", TrainingPass.FWD): ((channels, hidden, per_channel), total),
        ("out", TrainingPass.BWD_WEIGHT): ((hidden, channels, per_channel), bp),
        ("out", TrainingPass.BWD_DATA): ((channels, per_channel, hidden), bp),
        ("hidden", TrainingPass.BWD_WEIGHT): ((features, channels, hidden), bp),
    }
    for (part, pass_), (shape, runs) in expected.items():
        op = ops[(f"conv2.predictor.direct.{part}", pass_, "overhead")]
        assert (op.m, op.k, op.n) == shape and op.executions == runs, (part, pass_)
        assert op.runs_on == "predictor"
    assert ("conv2.predictor.direct.hidden", TrainingPass.BWD_DATA, "overhead") not in ops
    for pass_ in (TrainingPass.BWD_WEIGHT, TrainingPass.BWD_DATA):
        assert ops[("conv2", pass_, "compute")].executions == bp
    assert ("conv2.predictor.measure", TrainingPass.BWD_WEIGHT, "overhead") not in ops
    # Adam: four updates per predictor parameter per BP batch
    parameters = (features + 1) * hidden + channels * hidden + (hidden + 1) * per_channel
    train = ops[("conv2.predictor.direct.out", TrainingPass.BWD_WEIGHT, "overhead")]
    assert train.extra_ops["weight_updates"] == pytest.approx(4 * parameters)
    # the pooled statistics, 3 ops per output element on every batch, inline with the layer's FWD
    out_elements = CONFIG.batch_size * channels * conv2.conv.out_h * conv2.conv.out_w
    assert conv2.executions == total
    assert conv2.extra_ops["pooling_ops"] == pytest.approx(3 * out_elements)


@pytest.mark.parametrize("channel_input", ["embedding", "filter", "none"])
def test_the_direct_predictor_emits_one_filter_per_output_channel(channel_input: str) -> None:
    """The tensor reorganization: output channels are the predictor's batch, each row one
    filter's C·R·S values and its bias; with 'filter' the channel's weights enter too."""
    torch.manual_seed(0)
    weight = torch.randn(4, 3, 3, 3)
    predictor = DirectPredictor(weight, True, 6, 8, channel_input)
    torch.nn.init.normal_(predictor.out.weight)
    features = channel_features(torch.randn(5, 4, 6, 6), True, 6)
    rows = predictor(features, weight)
    assert rows.shape == (4, 3 * 3 * 3 + 1)
    assert torch.equal(rows, predictor(features, 2 * weight)) == (channel_input != "filter")


ORACLE = PINNED.model_copy(update={"predictor": "oracle"})


def test_an_oracle_gp_batch_steps_on_the_backprop_gradient_and_is_charged_as_gp(
    monkeypatch: pytest.MonkeyPatch, backward_counts: Counter[str]
) -> None:
    """The `oracle` control: on each GP batch the backward ran and every layer's gradient is
    left exactly as backprop gave it (no calibration), so on LeNet-5 (no BatchNorm) the training
    is the baseline's, step for step; its workload is charged as the `none` control's at the
    same schedule: no BWD-DATA or BWD-WEIGHT on its GP batches."""
    technique = AdaGP(ORACLE)
    monkeypatch.setattr(engine, "build_techniques", lambda _params: [technique])
    before_step = technique.before_step
    gp_batches: list[bool] = []

    def checking(step: Step, backward_ran: bool, loss: float) -> None:
        backprop = {n: s.weight.grad.clone() for n, s in technique.states.items()}
        before_step(step, backward_ran, loss)
        if technique.predicting:
            assert backward_ran
            for name, state in technique.states.items():
                assert torch.equal(state.weight.grad, backprop[name])
            gp_batches.append(True)

    monkeypatch.setattr(technique, "before_step", checking)
    oracle = run_training(CONFIG, [ORACLE])
    assert len(gp_batches) == SECOND_EPOCH_GP
    assert set(backward_counts.values()) == {2 * BATCHES}  # autograd ran on every batch
    monkeypatch.undo()  # the next trainings build their own techniques
    baseline = run_training(CONFIG, [BaselineParams()])
    for ours, theirs in zip(oracle.epochs, baseline.epochs, strict=True):
        assert (ours.train_loss, ours.test_accuracy) == (theirs.train_loss, theirs.test_accuracy)
    assert oracle.epochs[-1].figures["gp_fraction"] == SECOND_EPOCH_GP / BATCHES

    none = run_training(CONFIG, [PINNED.model_copy(update={"predictor": "none"})])
    charged = {key: op.executions for key, op in _ops(oracle).items()}
    assert charged == {key: op.executions for key, op in _ops(none).items()}
    bp = 2 * BATCHES - SECOND_EPOCH_GP
    assert charged[("fc1", TrainingPass.BWD_DATA, "compute")] == bp
    assert charged[("conv1", TrainingPass.BWD_WEIGHT, "compute")] == bp
    updates = _ops(oracle)[("fc1", TrainingPass.FWD, "compute")].extra_ops["weight_updates"]
    assert updates == _ops(none)[("fc1", TrainingPass.FWD, "compute")].extra_ops["weight_updates"]


def test_an_oracle_gp_batch_leaves_batchnorm_without_a_gradient(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As on every GP batch, only the conv/linear layers are predicted: BatchNorm's scale and
    shift get no gradient (the optimiser skips them), though the oracle's backward computed one."""
    config = CONFIG.model_copy(update={"model": "resnet8", "width": 4, "train_samples": 256})
    technique = AdaGP(ORACLE)
    monkeypatch.setattr(engine, "build_techniques", lambda _params: [technique])
    before_step = technique.before_step
    seen: list[tuple[bool, bool]] = []

    def checking(step: Step, backward_ran: bool, loss: float) -> None:
        before_step(step, backward_ran, loss)
        layers = all(s.weight.grad is not None for s in technique.states.values())
        others = all(p.grad is None for p in technique.unpredicted)
        seen.append((technique.predicting, layers and others))

    monkeypatch.setattr(technique, "before_step", checking)
    run_training(config, [ORACLE])
    assert technique.unpredicted  # the BatchNorms' scales and shifts
    assert any(gp for gp, _ in seen) and all(ok for gp, ok in seen if gp)
    assert not any(ok for gp, ok in seen if not gp)  # BP batches: BatchNorm has its gradient
