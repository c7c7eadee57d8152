"""Record the papers' miniatures: every training of each paper's check, as recorded workloads.

    python scripts/record_papers.py              # examples/papers/{mercury,adagp,sparsetrain}.yaml
    python scripts/record_papers.py --full       # examples/papers/full/*.yaml
    python scripts/record_papers.py --only adagp # one paper

Each spec is expanded as the server expands it (backend/experiments/expand.py), and each of its
trainings (the technique and its baseline, per seed) is trained once through the worker's code
path (backend/training/recording.py) on one intra-op thread, and written to

    examples/workloads/papers/<set>/<spec>/spec.json                   the spec as recorded
    examples/workloads/papers/<set>/<spec>/<technique>-seed<N>.workload.json.xz

where <set> is `miniatures` or `full`. Workloads, not simulated results, are kept: a cost-model
change re-simulates them and needs no new recording. Refresh only when a technique or the
training changes the workloads (each refresh adds the bundle's size to the repository's
history). A training whose file already holds the same config and techniques is skipped, so an
interrupted recording resumes where it stopped; --force records everything again.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
import yaml

from backend.experiments.expand import expand
from backend.sim.recorded import SUFFIX, read_recorded, write_recorded
from backend.specs.experiment import ExperimentSpec
from backend.specs.techniques import parse_techniques
from backend.specs.training import TrainingConfig
from backend.training.recording import REPOSITORY, record_training

PAPERS = REPOSITORY / "examples" / "papers"
BUNDLE = REPOSITORY / "examples" / "workloads" / "papers"
MINIATURES = ("mercury", "adagp", "sparsetrain")


def spec_files(full: bool, only: list[str] | None) -> list[Path]:
    if full:
        files = sorted((PAPERS / "full").glob("*.yaml"))
    else:
        files = [PAPERS / f"{name}.yaml" for name in MINIATURES]
    if only:
        files = [f for f in files if f.stem.split("-")[0] in only]
    return files


def shown(path: Path) -> Path:
    """The path relative to the repository where it lies inside it."""
    return path.relative_to(REPOSITORY) if path.is_relative_to(REPOSITORY) else path


def already_recorded(path: Path, training: dict) -> bool:
    if not path.exists():
        return False
    try:
        return read_recorded(path).training == training
    except (ValueError, OSError):
        return False


def record_spec(spec_file: Path, folder: Path, force: bool) -> None:
    spec = ExperimentSpec.model_validate(yaml.safe_load(spec_file.read_text()))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "spec.json").write_text(
        json.dumps(spec.model_dump(mode="json", exclude_none=True), indent=1, sort_keys=True) + "\n"
    )
    for plan in expand(spec, max_runs=10**6).trainings.values():
        config = TrainingConfig.model_validate(plan.training_config)
        techniques = parse_techniques(plan.technique_params)
        path = folder / f"{plan.technique}-seed{config.seed}{SUFFIX}"
        wanted = {
            "config": config.model_dump(mode="json"),
            "techniques": [t.model_dump(mode="json") for t in techniques],
        }
        if not force and already_recorded(path, wanted):
            print(f"{shown(path)}: recorded already")
            continue
        started = time.perf_counter()
        recorded = record_training(config, techniques)
        write_recorded(recorded, path)
        read_recorded(path)  # what was written reads back
        last = recorded.epochs[-1]
        print(
            f"{shown(path)}: {path.stat().st_size / 1024:.0f} KiB, "
            f"test accuracy {last['test_accuracy']:.4f}, "
            f"{time.perf_counter() - started:.0f} s",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="the larger checks of papers/full")
    parser.add_argument("--only", nargs="+", choices=MINIATURES, help="these papers only")
    parser.add_argument("--force", action="store_true", help="record again what is recorded")
    args = parser.parse_args()
    torch.set_num_threads(1)
    for spec_file in spec_files(args.full, args.only):
        folder = BUNDLE / ("full" if args.full else "miniatures") / spec_file.stem
        record_spec(spec_file, folder, args.force)
    total = sum(f.stat().st_size for f in BUNDLE.rglob("*") if f.is_file())
    print(f"bundle: {total / 2**20:.2f} MiB in {BUNDLE.relative_to(REPOSITORY)}")


if __name__ == "__main__":
    main()
