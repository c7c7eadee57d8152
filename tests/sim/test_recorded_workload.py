"""The recorded workload format (backend/sim/recorded.py) and the example that ships in it."""

from __future__ import annotations

import json
import lzma
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from backend.sim import Workload, simulate
from backend.sim.recorded import (
    FORMAT,
    VERSION,
    NotAWorkload,
    RecordedWorkload,
    read_recorded,
    write_recorded,
)
from backend.sim.workload import COUNT_FIELDS
from backend.specs.accelerator import PRESETS
from backend.specs.techniques import parse_techniques
from backend.specs.training import TrainingConfig

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "workloads"
SHIPPED = EXAMPLES / "lenet5-digits-baseline.workload.json.xz"


def _run(*args: str | Path, code: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "FORCE_COLOR")}
    env["PYTHONPATH"] = str(ROOT)
    command = ["-c", code] if code is not None else ["-m", "backend.sim", *map(str, args)]
    return subprocess.run(
        [sys.executable, *command], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120
    )


def test_every_shipped_workload_is_a_valid_record_of_its_training() -> None:
    shipped = sorted(EXAMPLES.glob("*.workload.json.xz"))
    assert SHIPPED in shipped
    for path in shipped:
        assert path.stat().st_size < 200 * 1024
        record = read_recorded(path)
        config = TrainingConfig.model_validate(record.training["config"])
        techniques = parse_techniques(record.training["techniques"])
        assert (config.model, config.dataset) == (record.workload.model, record.workload.dataset)
        assert record.workload.technique == "+".join(t.name for t in techniques)
        assert config.epochs == len(record.epochs)
        assert [e["epoch"] for e in record.epochs] == list(range(1, len(record.epochs) + 1))
        assert record.epochs[-1]["test_accuracy"] > 0.9  # LeNet-5 learned the digits
        assert record.workload.batch_size == config.batch_size
        provenance = record.provenance
        assert set(provenance["packages"]) == {"orrery", "torch", "numpy"}
        assert {"cpu", "threads", "cpu_capability", "architecture"} <= set(provenance["machine"])
        assert len(provenance["commit"]) == 40 and provenance["dirty"] is False


def test_the_shipped_workload_simulates_as_its_in_memory_round_trip() -> None:
    """As a training stores it (Workload.to_dict, count arrays packed) and reads it back."""
    workload = read_recorded(SHIPPED).workload
    round_trip = Workload.from_dict(json.loads(json.dumps(workload.to_dict())))
    for accelerator in ("edge", "sparsetrain-like"):
        figures = simulate(workload, PRESETS[accelerator]).to_dict()
        assert figures == simulate(round_trip, PRESETS[accelerator]).to_dict()
        assert figures["totals"]["total_cycles"] > 0
    counted = [op for op in workload.ops if op.a_row_nnz is not None]
    assert counted, "the recorded workload keeps its per-lane counts"


def test_the_program_simulates_the_shipped_file_without_torch() -> None:
    out = _run(SHIPPED, "edge", "--json")
    assert out.returncode == 0, out.stderr
    expected = simulate(read_recorded(SHIPPED).workload, PRESETS["edge"]).to_dict()
    assert json.loads(out.stdout) == json.loads(json.dumps(expected))
    no_torch = _run(
        code="import sys\n"
        "from backend.sim.__main__ import main\n"
        f"assert main([{str(SHIPPED)!r}, 'edge']) == 0\n"
        "assert 'torch' not in sys.modules, 'reading a recorded workload imported torch'\n"
    )
    assert no_torch.returncode == 0, no_torch.stderr


def test_a_record_round_trips_through_its_file(tmp_path: Path) -> None:
    record = read_recorded(SHIPPED)
    copy = tmp_path / "copy.workload.json.xz"
    write_recorded(record, copy)
    # The same JSON text (the compressed bytes may differ between xz library versions).
    assert lzma.decompress(copy.read_bytes()) == lzma.decompress(SHIPPED.read_bytes())
    again = read_recorded(copy)
    assert again.to_dict() == record.to_dict()
    for op, op_again in zip(record.workload.ops, again.workload.ops, strict=True):
        for name in COUNT_FIELDS:
            counts = getattr(op, name)
            if counts is not None:
                assert np.array_equal(counts, getattr(op_again, name))
    inside = json.loads(lzma.decompress(copy.read_bytes()))
    assert (inside["format"], inside["version"]) == (FORMAT, VERSION)
    assert "zlib_b64" not in json.dumps(inside)  # arrays are plain integers under the xz


def _recorded_with(tmp_path: Path, **changes: object) -> Path:
    data = {**read_recorded(SHIPPED).to_dict(), **changes}
    path = tmp_path / "changed.workload.json.xz"
    path.write_bytes(lzma.compress(json.dumps(data).encode()))
    return path


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda tmp: _write(tmp / "latin.json", b'{"model": "\xe9t\xe9"}'), "not UTF-8 text"),
        (lambda tmp: _write(tmp / "noise.bin", bytes(range(256)) * 4), "not valid JSON"),
        (lambda tmp: _write(tmp / "cut.xz", SHIPPED.read_bytes()[:2000]), "a broken xz stream"),
        (
            lambda tmp: _write(tmp / "list.json.xz", lzma.compress(b"[1, 2, 3]")),
            "not a stored workload",
        ),
        (lambda tmp: _recorded_with(tmp, version=2), "recorded workload version 2"),
        (lambda tmp: _recorded_with(tmp, workload={"model": "x"}), "missing field 'dataset'"),
    ],
)
def test_a_file_that_is_not_a_workload_is_named_in_one_line(
    tmp_path: Path, make, message: str
) -> None:
    path = make(tmp_path)
    out = _run(path, "edge")
    assert out.returncode == 2
    assert out.stdout == "" and "Traceback" not in out.stderr
    assert out.stderr.count("\n") == 1 and str(path) in out.stderr and message in out.stderr


def test_a_record_without_a_section_is_refused() -> None:
    data = read_recorded(SHIPPED).to_dict()
    del data["provenance"]
    with pytest.raises(NotAWorkload, match="without provenance"):
        RecordedWorkload.from_dict(data)


def _write(path: Path, content: bytes) -> Path:
    path.write_bytes(content)
    return path
