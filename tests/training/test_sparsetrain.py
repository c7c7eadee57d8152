"""SparseTrain's pruning rule and what a SparseTrain training measures."""

from __future__ import annotations

from dataclasses import replace
from typing import Literal
from unittest.mock import patch

import pytest
import torch
from pydantic import BaseModel
from torch import nn

from backend.sim import GemmOp, SimulationResult, Workload, simulate
from backend.sim.lowering import lower_linear
from backend.sim.workload import TrainingPass
from backend.specs.accelerator import PRESETS, AcceleratorConfig
from backend.specs.training import TrainingConfig
from backend.techniques.sparsetrain.params import SparseTrainParams
from backend.techniques.sparsetrain.training import (
    SparseTrain,
    pruning_threshold,
    stochastic_prune,
)
from backend.training import run_training
from backend.training.layers import GemmLayer
from backend.training.registry import build_techniques
from backend.training.results import TrainingResult
from backend.training.technique import Step, Technique, WorkloadOps


def test_pruning_is_unbiased() -> None:
    """E[g'] = g: the mean of many pruned copies is within 5 standard errors of g."""
    gradient = torch.randn(200, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    trials = 4000
    samples = torch.stack([stochastic_prune(gradient, 0.9, key) for key in range(trials)])
    tau = pruning_threshold(gradient, 0.9)
    small = gradient.abs() < tau
    assert small.float().mean() > 0.5  # the test exercises the stochastic branch
    variance = torch.where(small, tau * gradient.abs() - gradient**2, 0.0)
    error = (samples.mean(0) - gradient).abs()
    assert (error <= 5 * (variance / trials).sqrt() + 1e-12).all()
    assert not torch.equal(samples[0], samples[1])  # fresh random numbers each step


def test_pruned_values_are_zero_tau_or_unchanged() -> None:
    gradient = torch.randn(1000, generator=torch.Generator().manual_seed(2))
    pruned = stochastic_prune(gradient, 0.8, key=3)
    tau = pruning_threshold(gradient, 0.8)
    large = gradient.abs() >= tau
    assert torch.equal(pruned[large], gradient[large])
    survivors = pruned[~large][pruned[~large] != 0]
    assert torch.allclose(survivors.abs(), torch.full_like(survivors, tau))
    assert 0 < len(survivors) < int((~large).sum())  # some small values promoted, most dropped


def test_pruning_depends_on_the_key_only() -> None:
    """Same key, same result; another key, other random numbers. About |g|/tau of the small
    values survive."""
    gradient = torch.randn(64, 16, 28, 28, generator=torch.Generator().manual_seed(5))
    pruned = stochastic_prune(gradient, 0.9, key=7)
    assert torch.equal(stochastic_prune(gradient, 0.9, key=7), pruned)
    assert not torch.equal(stochastic_prune(gradient, 0.9, key=8), pruned)
    tau = pruning_threshold(gradient, 0.9)
    small = gradient.abs() < tau
    expected = float((gradient.abs()[small] / tau).sum())
    survivors = int((pruned[small] != 0).sum())
    assert abs(survivors - expected) < 5 * expected**0.5


def test_rate_zero_keeps_the_gradient() -> None:
    gradient = torch.randn(50, generator=torch.Generator().manual_seed(4))
    pruned = stochastic_prune(gradient, 0.0, key=0)
    assert torch.equal(pruned, gradient)


CONFIG = TrainingConfig(
    model="lenet5", dataset="digits", epochs=1, train_samples=384, batch_size=32, seed=1
)


@pytest.fixture(scope="module")
def runs() -> dict[float, object]:
    return {p: run_training(CONFIG, [SparseTrainParams(prune_rate=p)]) for p in (0.0, 0.5, 0.9)}


def test_measured_gradient_density_falls_as_p_rises(runs) -> None:
    densities = [runs[p].epochs[0].figures["density_bwd"] for p in (0.0, 0.5, 0.9)]
    assert densities[0] > densities[1] > densities[2]
    for p in (0.5, 0.9):
        layer = runs[p].epochs[0].per_layer["conv2"]
        assert layer["grad_density_pruned"] < layer["grad_density_natural"]


def test_workload_carries_pruned_densities_and_overheads(runs) -> None:
    def op(p: float, pass_: TrainingPass):
        return next(o for o in runs[p].workload.ops if o.layer == "fc1" and o.pass_ == pass_)

    assert op(0.9, TrainingPass.BWD_DATA).density_a < op(0.0, TrainingPass.BWD_DATA).density_a
    weight_pass = op(0.9, TrainingPass.BWD_WEIGHT)
    assert weight_pass.extra_ops["random_numbers"] > 0
    assert weight_pass.extra_ops["fp_adds"] == 32 * 120  # one per gradient element
    assert "gradient_reads" not in weight_pass.extra_ops  # tau from the previous step: inline
    assert runs[0.9].workload.technique == "sparsetrain"


def test_excluded_layers_stay_unpruned() -> None:
    result = run_training(CONFIG, [SparseTrainParams(prune_rate=0.9, excluded_layers=["fc1"])])
    assert "grad_density_pruned" not in result.epochs[0].per_layer.get("fc1", {})
    assert "grad_density_pruned" in result.epochs[0].per_layer["fc2"]


# The threshold's source (threshold_from): tau measured at a layer's last pruned step, or on the
# gradient being pruned.


def _gradients(seed: int, steps: int, shape: tuple[int, ...]) -> list[torch.Tensor]:
    """Gradients whose scale changes from step to step, so every step's tau differs."""
    generator = torch.Generator().manual_seed(seed)
    return [(0.5 + step) * torch.randn(shape, generator=generator) for step in range(steps)]


def _prune_steps(hook: SparseTrain, layers: list[GemmLayer], gradients: dict[str, list]) -> list:
    """Drive the hook as the training does (one output_grad per layer and step, last layer
    first); per step and layer: the hook's record, the gradient and what the hook returned."""
    steps = []
    for step in range(len(next(iter(gradients.values())))):
        hook.start_batch(Step(0, step, step))
        seen = {}
        for layer in reversed(layers):
            grad = gradients[layer.name][step]
            pruned = hook.output_grad(layer, grad)
            seen[layer.name] = (hook.thresholds.get(layer.name), grad, pruned)
        hook.before_step(Step(0, step, step), backward_ran=True, loss=0.0)
        steps.append(seen)
    return steps


def test_previous_prunes_with_the_tau_measured_at_the_layers_last_step() -> None:
    """tau applied at step t is, exactly, the tau of the layer's gradient at step t-1 (computed
    here from that gradient); on the first step the layer's own. Values below it become 0 or
    exactly +-tau: the recorded tau is the one that pruned."""
    assert SparseTrainParams().threshold_from == "previous"  # the default
    layers = [GemmLayer("conv", nn.Conv2d(1, 4, 3)), GemmLayer("fc", nn.Linear(8, 6))]
    gradients = {"conv": _gradients(0, 5, (8, 4, 6, 6)), "fc": _gradients(1, 5, (8, 6))}
    hook = SparseTrain(SparseTrainParams(prune_rate=0.9))
    hook.setup(nn.Sequential(), layers, seed=3)
    steps = _prune_steps(hook, layers, gradients)
    for step, seen in enumerate(steps):
        for name, (record, grad, pruned) in seen.items():
            own = pruning_threshold(grad, 0.9)
            earlier = gradients[name][step - 1] if step else grad
            assert record.measured == own
            assert record.applied == pruning_threshold(earlier, 0.9)
            if step:
                assert record.applied == steps[step - 1][name][0].measured
                assert record.applied != own  # the scales differ: the test tells them apart
            _assert_pruned_at(grad, pruned, record.applied)


def test_current_prunes_with_the_tau_of_the_gradient_itself() -> None:
    layers = [GemmLayer("fc", nn.Linear(8, 6))]
    gradients = {"fc": _gradients(2, 4, (16, 6))}
    hook = SparseTrain(SparseTrainParams(prune_rate=0.8, threshold_from="current"))
    for seen in _prune_steps(hook, layers, gradients):
        record, grad, pruned = seen["fc"]
        assert record.applied == record.measured == pruning_threshold(grad, 0.8)
        _assert_pruned_at(grad, pruned, record.applied)


def _assert_pruned_at(grad: torch.Tensor, pruned: torch.Tensor, tau: float) -> None:
    """`pruned` is `grad` pruned at `tau`: values at or above it kept, the survivors below it
    raised to exactly +-tau, the others dropped."""
    large = grad.abs() >= tau
    assert torch.equal(pruned[large], grad[large])
    small = pruned[~large]
    survivors = small[small != 0]
    assert 0 < len(survivors) < len(small)
    assert torch.equal(survivors.abs(), torch.full_like(survivors, tau))


Call = tuple[str, float, float, float]


def _train_with_hook(params: SparseTrainParams, record: list[Call]) -> TrainingResult:
    """Train CONFIG; append (layer, applied, measured, tau of the gradient, computed here) for
    every output_grad call of the SparseTrain hook."""
    from backend.training import engine

    def build(all_params: list[BaseModel]) -> list[Technique]:
        (hook,) = build_techniques(all_params)
        assert isinstance(hook, SparseTrain)
        prune = hook.output_grad

        def recording(layer: GemmLayer, grad: torch.Tensor) -> torch.Tensor:
            pruned = prune(layer, grad)
            if layer.name in hook.thresholds:
                applied = hook.thresholds[layer.name]
                own = pruning_threshold(grad, params.prune_rate)
                record.append((layer.name, applied.applied, applied.measured, own))
            return pruned

        hook.output_grad = recording  # type: ignore[method-assign]
        return [hook]

    with patch.object(engine, "build_techniques", build):
        return run_training(CONFIG, [params])


def test_a_training_prunes_each_layer_with_its_previous_steps_tau() -> None:
    calls: list[Call] = []
    _train_with_hook(SparseTrainParams(prune_rate=0.9), calls)
    layers = {name for name, *_ in calls}
    steps = CONFIG.train_samples // CONFIG.batch_size
    assert len(calls) == steps * len(layers) and len(layers) == 5  # LeNet-5: 2 conv, 3 fc
    last: dict[str, float] = {}
    differ = 0
    for name, applied, measured, own in calls:
        assert measured == own
        assert applied == last.get(name, own)
        differ += applied != own
        last[name] = own
    assert differ == (steps - 1) * len(layers)  # tau really moves between steps


def test_a_current_training_charges_one_read_per_gradient_element() -> None:
    calls: list[Call] = []
    result = _train_with_hook(SparseTrainParams(prune_rate=0.9, threshold_from="current"), calls)
    assert all(applied == measured == own for _, applied, measured, own in calls)
    weight_pass = next(
        op
        for op in result.workload.ops
        if op.layer == "fc1" and op.pass_ == TrainingPass.BWD_WEIGHT
    )
    assert weight_pass.extra_ops["gradient_reads"] == 32 * 120
    assert weight_pass.extra_ops["fp_adds"] == 32 * 120


def _simulated(
    threshold_from: Literal["previous", "current"], accel: AcceleratorConfig
) -> tuple[SimulationResult, GemmOp, int]:
    """One linear layer pruned for 6 steps with the same gradient every step (so both settings
    apply the same tau and prune alike), its workload annotated and simulated on `accel`; the
    result, the annotated BWD-WEIGHT op and the gradient's elements."""
    batch, features, steps = 28, 128, 6  # 3,584 elements: a multiple of 14, 16 and 128 columns
    gradient = torch.randn(batch, features, generator=torch.Generator().manual_seed(9))
    layer = GemmLayer("fc", nn.Linear(64, features))
    hook = SparseTrain(SparseTrainParams(prune_rate=0.9, threshold_from=threshold_from))
    hook.setup(nn.Sequential(), [layer], seed=0)
    _prune_steps(hook, [layer], {"fc": [gradient] * steps})
    ops = [replace(op, executions=steps) for op in lower_linear("fc", batch, 64, features)]
    hook.annotate_workload(WorkloadOps(ops))
    workload = Workload("toy", "toy", batch, steps, ops, technique="sparsetrain")
    (weight,) = (op for op in ops if op.pass_ == TrainingPass.BWD_WEIGHT)
    return simulate(workload, accel), weight, gradient.numel()


@pytest.mark.parametrize("preset", ["sparsetrain-like", "eyeriss-like", "tpu-like"])
@pytest.mark.parametrize("overlap", ["overlapped", "serial"])
def test_current_costs_one_more_pass_over_the_gradient(preset: str, overlap: str) -> None:
    """The same pruning, with tau from the current gradient, costs exactly one more pass over
    the gradient per step: its elements read on the column units (elements / cols cycles, one
    integer add of energy each), busy whatever the overlap, exposed in full when serial."""
    accel = PRESETS[preset].model_copy(update={"extension_overlap": overlap})
    previous, previous_op, elements = _simulated("previous", accel)
    current, current_op, _ = _simulated("current", accel)
    assert elements % accel.cols == 0
    # the same pruning work; only the pass differs
    assert current_op.extra_ops.pop("gradient_reads") == elements
    assert current_op.extra_ops == previous_op.extra_ops
    steps = 6
    pass_cycles = steps * elements / accel.cols
    pass_energy = steps * elements * accel.energy.int_add
    before, after = previous.totals, current.totals
    assert after.extension_cycles - before.extension_cycles == pass_cycles
    assert after.energy_by_level["mac"] - before.energy_by_level["mac"] == pytest.approx(
        pass_energy, rel=1e-12
    )
    assert after.energy_pj - before.energy_pj == pytest.approx(pass_energy, rel=1e-9)
    for unchanged in ("array_cycles", "stall_cycles", "dram_bytes", "sram_reads", "macs_actual"):
        assert getattr(after, unchanged) == getattr(before, unchanged), unchanged
    exposed = after.exposed_extension_cycles - before.exposed_extension_cycles
    if overlap == "serial":
        assert exposed == pass_cycles
        assert after.total_cycles - before.total_cycles == pass_cycles
    else:
        assert 0 <= exposed <= pass_cycles
