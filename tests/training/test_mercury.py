"""MERCURY: signatures, MCACHE models against a plain reference, exact reuse, and training."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import Tensor

from backend.sim.workload import TrainingPass
from backend.specs.training import TrainingConfig
from backend.techniques.baseline.params import BaselineParams
from backend.techniques.mercury import TECHNIQUE as MERCURY_ENTRY
from backend.techniques.mercury.mcache import CacheModel, owners, reference_owners
from backend.techniques.mercury.params import MercuryParams
from backend.techniques.mercury.signatures import RandomProjection, pack_signs
from backend.techniques.mercury.training import Mercury
from backend.training import run_training
from backend.training.datasets import load_dataset
from backend.training.hook_chain import HookChain
from backend.training.layers import GemmLayer, ReuseMap, attach_hooks, instrument, mark_classifier
from backend.training.models import MODEL_REGISTRY, build_model
from backend.training.recorder import WorkloadRecorder
from backend.training.technique import Step

CACHES = [
    CacheModel("unbounded"),
    CacheModel("direct", 64),
    CacheModel("direct", 7),
    CacheModel("set-associative", 64, 4),
    CacheModel("set-associative", 12, 3),
    CacheModel("set-associative", 1024, 4),
]


@pytest.mark.parametrize("cache", CACHES, ids=lambda c: f"{c.kind}-{c.entries}-{c.ways}")
def test_mcache_equals_reference_on_random_signatures(cache: CacheModel) -> None:
    rng = np.random.default_rng(cache.entries)
    for _ in range(20):
        signatures = rng.integers(-40, 300, size=int(rng.integers(1, 2000))).astype(np.int64)
        assert np.array_equal(owners(signatures, cache), reference_owners(signatures, cache))


@pytest.mark.parametrize(
    "cache",
    [*CACHES, CacheModel("direct", 1), CacheModel("set-associative", 32, 16)],
    ids=lambda c: f"{c.kind}-{c.entries}-{c.ways}",
)
def test_mcache_equals_reference_on_hard_streams(cache: CacheModel) -> None:
    """Few signatures (long windows with many repeats), runs, and full 64-bit signatures
    (negative as int64): every way the fast model could cut a corner."""
    assert len(owners(np.empty(0, dtype=np.int64), cache)) == 0
    rng = np.random.default_rng(cache.entries + cache.ways)
    for trial in range(60):
        count = int(rng.integers(1, 3000))
        if trial % 3 == 0:
            signatures = rng.integers(0, int(rng.integers(1, 12)), size=count) * 7
        elif trial % 3 == 1:
            pool = rng.integers(-(2**63), 2**63 - 1, size=int(rng.integers(1, 50)), dtype=np.int64)
            signatures = pool[rng.integers(0, len(pool), size=count)]
        else:
            signatures = np.repeat(rng.integers(0, 40, count), rng.integers(1, 6, count))[:count]
        signatures = signatures.astype(np.int64)
        assert np.array_equal(owners(signatures, cache), reference_owners(signatures, cache))


def test_reference_lru_by_hand() -> None:
    # one set of two ways: 3 4 3(hit) 5(evicts 4) 4(miss, evicts 3) 3(miss)
    signatures = np.array([3, 4, 3, 5, 4, 3])
    cache = CacheModel("set-associative", 2, 2)
    assert reference_owners(signatures, cache).tolist() == [0, 1, 0, 3, 4, 5]
    assert reference_owners(signatures, CacheModel("unbounded")).tolist() == [0, 1, 0, 3, 1, 0]


def _layer_inputs(model: torch.nn.Module, images: Tensor) -> dict[str, Tensor]:
    inputs: dict[str, Tensor] = {}
    for module in model.modules():
        if isinstance(module, GemmLayer):
            module.register_forward_pre_hook(
                lambda layer, args: inputs.setdefault(layer.name, args[0].detach())
            )
    return inputs


@pytest.mark.parametrize("cache", CACHES[:1] + CACHES[3:], ids=lambda c: c.kind)
def test_hit_rates_of_a_real_batch_equal_the_unfold_reference(cache: CacheModel) -> None:
    """The layer-by-layer hits MERCURY counts in a LeNet forward on real digits equal those of
    signatures built by explicit im2col, streamed through the reference MCACHE."""
    torch.manual_seed(0)
    model = build_model("lenet5", (1, 8, 8), 10, 16)
    layers = [s for s in instrument(model) if isinstance(s, GemmLayer)]
    params = MercuryParams(
        signature_bits=12, cache=cache.kind, cache_entries=cache.entries, cache_ways=cache.ways
    )
    mercury = Mercury(params)
    mercury.setup(model, layers, seed=5)
    inputs = _layer_inputs(model, torch.empty(0))
    attach_hooks(model, HookChain([mercury], WorkloadRecorder(measure=False)))
    model(load_dataset("digits").train_images[:64])
    for layer in layers:
        projection: RandomProjection = mercury.layers[layer.name].projection
        projected = projection.projections_by_unfolding(inputs[layer.name], 12)
        assert torch.allclose(projected, projection.projections(inputs[layer.name], 12), atol=1e-4)
        reference = reference_owners(projection.signatures(inputs[layer.name], 12), cache)
        expected_hits = int((reference != np.arange(len(reference))).sum())
        assert mercury.layers[layer.name].epoch_hits == expected_hits
    assert mercury.layers["conv1"].epoch_hits > 0


def test_signature_bits_are_packed_low_bit_first() -> None:
    """Bit i of a row's signature is [projection i >= 0]; bit 63 is the int64's sign."""
    projections = np.random.default_rng(0).standard_normal((3, 64, 5)).astype(np.float32)
    projections[0, :, 0] = 0.0  # every bit set: -1
    expected = [
        sum(1 << bit for bit in range(64) if projections[outer, bit, inner] >= 0)
        for outer in range(3)
        for inner in range(5)
    ]
    packed = pack_signs(projections)
    assert np.array_equal(packed, np.array(expected, dtype=np.uint64).view(np.int64))
    assert packed[0] == -1
    assert np.array_equal(pack_signs(projections[:, :12]), packed & (2**12 - 1))


def test_conv_signatures_equal_unfolded_signatures_away_from_zero() -> None:
    conv = torch.nn.Conv2d(3, 4, 3, stride=2, padding=1)
    projection = RandomProjection(conv, 16, torch.Generator().manual_seed(0))
    x = torch.randn(2, 3, 9, 9)
    by_conv, by_unfold = projection.projections(x, 16), projection.projections_by_unfolding(x, 16)
    assert by_conv.shape == (2 * 5 * 5, 16)
    clear = by_unfold.abs() > 1e-4
    assert torch.equal(by_conv[clear] >= 0, by_unfold[clear] >= 0)


def test_reuse_copies_owner_outputs_and_folds_the_weight_gradient() -> None:
    torch.manual_seed(1)
    conv = torch.nn.Conv2d(2, 3, 3, padding=1)
    layer = GemmLayer("conv", conv)
    x = torch.randn(2, 2, 4, 4, requires_grad=True)
    rows = 2 * 4 * 4
    owner = torch.arange(rows)
    owner[5], owner[9], owner[20] = 1, 1, 3  # rows 5 and 9 reuse row 1, row 20 reuses row 3

    class Fixed:
        def reuse_map(self, layer, x):
            return ReuseMap(owner, fold_weight_grad=True)

        def after_forward(self, layer, x, y):
            pass

        def output_grad(self, layer, grad):
            return grad

    layer.hooks = Fixed()  # type: ignore[assignment]
    y = layer(x)
    dense = conv(x)
    out_rows = y.permute(0, 2, 3, 1).reshape(rows, 3)
    dense_rows = dense.permute(0, 2, 3, 1).reshape(rows, 3)
    assert torch.equal(out_rows, dense_rows[owner])
    grad = torch.randn_like(y)
    y.backward(grad)
    windows = torch.nn.functional.unfold(x.detach(), 3, padding=1).transpose(1, 2).reshape(rows, -1)
    grad_rows = grad.permute(0, 2, 3, 1).reshape(rows, 3)
    expected_dw = (grad_rows.T @ windows[owner]).reshape(conv.weight.shape)
    assert torch.allclose(conv.weight.grad, expected_dw, atol=1e-5)
    dense_dx = torch.autograd.grad(conv(x), x, grad)[0]
    assert torch.allclose(x.grad, dense_dx, atol=1e-5)  # BWD-DATA stays dense


def test_mac_weighted_reuse_by_hand() -> None:
    """Two layers, two batches, the second without a backward pass (as an ADA-GP step). Rows
    repeat exactly, so an unbounded MCACHE's hits are known: the linear layer's rows a a b a c b
    hit 3 times per batch; the 1x1 conv's four identical windows 3 times."""
    fc = GemmLayer("fc", torch.nn.Linear(4, 3))  # 12 MACs per row
    conv = GemmLayer("conv", torch.nn.Conv2d(2, 3, 1))  # 6 MACs per window
    params = MercuryParams(
        signature_bits=64, max_bits=64, centre_inputs=False, cache="unbounded", adaptive=False
    )
    mercury = Mercury(params)
    mercury.setup(torch.nn.Sequential(fc, conv), [fc, conv], seed=0)
    a, b, c = [1.0, 0.0, 0.0, 0.0], [-1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]
    rows = torch.tensor([a, a, b, a, c, b])
    windows = torch.tensor([1.0, 2.0]).reshape(1, 2, 1, 1).expand(1, 2, 2, 2).contiguous()
    for index, backward in enumerate((True, False)):
        step = Step(0, index, index)
        mercury.start_batch(step)
        assert _forward(mercury, fc, rows) == 3
        assert _forward(mercury, conv, windows) == 3
        mercury.before_step(step, backward, 1.0)
    figures = mercury.epoch_figures()
    # fc: FWD 2 x 6 rows, 6 hit; BWD-WEIGHT (first batch only) 6 positions, 3 folded.
    assert figures.per_layer["fc"]["reuse_macs"] == pytest.approx((6 + 3) / (12 + 6))
    # conv: FWD 2 x 4 windows, 6 hit; BWD-WEIGHT 4 positions, 3 folded.
    assert figures.per_layer["conv"]["reuse_macs"] == pytest.approx((6 + 3) / (8 + 4))
    skipped = (6 + 3) * 12 + (6 + 3) * 6
    total = (12 + 6) * 12 + (8 + 4) * 6
    assert figures.scalars["reuse_macs"] == pytest.approx(skipped / total)
    assert figures.scalars["hit_rate"] == pytest.approx(12 / 20)  # rows-weighted
    assert "reuse_macs" in {figure.key for figure in MERCURY_ENTRY.figures}
    assert mercury.epoch_figures().scalars["reuse_macs"] == 0.0  # counts restart each epoch


