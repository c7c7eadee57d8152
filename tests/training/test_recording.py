"""A training recorded by backend.training.recording reads back as the training it was."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import yaml

from backend.sim.recorded import read_recorded, write_recorded
from backend.specs.techniques import parse_techniques
from backend.specs.training import TrainingConfig
from backend.training import run_training
from backend.training.recording import REPOSITORY, record_training

TINY = TrainingConfig(
    model="mlp", dataset="digits", epochs=2, batch_size=64, seed=3, train_samples=256
)


def test_a_recorded_training_is_the_training_it_ran(tmp_path: Path) -> None:
    techniques = parse_techniques([{"name": "baseline"}])
    recorded = record_training(TINY, techniques)
    path = tmp_path / "tiny.workload.json.xz"
    write_recorded(recorded, path)
    back = read_recorded(path)

    assert back.training["config"]["seed"] == 3
    assert back.training["config"]["epochs"] == 2
    assert back.training["techniques"] == [{"name": "baseline"}]
    assert len(back.epochs) == 2
    assert set(back.provenance) == {"commit", "dirty", "recorded_at", "packages", "machine"}
    assert set(back.provenance["packages"]) == {"orrery", "torch", "numpy"}
    assert back.provenance["machine"]["threads"] >= 1

    # The same config and seed trained again give the same workload (one thread, same CPU).
    again = run_training(TINY, techniques).workload
    shape = lambda ops: [(op.layer, op.pass_, op.m, op.k, op.n, op.executions) for op in ops]  # noqa: E731
    assert shape(back.workload.ops) == shape(again.ops)
    assert np.allclose(
        [op.density_a for op in back.workload.ops], [op.density_a for op in again.ops]
    )


def test_record_papers_writes_the_spec_and_one_file_per_training(tmp_path: Path) -> None:
    """The bundle script's layout, on a spec small enough for a test (2 trainings)."""
    spec = {
        "name": "tiny",
        "training": TINY.model_dump(mode="json", exclude_none=True) | {"epochs": 1},
        "techniques": [{"name": "sparsetrain"}],
        "accelerators": ["edge"],
        "seeds": [0],
    }
    spec_file = tmp_path / "tiny.yaml"
    spec_file.write_text(yaml.safe_dump(spec))
    out = tmp_path / "bundle"
    code = (
        "import sys; from pathlib import Path; sys.path.insert(0, 'scripts');"
        "import record_papers as r;"
        f"r.record_spec(Path({str(spec_file)!r}), Path({str(out)!r}), force=False)"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=REPOSITORY, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        "baseline-seed0.workload.json.xz",
        "sparsetrain-seed0.workload.json.xz",
        "spec.json",
    ]
    assert json.loads((out / "spec.json").read_text())["name"] == "tiny"
    sparse = read_recorded(out / "sparsetrain-seed0.workload.json.xz")
    assert sparse.training["techniques"][0]["name"] == "sparsetrain"
    # A second run finds both recorded and trains nothing.
    again = subprocess.run(
        [sys.executable, "-c", code], cwd=REPOSITORY, capture_output=True, text=True
    )
    assert again.stdout.count("recorded already") == 2, again.stdout
