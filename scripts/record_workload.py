"""Train one network for real and write its recorded workload (backend/sim/recorded.py).

    python scripts/record_workload.py                        # refresh the shipped example
    python scripts/record_workload.py --model mlp --technique sparsetrain --seed 1 -o FILE

Trains the model on the data set with the technique's default parameters (the baseline: plain
training) and the model's recipe, on one intra-op thread so the figures repeat on the same
PyTorch build and CPU, then writes the workload with the config, the epoch curves and the
provenance: the git commit of this checkout, the versions of orrery, torch and numpy, and the
machine. By default it rewrites `examples/workloads/lenet5-digits-baseline.workload.json.xz`
(LeNet-5 on the digits data set that scikit-learn ships, 20 epochs, seed 0: about 20 s); the
workload part of the file is the same on every run of the same code, build and CPU, the epoch
wall times and the provenance's date are not.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from backend.sim.recorded import SUFFIX, read_recorded, write_recorded
from backend.specs.techniques import parse_techniques
from backend.specs.training import TrainingConfig
from backend.training.recording import REPOSITORY, record_training

EXAMPLE = REPOSITORY / "examples" / "workloads" / f"lenet5-digits-baseline{SUFFIX}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="lenet5")
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--technique", default="baseline", help="a technique's name")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=None, help="default: the recipe's")
    parser.add_argument("-o", "--output", type=Path, default=EXAMPLE)
    args = parser.parse_args()
    if not args.output.name.endswith(SUFFIX):
        parser.error(f"the output's name must end in {SUFFIX}")
    torch.set_num_threads(1)
    config = TrainingConfig(
        model=args.model, dataset=args.dataset, seed=args.seed, epochs=args.epochs
    )
    recorded = record_training(config, parse_techniques([{"name": args.technique}]))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    write_recorded(recorded, args.output)
    read_recorded(args.output)  # what was written reads back
    last = recorded.epochs[-1]
    print(
        f"{args.output}: {args.output.stat().st_size / 1024:.1f} KiB, "
        f"{len(recorded.workload.ops)} GEMMs, {recorded.workload.iterations} mini-batches, "
        f"test accuracy {last['test_accuracy']:.3f} after {last['epoch']} epochs"
    )


if __name__ == "__main__":
    main()
