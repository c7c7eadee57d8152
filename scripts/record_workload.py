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
import importlib.metadata
import platform
import subprocess
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch

from backend.sim.recorded import SUFFIX, RecordedWorkload, read_recorded, write_recorded
from backend.specs.recipes import resolve_recipe
from backend.specs.techniques import parse_techniques
from backend.specs.training import TrainingConfig
from backend.training import TrainingResult, run_training

REPOSITORY = Path(__file__).resolve().parents[1]
EXAMPLE = REPOSITORY / "examples" / "workloads" / f"lenet5-digits-baseline{SUFFIX}"
PACKAGES = ("orrery", "torch", "numpy")


def git_commit() -> tuple[str | None, bool]:
    """This checkout's commit and whether it has uncommitted changes (None outside git)."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=REPOSITORY, capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        return git("rev-parse", "HEAD"), bool(git("status", "--porcelain", "--untracked=no"))
    except (OSError, subprocess.CalledProcessError):
        return None, False


def cpu_model() -> str:
    """The CPU's model name as the kernel reports it (the platform's guess elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def provenance(result: TrainingResult) -> dict[str, Any]:
    commit, dirty = git_commit()
    environment = result.environment
    return {
        "commit": commit,
        "dirty": dirty,
        "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "packages": {name: importlib.metadata.version(name) for name in PACKAGES},
        "machine": {
            "cpu": cpu_model(),
            "threads": environment["intra_op_threads"],
            "cpu_capability": environment["cpu_capability"],
            "architecture": environment["machine"],
        },
    }


def record(config: TrainingConfig, technique: str) -> RecordedWorkload:
    config = resolve_recipe(config)
    techniques = parse_techniques([{"name": technique}])
    result = run_training(config, techniques)
    return RecordedWorkload(
        workload=result.workload,
        training={
            "config": config.model_dump(mode="json"),
            "techniques": [t.model_dump(mode="json") for t in techniques],
        },
        epochs=[asdict(epoch) for epoch in result.epochs],
        provenance=provenance(result),
    )


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
    recorded = record(config, args.technique)
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
