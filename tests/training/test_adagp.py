"""ADA-GP: GP batches skip the backward pass; predictors learn; techniques compose."""

from __future__ import annotations

import torch

from backend.specs.training import AdaGPParams, MercuryParams, SparseTrainParams, TrainingConfig
from worker.sim.workload import TrainingPass
from worker.training import engine, run_training
from worker.training.adagp import FEATURES, AdaGP, channel_features

CONFIG = TrainingConfig(
    model="lenet5", dataset="digits", epochs=2, train_samples=640, batch_size=32, seed=2
)


def test_channel_folding_gives_one_feature_row_per_output_channel() -> None:
    assert channel_features(torch.randn(8, 6, 10, 10)).shape == (6, FEATURES)
    assert channel_features(torch.randn(8, 5, 120)).shape == (120, FEATURES)


def test_gp_batches_skip_backward() -> None:
    params = AdaGPParams(warmup_epochs=1, gp_batches=2, min_gp_batches=2, max_gp_batches=2)
    sparse = SparseTrainParams(prune_rate=0.5)  # counts every gradient it really sees
    result = run_training(CONFIG, [params, sparse])
    warmup, second = result.epochs
    assert warmup.gp_fraction == 0.0
    assert second.gp_fraction == 13 / 20  # BP GP GP BP GP GP ...: 7 BP and 13 GP batches
    ops = {(op.layer, op.pass_, op.role): op for op in result.workload.ops}
    fwd = ops[("fc1", TrainingPass.FWD, "compute")]
    weight = ops[("fc1", TrainingPass.BWD_WEIGHT, "compute")]
    assert fwd.executions == result.workload.iterations == 40
    assert weight.executions == 20 + 7
    # SparseTrain pruned gradients on exactly those batches: no backward ran on GP batches
    assert weight.extra_ops["fp_adds"] == 32 * 120
    predictor = ops[("fc1.predictor.fc2", TrainingPass.FWD, "overhead")]
    assert predictor.runs_on == "predictor" and predictor.executions == 40
    assert -1 <= second.cosine_similarity <= 1


def test_adaptive_rule_moves_the_gp_run_within_bounds() -> None:
    never_good = AdaGPParams(warmup_epochs=0, gp_batches=3, min_gp_batches=1, max_gp_batches=3,
                             cos_low=1.0, cos_high=1.0)  # fmt: skip
    always_good = AdaGPParams(warmup_epochs=0, gp_batches=1, min_gp_batches=1, max_gp_batches=6,
                              cos_low=-1.0, cos_high=-1.0)  # fmt: skip
    config = CONFIG.model_copy(update={"epochs": 1})
    shrinking = run_training(config, [never_good]).epochs[0].gp_fraction
    growing = run_training(config, [always_good]).epochs[0].gp_fraction
    assert shrinking < 0.6 < growing


def test_mercury_and_sparsetrain_compose() -> None:
    result = run_training(CONFIG, [MercuryParams(signature_bits=12), SparseTrainParams()])
    assert result.workload.technique == "mercury+sparsetrain"
    epoch = result.epochs[-1]
    assert epoch.hit_rate > 0
    assert epoch.per_layer["conv2"]["grad_density_pruned"] < 1
    fwd = next(o for o in result.workload.ops if o.layer == "conv1" and o.pass_ == "fwd")
    assert fwd.reused_row_fraction > 0


def test_features_match_per_channel_reductions() -> None:
    y = torch.randn(4, 3, 8, 8)
    features = channel_features(y)
    per_channel = y.transpose(0, 1).reshape(3, -1)
    assert torch.allclose(features[:, 0], per_channel.mean(1), atol=1e-6)
    assert torch.allclose(features[:, 1], per_channel.std(1, unbiased=False), atol=1e-5)
    assert torch.allclose(features[:, 2], per_channel.abs().mean(1), atol=1e-6)
    assert torch.allclose(features[:, 3], (per_channel > 0).float().mean(1))
    rows = torch.randn(5, 7, 12)  # a linear layer's (batch, tokens, units) output
    flat = rows.reshape(-1, 12).T
    expected = [flat.mean(1), flat.std(1, unbiased=False), flat.abs().mean(1)]
    assert torch.allclose(channel_features(rows)[:, :3], torch.stack(expected, 1), atol=1e-5)
    pooled = torch.nn.functional.adaptive_avg_pool2d(y, 4).mean(0).reshape(3, -1)
    assert torch.allclose(features[:, 4:], pooled, atol=1e-6)
    for shape in ((4, 3, 10, 10), (2, 5, 7, 5), (3, 2, 3, 2)):  # uneven, overlapping cells
        odd = torch.randn(shape)
        pooled = torch.nn.functional.adaptive_avg_pool2d(odd, 4).mean(0).reshape(shape[1], -1)
        assert torch.allclose(channel_features(odd)[:, 4:], pooled, atol=1e-6)


def test_gp_switches_off_while_predictions_are_poor_and_resumes_when_good() -> None:
    config = CONFIG.model_copy(update={"epochs": 2})
    poor = AdaGPParams(warmup_epochs=0, cos_low=1.0, cos_high=1.0)  # every cosine is "poor"
    assert poor.min_gp_batches == 0
    first, second = run_training(config, [poor]).epochs
    assert 0 < first.gp_fraction < 0.2  # the initial GP run shrinks to nothing
    assert second.gp_fraction == 0.0
    good = AdaGPParams(warmup_epochs=0, gp_batches=0, cos_low=-1.0, cos_high=-1.0)
    assert run_training(config, [good]).epochs[-1].gp_fraction > 0.5  # grows back from 0


def test_predictions_are_calibrated_by_their_least_squares_gain(monkeypatch) -> None:
    params = AdaGPParams(warmup_epochs=1, gp_batches=1, min_gp_batches=1, max_gp_batches=1)
    technique = AdaGP(params)
    monkeypatch.setattr(engine, "build_techniques", lambda _params: [technique])
    run_training(CONFIG, [params])
    for predictor in technique.predictors.values():
        assert predictor.gain is not None and predictor.scale is not None
        assert float(predictor.gain) >= 0.0  # an anti-correlated predictor takes no step
        calibrated = predictor.prediction(True)
        raw = predictor.prediction(False)
        assert torch.allclose(calibrated, raw * predictor.gain, rtol=1e-5, atol=1e-12)
