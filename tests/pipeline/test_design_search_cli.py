"""`orrery search` and `orrery front` as a user runs them, on the embedded defaults (SQLite, the
worker `orrery serve` starts)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
import yaml

from backend.numbers import format_value
from tests.conftest import embedded_server
from tests.pipeline.test_design_search import SEARCH, SPEC
from tests.pipeline.test_end_to_end import orrery

pytestmark = pytest.mark.slow  # starts `orrery serve`


def test_cli_search_then_front(tmp_path: Path) -> None:
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(SPEC))
    search_file = tmp_path / "search.yaml"
    search_file.write_text(yaml.safe_dump({**SEARCH, "seed": 8, "objectives": ["time", "area"]}))
    plain_file = tmp_path / "plain.yaml"
    plain_file.write_text(yaml.safe_dump({**SPEC, "search": None}))
    with embedded_server(tmp_path / "data") as server:
        env = server.env
        searched = orrery("search", str(spec_file), env=env, timeout=400)
        front_json = orrery("front", "1", "--json", env=env)
        front_table = orrery("front", "1", env=env)
        served = httpx.get(f"{server.url}/api/v1/searches/1/fronts", timeout=30).json()
        on_existing = orrery("search", str(search_file), "--experiment", "1", env=env, timeout=400)
        second = orrery("front", "1", "--json", env=env)
        first_again = orrery("front", "1", "--search", "1", "--json", env=env)
        cancelled = orrery("cancel", "--search", "1", env=env)
        no_such = orrery("front", "99", env=env)
        no_search = orrery("search", str(plain_file), env=env)
        bad = orrery("search", str(search_file), "--experiment", "99", env=env)
    assert searched.returncode == 0, searched.stdout + searched.stderr + server.output[-3000:]
    assert "search 1 of experiment 1" in searched.stdout
    assert "4/4 chunks, 100 designs, done" in searched.stdout
    assert json.loads(front_json.stdout) == served
    assert set(served["fronts"]) == {"baseline", "sparsetrain"}
    for technique, points in served["fronts"].items():
        for point in points:
            row = next(
                line
                for line in front_table.stdout.splitlines()
                if f" {technique} " in line and f" {point['index']} " in line
            )
            assert format_value(point["time_s"], "s") in row
            assert format_value(point["area_mm2"], "mm²") in row
            assert format_value(point["energy_j"] * 1e12, "pJ") in row
    assert "dram_bandwidth" in front_table.stdout and "energy" in front_table.stdout

    assert on_existing.returncode == 0, on_existing.stdout + on_existing.stderr
    assert "search 2 of experiment 1" in on_existing.stdout
    latest = json.loads(second.stdout)
    assert latest["search_id"] == 2 and latest["objectives"] == ["time", "area"]
    assert json.loads(first_again.stdout) == served
    assert cancelled.returncode == 0 and "search 1: done" in cancelled.stdout

    assert no_such.returncode == 1 and "experiment 99 not found" in no_such.stdout
    assert no_search.returncode == 1 and "has no 'search:' section" in no_search.stdout
    assert bad.returncode == 1 and "experiment 99 not found" in bad.stdout
    for result in (searched, on_existing, no_such, no_search, bad, cancelled):
        assert "Traceback" not in result.stdout + result.stderr