def _forward(mercury: Mercury, layer: GemmLayer, x: Tensor) -> int:
    """What a GemmLayer's forward asks of MERCURY: the reuse map, then the output; the hits."""
    reuse = mercury.reuse_map(layer, x)
    mercury.after_forward(layer, x, layer.inner(x))
    return reuse.hits if reuse is not None else 0


def test_a_switched_off_layer_counts_as_zero_reuse_by_hand() -> None:
    """The fc layer's rows a a b a c b hit 3 of 6 (0.5), the conv's four identical windows 3 of
    4 (0.75). With min_hit_rate 0.6 the rule switches fc off after epoch 1: its figures say so
    there, and in epoch 2 its rows and MACs count with no hit, so the rates fall rather than
    rise to the conv's alone."""
    fc = GemmLayer("fc", torch.nn.Linear(4, 3))  # 12 MACs per row
    conv = GemmLayer("conv", torch.nn.Conv2d(2, 3, 1))  # 6 MACs per window
    params = MercuryParams(
        signature_bits=64, max_bits=64, centre_inputs=False, cache="unbounded", min_hit_rate=0.6
    )
    mercury = Mercury(params)
    mercury.setup(torch.nn.Sequential(fc, conv), [fc, conv], seed=0)
    a, b, c = [1.0, 0.0, 0.0, 0.0], [-1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]
    rows = torch.tensor([a, a, b, a, c, b])
    windows = torch.tensor([1.0, 2.0]).reshape(1, 2, 1, 1).expand(1, 2, 2, 2).contiguous()
    epochs = []
    for epoch in range(2):
        step = Step(epoch, 0, epoch)
        mercury.start_batch(step)
        fc_hits, conv_hits = _forward(mercury, fc, rows), _forward(mercury, conv, windows)
        mercury.before_step(step, True, 1.0)
        mercury.end_epoch(epoch, 1.0)
        epochs.append((fc_hits, conv_hits, mercury.epoch_figures()))
    (fc_hits, conv_hits, first), (fc_off, conv_on, second) = epochs
    assert (fc_hits, conv_hits, fc_off, conv_on) == (3, 3, 0, 3)
    # epoch 1: both reuse; fc's 0.5 is below 0.6, so the rule switched it off at the epoch's end
    assert first.per_layer["fc"]["hit_rate"] == 0.5
    assert first.per_layer["fc"]["reuse_off_below"] == 0.6
    assert "reuse_off_below" not in first.per_layer["conv"]
    assert first.scalars["hit_rate"] == pytest.approx(6 / 10)
    # FWD and BWD-WEIGHT each: fc 6 rows, 3 reused, 12 MACs a row; conv 4 windows, 3, 6 MACs
    macs = 2 * 6 * 12 + 2 * 4 * 6  # 192
    assert first.scalars["reuse_macs"] == pytest.approx((2 * 3 * 12 + 2 * 3 * 6) / macs)
    # epoch 2: fc is off (no hit rate of its own, no new switch-off), and counts as zero
    assert second.per_layer["fc"] == {"reuse_on": 0.0}
    assert second.per_layer["conv"]["hit_rate"] == 0.75
    assert second.scalars["hit_rate"] == pytest.approx(3 / 10)  # not the conv's 0.75
    assert second.scalars["reuse_macs"] == pytest.approx(2 * 3 * 6 / macs)  # conv alone: 0.75
    # the training's figure: the mean over its equal epochs, the share over the whole training
    hit_rate = next(f for f in MERCURY_ENTRY.figures if f.key == "hit_rate")
    over_training = hit_rate.of_training([first.scalars["hit_rate"], second.scalars["hit_rate"]])
    assert over_training == pytest.approx((6 + 3) / 20)


