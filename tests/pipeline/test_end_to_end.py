"""End to end with real services: the API, PostgreSQL, Redis and a Celery worker process;
and the same flow on the embedded defaults (SQLite, no Redis) through `orrery serve`."""

import json
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient

from backend.settings import Settings
from tests.conftest import ORRERY_BIN, embedded_server, start_worker, stop_process
from tests.pipeline.conftest import TINY_TRAINING, worker_env

pytestmark = pytest.mark.slow  # starts `orrery serve` and workers

SWEEP = {
    "name": "end to end",
    "training": TINY_TRAINING,
    "techniques": [
        {"name": "sparsetrain", "prune_rate": 0.9},
        {"name": "mercury", "signature_bits": 12},
    ],
    "accelerators": ["edge"],
    "sweep": {"parameters": {"accelerator.rows": {"values": [8, 16]}}},
}


def wait_for_runs(api: TestClient, experiment_id: int, timeout: float = 300) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = api.get(
            "/api/v1/runs", params={"experiment_id": experiment_id, "limit": 100}
        ).json()["items"]
        if runs and all(r["status"] in ("done", "failed", "cancelled") for r in runs):
            return runs
        time.sleep(1)
    raise AssertionError(f"runs still unfinished after {timeout}s: {[r['status'] for r in runs]}")


def test_sweep_through_api_redis_and_a_real_worker(
    api: TestClient, pg_settings: Settings, redis_db_url: str, tmp_path: Path
) -> None:
    worker = start_worker(worker_env(pg_settings, redis_db_url, tmp_path), cwd=tmp_path)
    try:
        experiment = api.post("/api/v1/experiments", json=SWEEP).json()
        assert experiment["total_runs"] == 6 and experiment["trainings"] == 3
        runs = wait_for_runs(api, experiment["id"])
    finally:
        log = stop_process(worker)
    assert [r["status"] for r in runs] == ["done"] * 6, log[-3000:]
    for run in runs:
        assert run["total_cycles"] > 0 and run["energy_pj"] > 0
        assert 0 <= run["accuracy"] <= 1
        assert run["speedup"] is not None
        detail = api.get(f"/api/v1/runs/{run['id']}").json()
        assert {layer["training_pass"] for layer in detail["layers"]} >= {"fwd", "bwd_weight"}
        assert [e["epoch"] for e in detail["epochs"]] == [1]
    rows = {(r["technique"], r["params"]["accelerator.rows"]) for r in runs}
    assert rows == {(t, n) for t in ("baseline", "sparsetrain", "mercury") for n in (8, 16)}
    # Smaller arrays take more cycles for the same training.
    cycles = {(r["technique"], r["params"]["accelerator.rows"]): r["total_cycles"] for r in runs}
    assert cycles[("baseline", 8)] > cycles[("baseline", 16)]
    final = api.get(f"/api/v1/experiments/{experiment['id']}").json()
    assert final["status"] == "done" and final["finished_at"]


