"""Train once and keep the workload: a training turned into a recorded workload.

`record_training` runs one training (the worker's `run_training`, the same code path) and wraps
its workload, its config, its epoch curves and its provenance into a
`backend.sim.recorded.RecordedWorkload`. The provenance says what made the figures: the git
commit of this checkout (and whether it had uncommitted changes), the versions of orrery, torch
and numpy, the CPU and the intra-op threads the training ran with, and when.

Both `scripts/record_workload.py` (one training) and `scripts/record_papers.py` (every training
of the papers' miniatures, the recorded bundle) write through here, so a bundle and a single
example share one format.
"""

from __future__ import annotations

import importlib.metadata
import platform
import subprocess
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from backend.sim.recorded import RecordedWorkload
from backend.specs.recipes import resolve_recipe
from backend.specs.training import TrainingConfig
from backend.training.engine import run_training
from backend.training.results import TrainingResult

REPOSITORY = Path(__file__).resolve().parents[2]
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
    """Where, when and with what a training ran (the recorded workload's `provenance`)."""
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


def record_training(
    config: TrainingConfig, techniques: list[BaseModel], **run_options: Any
) -> RecordedWorkload:
    """Train (the recipe resolved) and return the recorded workload; `run_options` go to
    `run_training` (data folders, progress)."""
    config = resolve_recipe(config)
    result = run_training(config, techniques, **run_options)
    return RecordedWorkload(
        workload=result.workload,
        training={
            "config": config.model_dump(mode="json"),
            "techniques": [t.model_dump(mode="json") for t in techniques],
        },
        epochs=[asdict(epoch) for epoch in result.epochs],
        provenance=provenance(result),
    )
