"""Seeds as statistics: the group key, the Student-t intervals and GET /runs/groups (PostgreSQL;
the database's grouping also on SQLite, against the Python reference)."""

from __future__ import annotations

import csv
import io
import math
import random
import statistics

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update

from backend.analysis.groups import estimate, group_key, run_group_key
from backend.db.models import Run
from backend.db.session import session_scope
from backend.settings import Settings
from tests.pipeline.conftest import TINY_TRAINING


def t_quantile_by_integration(p: float, dof: int) -> float:
    """The Student-t quantile found the slow way: Simpson's rule on the density from 0 to x,
    bisection on x (independent of any statistics library)."""
    norm = math.gamma((dof + 1) / 2) / (math.sqrt(dof * math.pi) * math.gamma(dof / 2))

    def density(x: float) -> float:
        return norm * (1 + x * x / dof) ** (-(dof + 1) / 2)

    def cdf(x: float, steps: int = 4000) -> float:
        h = x / steps
        total = density(0) + density(x)
        total += sum((4 if i % 2 else 2) * density(i * h) for i in range(1, steps))
        return 0.5 + total * h / 3

    low, high = 0.0, 200.0
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if cdf(middle) < p else (low, middle)
    return (low + high) / 2


@pytest.mark.parametrize(
    "values",
    [[0.91, 0.93, 0.92], [1.5, 1.7], [0.2, 0.25, 0.3, 0.27, 0.22, 0.31], [2.0, 2.0, 2.0]],
)
def test_interval_matches_a_brute_force_t_quantile(values: list[float]) -> None:
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = t_quantile_by_integration(0.975, n - 1) * sd / math.sqrt(n)
    found = estimate(values)
    assert found is not None and found.n == n
    assert found.mean == pytest.approx(mean)
    assert found.sd == pytest.approx(sd)
    assert found.ci_low == pytest.approx(mean - half, abs=1e-6)
    assert found.ci_high == pytest.approx(mean + half, abs=1e-6)


def test_known_t_quantiles_and_small_groups() -> None:
    # Table values: t(0.975, 1) = 12.706, t(0.975, 2) = 4.303, t(0.975, 9) = 2.262.
    for dof, table in ((1, 12.706), (2, 4.303), (9, 2.262)):
        assert t_quantile_by_integration(0.975, dof) == pytest.approx(table, abs=1e-3)
        values = [float(i % 2) for i in range(dof + 1)]
        found = estimate(values)
        assert found is not None and found.ci_high is not None
        half = found.ci_high - found.mean
        assert half == pytest.approx(table * statistics.stdev(values) / math.sqrt(dof + 1), 1e-3)
    single = estimate([0.5])
    assert single is not None and (single.mean, single.ci_low, single.sd) == (0.5, None, None)
    assert estimate([]) is None


def test_group_key_ignores_only_the_seed() -> None:
    config = {"model": "mlp", "dataset": "digits", "seed": 0, "learning_rate": 0.05}
    techniques = [{"name": "mercury", "signature_bits": 16}]
    accelerator = {"name": "edge", "rows": 8}
    key = group_key(config, techniques, accelerator)
    assert group_key({**config, "seed": 7}, techniques, accelerator) == key
    assert group_key({**config, "learning_rate": 0.1}, techniques, accelerator) != key
    assert group_key(config, [{"name": "mercury", "signature_bits": 24}], accelerator) != key
    assert group_key(config, techniques, {**accelerator, "rows": 16}) != key
    assert group_key(config, techniques, accelerator, "dense") != key
    assert group_key(config, techniques, accelerator, "dense") != group_key(
        config, techniques, accelerator, "same"
    )


SPEC = {
    "name": "seeds",
    "training": TINY_TRAINING,
    "techniques": [{"name": "mercury"}],
    "accelerators": ["edge"],
    "seeds": [0, 1, 2],
    "sweep": {"parameters": {"mercury.signature_bits": {"values": [8, 16]}}},
}