DIGITS = TrainingConfig(model="lenet5", dataset="digits", epochs=20, batch_size=32)


def test_many_bits_keep_baseline_accuracy() -> None:
    """Plain RPQ (the paper's s(x) = [Rx >= 0]) with long signatures: mean test accuracy over
    three seeds within one point of the baseline's."""
    many_bits = MercuryParams(signature_bits=64, max_bits=64, centre_inputs=False)
    baseline, mercury = [], []
    for seed in range(3):
        config = DIGITS.model_copy(update={"seed": seed})
        baseline.append(run_training(config, [BaselineParams()]).test_accuracy)
        result = run_training(config, [many_bits])
        assert result.epochs[0].figures["hit_rate"] > 0  # all-zero and identical windows do hit
        mercury.append(result.test_accuracy)
    assert abs(np.mean(mercury) - np.mean(baseline)) <= 0.01


def test_training_reports_hit_rates_and_annotates_the_workload() -> None:
    config = TrainingConfig(model="lenet5", dataset="digits", epochs=2, train_samples=512)
    params = MercuryParams(signature_bits=8, max_bits=16, min_hit_rate=0.9)
    result = run_training(config, [params])
    first, second = result.epochs
    assert 0 < first.figures["hit_rate"] < 1
    conv1 = first.per_layer["conv1"]
    assert conv1["hit_rate"] > 0 and conv1["signature_bits"] == 8
    assert 0 < conv1["reuse_macs"] < 1 and 0 < first.figures["reuse_macs"] < 1
    assert all(first.per_layer[name]["reuse_on"] == 1.0 for name in ("conv1", "fc1", "fc2"))
    classifier = first.per_layer["fc3"]  # excluded by default
    assert classifier["reuse_on"] == 0.0 and "hit_rate" not in classifier
    low = {name for name, v in first.per_layer.items() if v.get("hit_rate", 1) < 0.9}
    assert low  # with 8 bits on digits, some layers reuse less than 90% of their rows
    switched = {name for name, v in first.per_layer.items() if "reuse_off_below" in v}
    assert switched == low and all(first.per_layer[n]["reuse_off_below"] == 0.9 for n in low)
    for name, figures in second.per_layer.items():
        if "reuse_on" in figures:
            assert figures["reuse_on"] == (0.0 if name in low or name == "fc3" else 1.0)
    ops = {(op.layer, op.pass_, op.role): op for op in result.workload.ops}
    fwd = ops[("conv1", TrainingPass.FWD, "compute")]
    assert 0 < fwd.reused_row_fraction < 1
    assert fwd.extra_ops["mcache_lookups"] == pytest.approx(fwd.m)
    weight = ops[("conv1", TrainingPass.BWD_WEIGHT, "compute")]
    assert weight.folded_k_fraction == pytest.approx(1 - fwd.reused_row_fraction)
    signature = ops[("conv1.signature", TrainingPass.FWD, "overhead")]
    assert (signature.m, signature.k) == (fwd.m, fwd.k)
    assert signature.n in (8, 12, 16)
    # the projection reads conv1's FWD input stream: on the array or a projection unit
    assert signature.runs_on == "projection" and signature.fused_with == "conv1"