def orrery(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    """Run the CLI as a user would, with a wide terminal so rich does not wrap its tables."""
    return subprocess.run(
        [ORRERY_BIN, *args],
        env={**env, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_cli_submit_and_wait_on_embedded_defaults(tmp_path: Path) -> None:
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(
        yaml.safe_dump({**SWEEP, "sweep": None, "techniques": [{"name": "sparsetrain"}]})
    )
    export = tmp_path / "runs.csv"
    with embedded_server(tmp_path / "data") as server:
        url, env = server.url, server.env
        result = orrery("submit", str(spec_file), "--wait", "--url", url, env=env, timeout=300)
        # No --url: the CLI finds the server where the same settings (ORRERY_API_PORT) put it.
        listing = orrery("runs", env=env)
        exported = orrery("export", "-o", str(export), env=env)
        listed = orrery("runs", "--json", env=env)
        shown = orrery("show", "2", env=env)
        shown_json = orrery("show", "2", "--json", env=env)
        compared = orrery("compare", "1", "2", "--json", env=env)
        compared_table = orrery("compare", "1", "2", env=env)
        # Piped with no COLUMNS, as `orrery runs | less` is: nothing is cut to 80 columns.
        piped = subprocess.run(
            [ORRERY_BIN, "show", "2"],
            env={k: v for k, v in env.items() if k != "COLUMNS"},
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "experiment 1 done" in result.stdout
    assert "2 of 2 runs" in listing.stdout
    assert "sparsetrain" in listing.stdout and "baseline" in listing.stdout
    assert exported.returncode == 0
    assert len(export.read_text().strip().splitlines()) == 3  # header + 2 runs

    page = json.loads(listed.stdout)
    assert page["total"] == 2 and {r["technique"] for r in page["items"]} == {
        "baseline",
        "sparsetrain",
    }
    run = json.loads(shown_json.stdout)
    assert run["id"] == 2 and run["layers"] and run["epochs"]
    assert run["baseline_run_id"] == 1 and run["baseline_hardware"] == "dense"
    for text in (shown.stdout, piped.stdout):
        assert "run 2: sparsetrain" in text and "per layer and pass" in text
        for layer in run["layers"]:
            assert layer["layer"] in text
        assert "…" not in text  # rich marks a cut cell with an ellipsis
        assert "trained with" in text and run["training_environment"]["cpu_capability"] in text
    rows = {row["run_id"]: row for row in json.loads(compared.stdout)}
    assert rows[1]["speedup"] == 1.0 and rows[1]["accuracy_delta"] == 0.0
    assert rows[2]["baseline_run_id"] == 1
    assert rows[2]["speedup"] == run["speedup"]
    assert "sparsetrain" in compared_table.stdout and "Δ accuracy" in compared_table.stdout


def test_cli_reports_bad_specs_without_a_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        yaml.safe_dump({"name": "x", "techniques": [{"name": "mercury", "signature_bits": 0}]})
    )
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump({**SWEEP, "sweep": None}))
    with embedded_server(tmp_path / "data", "--no-with-worker") as server:
        refused = orrery("submit", str(bad), "--url", server.url, env=server.env)
        # No worker: the runs stay queued, so cancelling one run, then the rest, is seen at once.
        assert orrery("submit", str(good), env=server.env).returncode == 0
        one = orrery("cancel", "--run", "2", "--json", env=server.env)
        rest = orrery("cancel", "1", env=server.env)
        neither = orrery("cancel", env=server.env)
        listed = json.loads(orrery("runs", "--json", "--sort", "id", env=server.env).stdout)
        retried = orrery("retry", "2", "--json", env=server.env)
        retried_again = orrery("retry", "2", env=server.env)
        retried_unknown = orrery("retry", "999", env=server.env)
        shown = orrery("show", "2", env=server.env)
    unreachable = orrery("runs", "--url", "http://127.0.0.1:1", env=server.env)
    latin1 = tmp_path / "latin1.yaml"
    latin1.write_bytes("name: expérience\ntechniques: [{name: mercury}]\n".encode("latin-1"))
    undecodable = orrery("submit", str(latin1), "--url", "http://127.0.0.1:1", env=server.env)
    assert undecodable.returncode == 1
    assert "not UTF-8 text (byte 0xe9 at offset 9)" in undecodable.stdout
    assert json.loads(one.stdout)["status"] == "cancelled", one.stdout + one.stderr
    assert rest.returncode == 0 and "experiment 1: cancelled" in rest.stdout
    assert [r["status"] for r in listed["items"]] == ["cancelled"] * 3
    assert neither.returncode == 1 and "give an experiment id or --run RUN" in neither.stdout
    assert json.loads(retried.stdout)["status"] == "queued", retried.stdout + retried.stderr
    assert json.loads(retried.stdout)["attempt"] == 2
    assert retried_again.returncode == 1
    assert "run 2 is queued (attempt 2): only a failed or cancelled run" in retried_again.stdout
    assert retried_unknown.returncode == 1 and "run 999 not found" in retried_unknown.stdout
    assert "2; attempt 1 cancelled" in shown.stdout
    assert refused.returncode == 2
    assert "signature_bits" in refused.stdout and "greater than or equal to 1" in refused.stdout
    assert unreachable.returncode == 1 and "cannot reach the server" in unreachable.stdout
    for output in (
        refused.stdout + refused.stderr,
        unreachable.stdout + unreachable.stderr,
        undecodable.stdout + undecodable.stderr,
        neither.stdout + neither.stderr,
        retried_again.stdout + retried_again.stderr,
        retried_unknown.stdout + retried_unknown.stderr,
    ):
        assert "Traceback" not in output
