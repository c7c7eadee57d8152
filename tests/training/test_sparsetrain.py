"""SparseTrain's pruning rule and what a SparseTrain training measures."""

from __future__ import annotations

import pytest
import torch

from backend.specs.training import TrainingConfig
from backend.techniques.sparsetrain.params import SparseTrainParams
from backend.techniques.sparsetrain.training import pruning_threshold, stochastic_prune
from worker.sim.workload import TrainingPass
from worker.training import run_training


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
    assert runs[0.9].workload.technique == "sparsetrain"


def test_excluded_layers_stay_unpruned() -> None:
    result = run_training(CONFIG, [SparseTrainParams(prune_rate=0.9, excluded_layers=["fc1"])])
    assert "grad_density_pruned" not in result.epochs[0].per_layer.get("fc1", {})
    assert "grad_density_pruned" in result.epochs[0].per_layer["fc2"]