def _finish_with_metrics(settings: Settings, experiment_id: int) -> dict[int, dict]:
    """Give every run distinct accuracy, cycles and energy, as a worker would store them."""
    stored: dict[int, dict] = {}
    with session_scope(settings.effective_database_url) as db:
        runs = list(db.scalars(select(Run).where(Run.experiment_id == experiment_id)))
        baselines = {run.id: run for run in runs if run.is_baseline}
        for run in runs:
            bits = run.params.get("mercury.signature_bits", 0)
            values = {
                "status": "done",
                "accuracy": 0.90 + 0.013 * run.seed**2 - 0.002 * bits,
                "total_cycles": 1_000_000 - 20_000 * bits - 3_000 * run.seed,
                "energy_pj": 5e6 - 1e5 * bits + 7e3 * run.seed**2,
                "seconds": (1_000_000 - 20_000 * bits - 3_000 * run.seed) / 200e6,
                "area_mm2": 8.0 + 0.01 * bits,
                "did_not_learn": bits == 16 and run.seed == 2,
            }
            db.execute(update(Run).where(Run.id == run.id).values(**values))
            stored[run.id] = {**values, "seed": run.seed, "bits": bits, "base": run.baseline_run_id}
        for run_id, values in stored.items():
            base = stored[values["base"]] if values["base"] in baselines else values
            values["speedup"] = base["total_cycles"] / values["total_cycles"]
            values["energy_ratio"] = values["energy_pj"] / base["energy_pj"]
            values["delta"] = values["accuracy"] - base["accuracy"]
            values["energy_delay"] = values["energy_pj"] * values["seconds"]
            db.execute(
                update(Run)
                .where(Run.id == run_id)
                .values(speedup=values["speedup"], energy_ratio=values["energy_ratio"])
            )
    return stored


def test_groups_pool_seeds_of_real_runs(api: TestClient, pg_settings: Settings) -> None:
    experiment = api.post("/api/v1/experiments", json=SPEC).json()
    stored = _finish_with_metrics(pg_settings, experiment["id"])
    groups = api.get("/api/v1/runs/groups", params={"experiment_id": experiment["id"]}).json()
    assert len(groups) == 3  # the baseline and two signature lengths, three seeds each
    by_bits = {g["params"].get("mercury.signature_bits", 0): g for g in groups}
    assert set(by_bits) == {0, 8, 16}
    for bits, group in by_bits.items():
        members = {i: v for i, v in stored.items() if v["bits"] == bits}
        assert sorted(group["run_ids"]) == sorted(members)
        assert sorted(group["seeds"]) == [0, 1, 2]
        assert group["done"] == 3 and group["is_baseline"] == (bits == 0)
        assert group["did_not_learn"] == (1 if bits == 16 else 0)
        for field, name in (
            ("accuracy", "accuracy"),
            ("accuracy_delta", "delta"),
            ("speedup", "speedup"),
            ("energy_ratio", "energy_ratio"),
            ("seconds", "seconds"),
            ("energy_pj", "energy_pj"),
            ("energy_delay", "energy_delay"),
            ("area_mm2", "area_mm2"),
        ):
            values = [v[name] for v in members.values()]
            mean = sum(values) / 3
            sd = math.sqrt(sum((v - mean) ** 2 for v in values) / 2)
            half = 4.302652729911275 * sd / math.sqrt(3)  # t(0.975, 2)
            got = group[field]
            assert got["n"] == 3 and got["mean"] == pytest.approx(mean)
            if sd:
                assert got["ci_low"] == pytest.approx(mean - half)
                assert got["ci_high"] == pytest.approx(mean + half)
    # The baseline is its own reference: no delta, speedup 1, in every seed.
    assert by_bits[0]["accuracy_delta"]["mean"] == 0 and by_bits[0]["speedup"]["mean"] == 1

    # The export labels each run with the same key.
    text = api.get(
        "/api/v1/runs/export", params={"experiment_id": experiment["id"], "format": "csv"}
    ).text
    exported = {int(row["id"]): row["group"] for row in csv.DictReader(io.StringIO(text))}
    for group in groups:
        assert {exported[i] for i in group["run_ids"]} == {group["key"]}