@pytest.mark.parametrize("name", list(MODEL_REGISTRY))
@pytest.mark.parametrize("shape", [(1, 8, 8), (1, 28, 28), (3, 32, 32)])
def test_the_classifier_is_excluded_by_default_on_every_zoo_model(
    name: str, shape: tuple[int, int, int]
) -> None:
    torch.manual_seed(0)
    model = build_model(name, shape, 10, 8)
    layers = [site for site in instrument(model) if isinstance(site, GemmLayer)]
    mark_classifier(model, shape)
    mercury = Mercury(MercuryParams())
    mercury.setup(model, layers, seed=0)
    excluded = [layer for layer in layers if not mercury.layers[layer.name].reusing]
    assert len(excluded) == 1
    # Independently: the excluded layer's output on real-looking input is the model's output.
    outputs: dict[str, Tensor] = {}
    for layer in layers:
        layer.register_forward_hook(
            lambda module, _args, y: outputs.__setitem__(module.name, y.detach())
        )
    model.eval()
    logits = model(torch.rand(4, *shape)).detach()
    assert logits.shape == (4, 10)
    assert torch.equal(outputs[excluded[0].name], logits)
    # The knob brings it back; excluded_layers still excludes the others.
    everything = Mercury(MercuryParams(reuse_classifier=True))
    everything.setup(model, layers, seed=0)
    assert all(state.reusing for state in everything.layers.values())
    first = layers[0].name
    named = Mercury(MercuryParams(excluded_layers=[first]))
    named.setup(model, layers, seed=0)
    assert {n for n, s in named.layers.items() if not s.reusing} == {first, excluded[0].name}
