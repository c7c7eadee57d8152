"""The training loop, the model zoo and the dense workload, with baseline training."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from backend.sim.workload import TrainingPass, Workload
from backend.specs.training import MODEL_NAMES, TrainingConfig
from backend.techniques.baseline.params import BaselineParams
from backend.training import Progress, TrainingCancelled, dense_workload, run_training
from backend.training.layers import GemmLayer, instrument
from backend.training.models import MODEL_REGISTRY, build_model
from backend.training.sparsity import SAMPLE_ROWS


def test_zoo_names_are_the_api_literals() -> None:
    assert set(MODEL_REGISTRY) == set(MODEL_NAMES)


@pytest.mark.parametrize("name", MODEL_NAMES)
@pytest.mark.parametrize("shape", [(1, 8, 8), (1, 28, 28), (3, 32, 32)])
def test_every_model_runs_on_every_input_shape(name: str, shape: tuple[int, int, int]) -> None:
    model = build_model(name, shape, 10, 4)
    sites = instrument(model)
    assert any(isinstance(site, GemmLayer) for site in sites)
    assert model(torch.rand(2, *shape)).shape == (2, 10)


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_dense_workload_passes_have_equal_macs(name: str) -> None:
    workload = dense_workload(TrainingConfig(model=name, dataset="digits", batch_size=8, width=4))
    assert workload.iterations == 1
    by_layer: dict[str, dict[TrainingPass, int]] = {}
    for op in workload.ops:
        by_layer.setdefault(op.layer, {})[op.pass_] = op.m * op.k * op.n
        assert op.density_a == op.density_b == 1.0
    for layer, passes in by_layer.items():
        assert len(set(passes.values())) == 1, layer
        assert TrainingPass.BWD_WEIGHT in passes
    first = workload.ops[0].layer
    assert TrainingPass.BWD_DATA not in by_layer[first]  # no gradient flows to the images


def test_lenet_conv_shapes_follow_the_gemm_convention() -> None:
    workload = dense_workload(TrainingConfig(model="lenet5", dataset="mnist", batch_size=4))
    conv2 = {op.pass_: (op.m, op.k, op.n) for op in workload.ops if op.layer == "conv2"}
    assert conv2[TrainingPass.FWD] == (4 * 10 * 10, 6 * 5 * 5, 16)
    assert conv2[TrainingPass.BWD_DATA] == (4 * 10 * 10, 16, 6 * 5 * 5)
    assert conv2[TrainingPass.BWD_WEIGHT] == (16, 4 * 10 * 10, 6 * 5 * 5)


DIGITS = TrainingConfig(model="lenet5", dataset="digits", epochs=10, batch_size=32, seed=0)


@pytest.fixture(scope="module")
def digits_baseline():
    return run_training(DIGITS, [BaselineParams()])


def test_baseline_lenet_learns_digits(digits_baseline) -> None:
    assert digits_baseline.test_accuracy >= 0.90
    losses = [epoch.train_loss for epoch in digits_baseline.epochs]
    assert losses[-1] < losses[0]


def test_workload_measures_real_sparsity(digits_baseline) -> None:
    workload = digits_baseline.workload
    assert workload.iterations == 10 * (1438 // 32)
    fwd = {op.layer: op for op in workload.ops if op.pass_ == TrainingPass.FWD}
    # inputs of the layers after ReLU/pooling are really sparse; the images' zero background too
    assert 0.0 < fwd["conv1"].density_a < 0.8
    assert 0.0 < fwd["fc2"].density_a < 1.0
    conv2 = fwd["conv2"]
    # per-lane counts: a uniform sample of rows pooled over the measured batches, and the
    # stored density is that sample's
    assert conv2.a_row_nnz is not None
    assert min(conv2.m, SAMPLE_ROWS) <= len(conv2.a_row_nnz) <= SAMPLE_ROWS
    assert conv2.a_row_nnz.max() <= conv2.k
    assert conv2.density_a == pytest.approx(
        conv2.a_row_nnz.sum() / (conv2.k * len(conv2.a_row_nnz))
    )
    assert conv2.b_col_nnz is not None and len(conv2.b_col_nnz) > conv2.n
    # the 1-D dataflow's work per row: x rows (n, c, h) and W rows (k, c, r) of the conv
    g = conv2.conv
    assert g is not None and conv2.a_line_macs is not None and conv2.b_line_macs is not None
    assert conv2.a_line_macs.shape[0] % (g.in_channels * g.height) == 0
    assert conv2.a_line_macs.max() <= g.kernel_w * g.out_w
    assert conv2.b_line_macs.shape == (g.out_channels * g.in_channels * g.kernel_h,)
    grads = [op for op in workload.ops if op.layer == "conv2" and op.pass_ != TrainingPass.FWD]
    assert all(op.a_line_macs is not None for op in grads)
    assert fwd["fc2"].a_line_macs is None
    assert all(op.executions == workload.iterations for op in workload.ops)
    epoch = digits_baseline.epochs[-1]
    assert "hit_rate" not in epoch.figures and "gp_fraction" not in epoch.figures
    assert 0 < epoch.figures["density_fwd"] < 1 and 0 < epoch.figures["density_bwd"] < 1


def test_result_is_plain_json_and_the_workload_round_trips(digits_baseline) -> None:
    data = json.loads(json.dumps(digits_baseline.to_dict()))
    assert data["test_accuracy"] == digits_baseline.test_accuracy
    workload = Workload.from_dict(data["workload"])
    original = digits_baseline.workload.ops[2]
    assert (workload.ops[2].a_row_nnz == original.a_row_nnz).all()


def test_same_seed_same_training() -> None:
    config = TrainingConfig(model="mlp", dataset="digits", epochs=1, train_samples=256, width=4)
    first = run_training(config, [BaselineParams()])
    second = run_training(config, [BaselineParams()])
    assert first.epochs[0].train_loss == second.epochs[0].train_loss
    assert first.test_accuracy == second.test_accuracy


def test_progress_reaches_one_and_cancellation_stops_between_batches() -> None:
    config = TrainingConfig(
        model="mlp", dataset="digits", epochs=2, train_samples=128, batch_size=32, width=4
    )
    updates: list[Progress] = []
    run_training(config, [], progress=updates.append)
    assert [u.fraction for u in updates] == [i / 8 for i in range(1, 9)]
    assert updates[-1].epoch == 2 and "train_loss" in updates[-1].metrics

    calls = 0

    def cancel_after_three() -> bool:
        nonlocal calls
        calls += 1
        return calls > 3

    with pytest.raises(TrainingCancelled):
        run_training(config, [], should_cancel=cancel_after_three)
    assert calls == 4


def test_learning_rate_schedule_warms_up_then_anneals_to_zero() -> None:
    from backend.training.engine import learning_rate_factor

    config = TrainingConfig(lr_schedule="cosine", warmup_fraction=0.1)
    total = 200
    factor = learning_rate_factor(config, total)
    values = [factor(i) for i in range(total)]
    assert values[:20] == pytest.approx([(i + 1) / 20 for i in range(20)])  # linear warm-up
    for i in range(20, total):  # the cosine, written out: 1 at the peak, 0 after the last batch
        progress = (i - 20) / (total - 20)
        assert values[i] == pytest.approx((1 + math.cos(math.pi * progress)) / 2)
    assert max(values) == 1.0 and 0 < values[-1] < 1e-3
    constant = learning_rate_factor(TrainingConfig(lr_schedule="constant"), total)
    assert {constant(i) for i in range(total)} == {1.0}


def test_batchnorm_recalibration_uses_the_current_weights() -> None:
    """After recalibration each BatchNorm's running statistics are the plain mean and the
    unbiased variance of its input over the images (one batch: no averaging of batches)."""
    from backend.training.engine import recalibrate_batchnorm

    torch.manual_seed(0)
    model = build_model("vgg-small", (1, 8, 8), 10, 4)
    images = torch.rand(64, 1, 8, 8)
    first_bn = model.features[1]
    seen: list[torch.Tensor] = []
    handle = first_bn.register_forward_pre_hook(lambda _m, args: seen.append(args[0].detach()))
    with torch.no_grad():
        first_bn.running_mean.fill_(5.0)  # stale statistics from "training"
    model.eval()
    recalibrate_batchnorm(model, images, batch_size=64)
    handle.remove()
    x = seen[-1].transpose(0, 1).reshape(first_bn.num_features, -1)
    assert torch.allclose(first_bn.running_mean, x.mean(1), atol=1e-5)
    assert torch.allclose(first_bn.running_var, x.var(1, unbiased=True), atol=1e-5)
    assert first_bn.momentum == 0.1 and model.training


def test_a_config_built_by_hand_trains_with_its_recipe() -> None:
    from backend.specs.recipes import resolve_recipe

    config = TrainingConfig(model="mlp", dataset="digits", train_samples=256, width=4)
    resolved = resolve_recipe(config)
    assert resolved.epochs == 20 and resolved.lr_schedule == "cosine"
    assert resolve_recipe(resolved) == resolved
    explicit = TrainingConfig(model="mlp", dataset="digits", epochs=1, train_samples=256, width=4)
    assert len(run_training(explicit, [BaselineParams()]).epochs) == 1


def test_where_the_data_lives_is_an_argument(tmp_path: Path) -> None:
    """A dataset_path trains only inside the data root it is given (none given: refused), and
    Fashion-MNIST is read from the folder given; the environment names the threads used."""
    from backend.training.idx_format import write_idx

    images = np.random.default_rng(0).integers(0, 256, (64, 8, 8), dtype=np.uint8)
    for folder in (tmp_path / "root" / "set", tmp_path / "fashion"):
        folder.mkdir(parents=True)
        write_idx(folder / "train-images-idx3-ubyte", images)
        write_idx(folder / "train-labels-idx1-ubyte", np.arange(64, dtype=np.uint8) % 10)
        write_idx(folder / "t10k-images-idx3-ubyte", images[:16])
        write_idx(folder / "t10k-labels-idx1-ubyte", np.arange(16, dtype=np.uint8) % 10)
    tiny = {"model": "mlp", "epochs": 1, "batch_size": 16, "width": 4}
    in_root = TrainingConfig(dataset="idx-dir", dataset_path=str(tmp_path / "root/set"), **tiny)
    with pytest.raises(ValueError, match="data root"):
        run_training(in_root, [])
    with pytest.raises(ValueError, match="data root"):
        run_training(in_root, [], data_root=tmp_path / "fashion")
    assert len(run_training(in_root, [], data_root=tmp_path / "root").epochs) == 1
    fashion = TrainingConfig(dataset="fashion-mnist", test_samples=16, **tiny)
    result = run_training(fashion, [], fashion_mnist_dir=tmp_path / "fashion")
    assert result.workload.iterations == 64 // 16
    assert result.environment["intra_op_threads"] == torch.get_num_threads()