def test_groups_follow_the_run_filters(api: TestClient, pg_settings: Settings) -> None:
    experiment = api.post("/api/v1/experiments", json=SPEC).json()
    _finish_with_metrics(pg_settings, experiment["id"])
    only = api.get(
        "/api/v1/runs/groups",
        params={"experiment_id": experiment["id"], "technique": "mercury"},
    ).json()
    assert {g["technique"] for g in only} == {"mercury"} and len(only) == 2
    assert api.get("/api/v1/runs/groups", params={"sort": "-bogus"}).status_code == 422


def test_stored_group_keys_are_the_keys_of_the_configs(
    api: TestClient, pg_settings: Settings
) -> None:
    """The key stored at expansion is `group_key` of the run's stored configs, for technique
    runs and both kinds of baseline."""
    spec = {**SPEC, "baseline_hardware": "same", "accelerators": ["edge", "mercury-like"]}
    experiment = api.post("/api/v1/experiments", json=spec).json()
    with session_scope(pg_settings.effective_database_url) as db:
        runs = list(db.scalars(select(Run).where(Run.experiment_id == experiment["id"])))
        assert len(runs) > 12
        assert all(run.group_key == run_group_key(run) for run in runs)
        assert len({run.group_key for run in runs}) == len(runs) // 3  # three seeds each


def _reference_groups(runs: list[Run]) -> list[dict]:
    """/runs/groups computed the slow way: every run's key from its configs, grouped in Python,
    each metric through `estimate` (the reference the database's GROUP BY must match)."""
    by_id = {run.id: run for run in runs}
    members: dict[str, list[Run]] = {}
    for run in sorted(runs, key=lambda run: run.id):
        members.setdefault(run_group_key(run), []).append(run)
    out = []
    for key, group in members.items():
        done = [run for run in group if run.status == "done"]
        deltas, baseline_stalls = [], []
        for run in done:
            reference = run if run.is_baseline else by_id.get(run.baseline_run_id)
            base = reference.accuracy if reference is not None else None
            if run.accuracy is not None and base is not None:
                deltas.append(run.accuracy - base)
            if reference is not None:
                baseline_stalls.append(reference.stall_share)
        with_iso = [run for run in done if run.iso_area_speedup is not None]

        def figures(values: list[float | None]) -> dict | None:
            found = estimate([v for v in values if v is not None])
            return None if found is None else found.__dict__

        out.append(
            {
                "key": key,
                "run_ids": [run.id for run in group],
                "seeds": [run.seed for run in group],
                "done": len(done),
                "did_not_learn": sum(1 for run in group if run.did_not_learn),
                "accuracy": figures([run.accuracy for run in done]),
                "accuracy_delta": figures(deltas),
                "speedup": figures([run.speedup for run in done]),
                "energy_ratio": figures([run.energy_ratio for run in done]),
                "stall_share": figures([run.stall_share for run in done]),
                "baseline_stall_share": figures(baseline_stalls),
                "iso_area_speedup": figures([run.iso_area_speedup for run in done]),
                "iso_area": with_iso[0].iso_area if with_iso else None,
            }
        )
    return out


def iso_area(rng: random.Random) -> dict:
    """Iso-area designs as the worker stores them (backend.sim.iso_area.IsoArea.to_dict())."""

    def design() -> dict:
        side = rng.choice([8, 14, 16, 18])
        return {
            "rows": side, "cols": rng.choice([8, 16, 20]), "ifmap_sram_kib": 48,
            "filter_sram_kib": 48, "ofmap_sram_kib": 24, "area_mm2": rng.uniform(2, 6),
            "seconds": rng.uniform(0.1, 1), "energy_pj": rng.uniform(1e9, 1e10),
        }  # fmt: skip

    return {
        "area_budget_mm2": 6.5, "candidates": 384, "within_area": rng.randrange(1, 384),
        "fastest": design(), "lowest_energy": design(),
    }  # fmt: skip


