"""The CLI against a real `orrery serve` (embedded defaults) and a real worker: `orrery wait`
re-attaches to a submitted experiment and, piped, prints progress as it happens; `orrery
summary` prints the seed-averaged figures with their intervals; `orrery show` prints readable
sections, no JSON; every number is written by the shared formatter, the same in every command."""

from __future__ import annotations

import math
import re
import select
import subprocess
import time
from pathlib import Path

import httpx
import pytest
import yaml

from backend.numbers import format_estimate, format_value
from tests.conftest import ORRERY_BIN, embedded_server, start_worker, stop_process
from tests.pipeline.conftest import TINY_TRAINING
from tests.pipeline.test_end_to_end import orrery
from tests.pipeline.test_run_groups import t_quantile_by_integration

pytestmark = pytest.mark.slow  # starts `orrery serve` and a worker

SPEC = {
    "name": "cli summary",
    "training": TINY_TRAINING,
    "techniques": [{"name": "sparsetrain"}],
    "accelerators": ["edge"],
    "seeds": [0, 1, 2],
}


def _first_line(process: subprocess.Popen, timeout: float) -> str:
    ready, _, _ = select.select([process.stdout], [], [], timeout)
    assert ready, f"nothing printed within {timeout}s"
    assert process.stdout is not None
    return process.stdout.readline()


def _interval(values: list[float], unit: str) -> str:
    """Mean ± the 95% Student-t half-width, the slow way (the t quantile by integration)."""
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = t_quantile_by_integration(0.975, n - 1) * sd / math.sqrt(n)
    return format_estimate(mean, half, unit)


def test_wait_summary_and_show_read_like_the_dashboard(tmp_path: Path) -> None:
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(SPEC))
    with embedded_server(tmp_path / "data", "--no-with-worker") as server:
        env = server.env
        submitted = orrery("submit", str(spec_file), env=env)
        assert submitted.returncode == 0, submitted.stdout + submitted.stderr
        # Re-attach, piped: with no worker yet every run is queued, and the wait says so at
        # once instead of staying silent until the end.
        waiting = subprocess.Popen(
            [ORRERY_BIN, "wait", "1"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            assert "experiment 1 'cli summary'" in _first_line(waiting, 30)
            assert _first_line(waiting, 30).strip() == "experiment 1: 0 of 6 done, 6 queued"
            assert waiting.poll() is None
            worker = start_worker(env, tmp_path)
            try:
                rest, _ = waiting.communicate(timeout=400)
            finally:
                log = stop_process(worker)
        finally:
            if waiting.poll() is None:
                waiting.kill()
                waiting.wait()
        assert waiting.returncode == 0, rest + log[-3000:]
        lines = rest.splitlines()
        for run_id in range(1, 7):
            assert any(
                line.startswith(f"run {run_id} ") and line.endswith(": done") for line in lines
            )
        assert "experiment 1: 6 of 6 done" in rest and "experiment 1 done" in rest
        assert lines.index("experiment 1: 6 of 6 done") < lines.index(
            next(line for line in lines if line.startswith("experiment 1 done"))
        )

        runs = httpx.get(f"{server.url}/api/v1/runs", params={"sort": "id"}).json()["items"]
        summary = orrery("summary", "1", env=env)
        show = orrery("show", "2", env=env)
        listing = orrery("runs", env=env)
        compared = orrery("compare", "2", env=env)
        missing = orrery("summary", "99", env=env)
        # On a terminal: a bar per run with its per cent and time left
        bars = orrery("wait", "1", env={**env, "TTY_COMPATIBLE": "1"})

    assert summary.returncode == 0, summary.stdout + summary.stderr
    # A design point's lines of every table the figures are spread over.
    rows: dict[str, str] = {}
    for line in summary.stdout.splitlines():
        if "│" in line:
            key = line.split("│")[1].strip()
            rows[key] = rows.get(key, "") + line
    technique = [r for r in runs if r["technique"] == "sparsetrain"]
    baseline = {r["seed"]: r for r in runs if r["is_baseline"]}
    assert len(technique) == 3 and len(baseline) == 3
    for figure, unit in (
        ("speedup", "×"),
        ("energy_pj", "pJ"),
        ("seconds", "s"),
        ("accuracy", "%"),
    ):
        assert _interval([r[figure] for r in technique], unit) in rows["sparsetrain"], figure
    deltas = [r["accuracy"] - baseline[r["seed"]]["accuracy"] for r in technique]
    if len(set(deltas)) > 1:
        assert _interval(deltas, "pt") in rows["sparsetrain"]
    assert "3 of 3" in rows["sparsetrain"] and "3 of 3" in rows["baseline"]
    assert missing.returncode != 0 and "Traceback" not in missing.stdout + missing.stderr
    assert bars.returncode == 0, bars.stdout + bars.stderr
    frames = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", bars.stdout).splitlines()  # ANSI codes out
    for run_id in range(1, 7):
        assert any(
            line.startswith(f"run {run_id} ") and "100%" in line and line.rstrip().endswith("done")
            for line in frames
        ), frames

    run = next(r for r in runs if r["id"] == 2)
    text = show.stdout
    assert show.returncode == 0, text + show.stderr
    assert "{" not in text and "}" not in text  # sections, not JSON
    for section in ("run 2: sparsetrain", "training", "technique sparsetrain", "accelerator edge",
                    "trained with", "per layer and pass", "per epoch"):  # fmt: skip
        assert section in text, section
    assert "prune_rate" in text and "energy.dram" in text and "batch_size" in text
    assert format_value(run["energy_pj"], "pJ") in text
    assert format_value(run["speedup"], "×") in text
    # one speedup, written the same by every command
    speedup = format_value(run["speedup"], "×")
    listed = next(
        line
        for line in listing.stdout.splitlines()
        if "│" in line and line.split("│")[1].strip() == "2"
    )
    assert speedup in listed
    assert speedup in next(line for line in compared.stdout.splitlines() if "sparsetrain" in line)


def test_wait_on_a_finished_or_unknown_experiment(tmp_path: Path) -> None:
    """A finished experiment is reported at once; an unknown one is an error, no traceback."""
    with embedded_server(tmp_path / "data", "--no-with-worker") as server:
        unknown = orrery("wait", "5", env=server.env)
        spec_file = tmp_path / "spec.yaml"
        spec_file.write_text(yaml.safe_dump({**SPEC, "seeds": [0]}))
        orrery("submit", str(spec_file), env=server.env)
        orrery("cancel", "1", env=server.env)
        started = time.monotonic()
        cancelled = orrery("wait", "1", env=server.env)
    assert unknown.returncode == 1 and "error:" in unknown.stdout
    assert "Traceback" not in unknown.stdout + unknown.stderr
    assert cancelled.returncode == 1 and "experiment 1 cancelled" in cancelled.stdout
    assert "experiment 1: 0 of 2 done, 2 cancelled" in cancelled.stdout
    assert time.monotonic() - started < 30
