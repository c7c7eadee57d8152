"""What ADA-GP's GP batches apply, against the true gradients of the same batches.

A replica of an ADA-GP training that also runs the backward pass on GP batches: the true
gradients are kept aside, then everything a GP batch does happens as in the real training (the
conv/linear layers' `.grad` become the predictions, BatchNorm's scale and shift get none). The
training is the same as the real one (same schedule, same updates, same test accuracy); only the
true gradients are extra (the replica's workload, not printed, counts their backward passes).
Printed per layer, means over the run's GP batches: cosine of the applied gradient with the true
one, applied norm / true norm, and the cosine of each with the layer's weights (behind BatchNorm
the true dW is orthogonal to the weights: 0.000).

`--apply true` is the ablation: GP batches apply the true conv/linear gradients (weights and
biases) instead of the predictions (weight decay and momentum as they are), to tell whether the
predictions or GP's handling of the rest costs accuracy; `--norm` sets what BatchNorm's scale
and shift get on GP batches (with `--apply true --norm true` a GP batch is a BP batch).

    python benchmarks/adagp_gp_batches.py [--model resnet8|lenet5] [--seed S] [--epochs E]
        [--apply predicted|true] [--params JSON]    (JSON: AdaGPParams fields)
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict

import torch
from torch import Tensor, nn

from backend.settings import get_settings
from backend.specs.training import TrainingConfig
from backend.techniques.adagp.params import AdaGPParams
from backend.techniques.adagp.training import AdaGP
from backend.training import engine, run_training
from backend.training.layers import GemmLayer
from backend.training.technique import Step

FASHION_MNIST_DIR = get_settings().fashion_mnist_dir  # as the worker reads it

MODELS = {
    "resnet8": dict(
        model="resnet8", dataset="fashion-mnist", width=8, train_samples=2000, test_samples=1000
    ),
    "lenet5": dict(model="lenet5", dataset="mnist", train_samples=6400, test_samples=2000),
}


def _cosine(a: Tensor, b: Tensor) -> float:
    return float(a @ b / (a.norm() * b.norm()).clamp_min(1e-30))


class ObservedAdaGP(AdaGP):
    """ADA-GP whose GP batches also compute (and, with `apply_true`, apply) true gradients."""

    def __init__(self, params: AdaGPParams, apply_true: bool, norm: str = "frozen") -> None:
        super().__init__(params)
        self.apply_true = apply_true
        self.norm = norm
        self.gp_batch = False
        self.rows: dict[str, list[tuple[float, float, float, float]]] = defaultdict(list)
        self.norm_parameters: list[nn.Parameter] = []

    def setup(self, model: nn.Module, layers: list[GemmLayer], seed: int) -> None:
        super().setup(model, layers, seed)
        self.norm_parameters = [
            p
            for m in model.modules()
            if isinstance(m, nn.modules.batchnorm._BatchNorm)
            for p in m.parameters()
        ]

    def runs_backward(self, step: Step) -> bool:
        self.gp_batch = self.predicting
        return True

    def before_step(self, step: Step, backward_ran: bool, loss: float) -> None:
        if not self.gp_batch:
            super().before_step(step, True, loss)
            return
        true = {name: s.weight.grad.detach().clone() for name, s in self.states.items()}
        norm_true = [p.grad.detach().clone() for p in self.norm_parameters]
        bias_true = {
            name: s.bias.grad.detach().clone()
            for name, s in self.states.items()
            if s.bias is not None and s.bias.grad is not None
        }
        for parameter in [p for s in self.states.values() for p in s.layer.parameters()]:
            parameter.grad = None
        for parameter in self.norm_parameters:
            parameter.grad = None
        super().before_step(step, False, loss)
        for name, state in self.states.items():
            applied, weight = state.weight.grad, state.weight.detach().reshape(-1)
            if applied is None:
                continue
            g, p = true[name].reshape(-1), applied.reshape(-1)
            ratio = float(p.norm() / g.norm().clamp_min(1e-30))
            self.rows[name].append((_cosine(p, g), ratio, _cosine(p, weight), _cosine(g, weight)))
            if self.apply_true:
                state.weight.grad = true[name]
                if state.bias is not None:
                    state.bias.grad = bias_true.get(name)
        for parameter, grad in zip(self.norm_parameters, norm_true, strict=True):
            if self.norm == "true":
                parameter.grad = grad
            elif self.norm == "momentum":
                parameter.grad = torch.zeros_like(grad)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=list(MODELS), default="resnet8")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--apply", choices=["predicted", "true"], default="predicted")
    parser.add_argument("--params", default="{}", help="AdaGPParams fields as JSON")
    parser.add_argument(
        "--norm",
        choices=["frozen", "momentum", "true"],
        default="frozen",
        help="BatchNorm scale and shift on GP batches: no gradient (as in ADA-GP), a zero one "
        "(the optimiser's momentum and weight decay go on), the true one",
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    params = AdaGPParams(**json.loads(args.params))
    technique = ObservedAdaGP(params, apply_true=args.apply == "true", norm=args.norm)
    engine.build_techniques = lambda _params: [technique]
    config = TrainingConfig(
        **MODELS[args.model], epochs=args.epochs, batch_size=64, seed=args.seed
    )  # fmt: skip
    result = run_training(config, [params], fashion_mnist_dir=FASHION_MNIST_DIR)
    for epoch in result.epochs:
        print(f"epoch {epoch.epoch}: train loss {epoch.train_loss:.4f}, test accuracy "
              f"{epoch.test_accuracy:.4f}, GP fraction "
              f"{epoch.figures['gp_fraction']:.3f}")  # fmt: skip
    print(f"{'layer':<24}{'GP batches':>11}{'cos(p,g)':>10}{'|p|/|g|':>9}{'cos(p,W)':>10}"
          f"{'cos(g,W)':>10}")  # fmt: skip
    for name, rows in technique.rows.items():
        means = torch.tensor(rows).mean(0).tolist()
        print(f"{name:<24}{len(rows):>11}" + "".join(f"{m:>+10.3f}" for m in means))


if __name__ == "__main__":
    main()