def _assert_same_figures(got: dict | None, want: dict | None) -> None:
    if want is None:
        assert got is None
        return
    assert got is not None and got["n"] == want["n"]
    for name in ("mean", "sd", "ci_low", "ci_high"):
        if want[name] is None:
            assert got[name] is None, name
        else:
            assert got[name] == pytest.approx(want[name], rel=1e-9, abs=1e-12), name


def test_database_groups_match_the_python_reference(any_database: tuple[TestClient, str]) -> None:
    """Random groups: runs copied from an experiment's with random seeds, configs, statuses and
    metrics (some missing, some equal within a group, some groups of one), inserted without a
    key (the model computes it); the database's figures equal those of `estimate`."""
    api, database_url = any_database
    experiment = api.post("/api/v1/experiments", json=SPEC).json()
    rng = random.Random(7)
    with session_scope(database_url) as db:
        templates = list(db.scalars(select(Run).where(Run.experiment_id == experiment["id"])))
        skip = {"id", "created_at", "group_key", "baseline_run_id"}
        columns = [c.key for c in Run.__table__.columns if c.key not in skip]
        for i in range(400):
            template = rng.choice(templates)
            row = {name: getattr(template, name) for name in columns}
            rate = rng.choice([0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, float(i)])
            row["training_config"] = {
                **template.training_config,
                "learning_rate": rate,
                "seed": rng.randrange(5),
            }
            row["seed"] = row["training_config"]["seed"]
            row["status"] = rng.choice(["done", "done", "done", "failed", "queued"])
            row["did_not_learn"] = rng.choice([True, False, None])
            equal = rate == 0.5  # every run of these groups has the same figures
            for name, low, high in (
                ("accuracy", 0.1, 0.99),
                ("speedup", 0.5, 3.0),
                ("energy_ratio", 0.3, 1.5),
                ("stall_share", 0.0, 0.8),
                ("iso_area_speedup", 0.5, 3.0),
            ):
                value = 0.75 if equal else rng.uniform(low, high)
                row[name] = None if rng.random() < 0.1 else value
            row["iso_area"] = None if row["iso_area_speedup"] is None else iso_area(rng)
            row["baseline_run_id"] = (
                None if row["is_baseline"] else rng.choice([t.id for t in templates])
            )
            db.add(Run(**row))
    with session_scope(database_url) as db:
        runs = list(db.scalars(select(Run).where(Run.experiment_id == experiment["id"])))
        assert all(run.group_key == run_group_key(run) for run in runs)
        reference = _reference_groups(runs)
    got = api.get("/api/v1/runs/groups", params={"experiment_id": experiment["id"]}).json()
    assert len(reference) > 30 and any(len(g["run_ids"]) == 1 for g in reference)
    assert [g["key"] for g in got] == [g["key"] for g in reference]
    for answer, want in zip(got, reference, strict=True):
        for field in ("run_ids", "seeds", "done", "did_not_learn", "iso_area"):
            assert answer[field] == want[field], field
        for field in (
            "accuracy", "accuracy_delta", "speedup", "energy_ratio", "stall_share",
            "baseline_stall_share", "iso_area_speedup",
        ):  # fmt: skip
            _assert_same_figures(answer[field], want[field])
    # Filters narrow the groups as they narrow the runs.
    failed = api.get(
        "/api/v1/runs/groups", params={"experiment_id": experiment["id"], "status": "failed"}
    ).json()
    assert all(g["done"] == 0 and g["accuracy"] is None for g in failed) and failed
