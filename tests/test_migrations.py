"""The one migration chain builds the models' schema on SQLite and PostgreSQL, and round-trips."""

import json
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import create_engine, inspect, text

from backend.analysis.groups import group_key
from backend.db import migrate, sort_indexes
from backend.db.models import Base
from backend.specs.accelerator import PRESETS, AcceleratorConfig
from backend.specs.experiment import ExperimentSpec

EXPECTED_TABLES = {
    "users",
    "teams",
    "team_memberships",
    "api_tokens",
    "experiments",
    "trainings",
    "runs",
    "layer_results",
    "epoch_metrics",
    "dashboards",
    "share_links",
    "user_sessions",
    "login_throttles",
    "team_invitations",
    "worker_heartbeats",
    "run_attempts",
    "design_searches",
    "search_chunks",
    "saved_accelerators",
    "change_log",
}


def _tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return set(inspect(engine).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()


def _round_trip(url: str) -> None:
    migrate.upgrade(url)
    assert _tables(url) == EXPECTED_TABLES == set(Base.metadata.tables)
    migrate.check(url)  # raises if models and migrations drift apart

    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO users (email, display_name, is_admin, is_active) "
                "VALUES ('a@b.c', 'A', false, true)"
            )
        )
    engine.dispose()

    migrate.downgrade(url, "base")
    assert _tables(url) == set()
    migrate.upgrade(url)
    assert _tables(url) == EXPECTED_TABLES
    migrate.check(url)


def test_round_trip_on_sqlite(tmp_path: Path) -> None:
    _round_trip(f"sqlite:///{tmp_path / 'orrery.db'}")


def test_round_trip_on_postgresql(postgres_url: str) -> None:
    _round_trip(postgres_url)


@pytest.mark.parametrize("table", ["runs", "experiments", "api_tokens", "share_links"])
def test_query_indexes_exist_on_postgresql(postgres_url: str, table: str) -> None:
    migrate.upgrade(postgres_url)
    engine = create_engine(postgres_url)
    inspector = inspect(engine)
    indexed = {tuple(ix["column_names"]) for ix in inspector.get_indexes(table)}
    unique = {tuple(uc["column_names"]) for uc in inspector.get_unique_constraints(table)}
    engine.dispose()
    expected = {
        "runs": {
            ("experiment_id", "status"),
            ("technique",),
            ("status", "created_at"),
            ("energy_pj",),
            ("total_cycles",),
        },
        "experiments": {("owner_id", "created_at"), ("team_id", "created_at")},
        "api_tokens": {("token_hash",)},
        "share_links": {("token_hash",)},
    }[table]
    assert expected <= indexed | unique


def test_the_descending_sort_indexes_put_unfinished_runs_last_on_postgresql(
    postgres_url: str,
) -> None:
    """The run list sorts a figure descending with NULLS LAST: only an index in that order lets
    the database read a page off it (backend/db/sort_indexes.py)."""
    migrate.upgrade(postgres_url)
    engine = create_engine(postgres_url)
    with engine.connect() as connection:
        definitions = dict(
            connection.execute(
                text("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'runs'")
            ).all()
        )
        # Whether the index can give the list's order at all: with sorting priced out, the
        # planner reads the index only if its order is the one asked for.
        connection.execute(text("SET enable_sort = off"))
        plan = connection.execute(
            text("EXPLAIN SELECT id FROM runs ORDER BY speedup DESC NULLS LAST LIMIT 50")
        ).scalars()
        walked = any("ix_runs_speedup_desc" in line for line in plan)
    engine.dispose()
    for name, figure in sort_indexes.DESCENDING.items():
        assert definitions[name].endswith(f"({figure} DESC NULLS LAST)"), definitions.get(name)
    assert walked
    migrate.downgrade(postgres_url, "0020")
    engine = create_engine(postgres_url)
    names = {ix["name"] for ix in inspect(engine).get_indexes("runs")}
    engine.dispose()
    assert not names & set(sort_indexes.DESCENDING)


def test_the_chain_has_one_head() -> None:
    """Migrations written in parallel must be rebased into one line, not merged as branches."""
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory.from_config(migrate.alembic_config("sqlite://"))
    assert len(scripts.get_heads()) == 1, scripts.get_heads()
    assert len(scripts.get_bases()) == 1


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.slow)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database of each kind the migrations must serve."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'orrery.db'}"
    return request.getfixturevalue("postgres_url")


def _insert_experiment(connection: Any) -> None:
    """Experiment 1, for rows that need one."""
    connection.execute(
        text(
            "INSERT INTO experiments (id, name, spec, status, tags, notes) "
            "VALUES (1, 'e', '{}', 'done', '[]', '')"
        )
    )


def test_epoch_figures_move_into_one_json_object_and_back(database_url: str) -> None:
    url = database_url
    migrate.upgrade(url, "0010")
    engine = create_engine(url)
    with engine.begin() as connection:
        _insert_experiment(connection)
        connection.execute(
            text(
                "INSERT INTO trainings (id, experiment_id, key, technique, technique_params, "
                "training_config, status, progress, attempts, cancel_requested) "
                "VALUES (1, 1, 'k', 'mercury', '[]', '{}', 'done', 1, 1, false)"
            )
        )
        connection.execute(
            text(
                "INSERT INTO epoch_metrics (training_id, epoch, hit_rate, density_bwd, per_layer) "
                "VALUES (1, 1, 0.5, 0.25, :per_layer)"
            ),
            {"per_layer": '{"conv1": {"density_x": 0.7, "density_grad": 0.2, "hit_rate": 0.4}}'},
        )
    migrate.upgrade(url)
    with engine.connect() as connection:
        figures, per_layer = connection.execute(
            text("SELECT figures, per_layer FROM epoch_metrics")
        ).one()
    as_json = json.loads if url.startswith("sqlite") else (lambda v: v)
    assert as_json(figures) == {"hit_rate": 0.5, "density_bwd": 0.25}
    assert as_json(per_layer) == {
        "conv1": {"density_fwd": 0.7, "density_bwd": 0.2, "hit_rate": 0.4}
    }
    migrate.downgrade(url, "0010")
    with engine.connect() as connection:
        hit_rate, gp_fraction, per_layer = connection.execute(
            text("SELECT hit_rate, gp_fraction, per_layer FROM epoch_metrics")
        ).one()
    engine.dispose()
    assert (hit_rate, gp_fraction) == (0.5, None)
    assert as_json(per_layer)["conv1"]["density_x"] == 0.7


def _old_accelerator_config() -> dict[str, Any]:
    """The mercury-like preset as runs stored it before 0012, the MCACHE under "mercury"."""
    config = PRESETS["mercury-like"].model_dump()
    return {("mercury" if key == "mcache" else key): value for key, value in config.items()}


def _rename_the_mcache_extension(url: str) -> None:
    migrate.upgrade(url, "0010")
    custom = {**_old_accelerator_config(), "name": "custom"}
    spec = {
        "name": "e",
        "techniques": [{"name": "mercury", "signature_bits": 8}],
        "accelerators": ["mercury-like", custom],
        "sweep": {
            "parameters": {
                "accelerator.mercury.lookup_latency": {"values": [1, 2]},
                "mercury.signature_bits": {"values": [8, 16]},
            }
        },
    }
    params = {"accelerator.mercury.lookup_latency": 2, "mercury.signature_bits": 16}
    filters = {"param": ["accelerator.mercury.lookup_latency:2", "mercury.signature_bits:16"]}
    engine = create_engine(url)
    experiments = sa.table(
        "experiments", sa.column("id"), sa.column("name"), sa.column("status"),
        sa.column("spec", sa.JSON),
    )  # fmt: skip
    runs = sa.table(
        "runs", *(sa.column(name) for name in _RUN_COLUMNS),
        sa.column("technique_params", sa.JSON), sa.column("training_config", sa.JSON),
        sa.column("accelerator_config", sa.JSON), sa.column("params", sa.JSON),
    )  # fmt: skip
    dashboards = sa.table(
        "dashboards", sa.column("id"), sa.column("name"), sa.column("config", sa.JSON)
    )
    with engine.begin() as connection:
        connection.execute(experiments.insert().values(id=1, name="e", status="done", spec=spec))
        connection.execute(
            dashboards.insert().values(id="d1", name="d", config={"filters": filters})
        )
        connection.execute(
            runs.insert().values(
                id=1, experiment_id=1, is_baseline=False, technique="mercury", model="lenet5",
                dataset="digits", accelerator_name="mercury-like", seed=0, status="done",
                progress=1.0, technique_params=[{"name": "mercury", "signature_bits": 16}],
                training_config={}, accelerator_config=_old_accelerator_config(), params=params,
            )
        )  # fmt: skip

    def stored() -> tuple[dict[str, Any], ...]:
        with engine.connect() as connection:
            run = connection.execute(sa.select(runs.c.accelerator_config, runs.c.params)).one()
            return (
                run.accelerator_config,
                run.params,
                connection.execute(sa.select(experiments.c.spec)).scalar_one(),
                connection.execute(sa.select(dashboards.c.config)).scalar_one(),
            )

    migrate.upgrade(url)
    config, run_params, new_spec, dashboard = stored()
    assert "mercury" not in config
    assert AcceleratorConfig.model_validate(config) == PRESETS["mercury-like"]
    assert run_params == {"accelerator.mcache.lookup_latency": 2, "mercury.signature_bits": 16}
    checked = ExperimentSpec.model_validate(new_spec)
    assert checked.accelerators[0] == "mercury-like"
    assert checked.accelerators[1] == PRESETS["mercury-like"].model_copy(update={"name": "custom"})
    assert checked.sweep is not None
    assert set(checked.sweep.parameters) == {
        "accelerator.mcache.lookup_latency",
        "mercury.signature_bits",
    }
    assert checked.techniques[0].signature_bits == 8  # the technique keeps its name
    assert dashboard["filters"]["param"] == [
        "accelerator.mcache.lookup_latency:2",
        "mercury.signature_bits:16",
    ]

    migrate.downgrade(url, "0010")
    assert stored() == (_old_accelerator_config(), params, spec, {"filters": filters})
    engine.dispose()


_RUN_COLUMNS = (
    "id", "experiment_id", "is_baseline", "technique", "model", "dataset", "accelerator_name",
    "seed", "status", "progress",
)  # fmt: skip


def test_0012_renames_the_mcache_extension(database_url: str) -> None:
    _rename_the_mcache_extension(database_url)


_RUN_JSON_COLUMNS = ("technique_params", "training_config", "accelerator_config", "params")


def _runs_table(*more: sa.ColumnClause) -> sa.TableClause:
    """The runs table as a data-migration test writes it: the plain columns, the JSON ones,
    and `more`."""
    return sa.table(
        "runs",
        *(sa.column(name) for name in _RUN_COLUMNS),
        *(sa.column(name, sa.JSON) for name in _RUN_JSON_COLUMNS),
        *more,
    )


def test_0016_fills_seconds_from_the_stored_summary(database_url: str) -> None:
    url = database_url
    migrate.upgrade(url, "0013")
    engine = create_engine(url)
    runs = _runs_table(sa.column("summary", sa.JSON))
    common = {
        "experiment_id": 1, "is_baseline": True, "technique": "baseline", "model": "lenet5",
        "dataset": "digits", "accelerator_name": "edge", "seed": 0, "progress": 1.0,
        "technique_params": [], "training_config": {}, "accelerator_config": {}, "params": {},
    }  # fmt: skip
    with engine.begin() as connection:
        _insert_experiment(connection)
        connection.execute(
            runs.insert(),
            [
                {**common, "id": 1, "status": "done", "summary": {"seconds": 0.25}},
                {**common, "id": 2, "status": "queued", "summary": None},
            ],
        )
    migrate.upgrade(url)
    with engine.connect() as connection:
        stored = connection.execute(
            text("SELECT id, seconds, seconds_per_step, area_mm2 FROM runs ORDER BY id")
        ).all()
    assert [tuple(row) for row in stored] == [(1, 0.25, None, None), (2, None, None, None)]
    migrate.downgrade(url, "0013")
    with engine.connect() as connection:
        assert "seconds" not in {c["name"] for c in inspect(connection).get_columns("runs")}
    engine.dispose()


def test_0018_fills_the_stall_share_from_the_stored_cycles(database_url: str) -> None:
    url = database_url
    migrate.upgrade(url, "0017")
    engine = create_engine(url)
    runs = _runs_table(sa.column("stall_cycles"), sa.column("total_cycles"), sa.column("group_key"))
    common = {
        "experiment_id": 1, "is_baseline": True, "technique": "baseline", "model": "lenet5",
        "dataset": "digits", "accelerator_name": "edge", "seed": 0, "progress": 1.0,
        "technique_params": [], "training_config": {}, "accelerator_config": {}, "params": {},
        "group_key": "g",
    }  # fmt: skip
    with engine.begin() as connection:
        _insert_experiment(connection)
        connection.execute(
            runs.insert(),
            [
                {**common, "id": 1, "status": "done", "stall_cycles": 30, "total_cycles": 120},
                {**common, "id": 2, "status": "done", "stall_cycles": 0, "total_cycles": 0},
                {**common, "id": 3, "status": "queued", "stall_cycles": None, "total_cycles": None},
            ],
        )
    migrate.upgrade(url)
    with engine.connect() as connection:
        stored = connection.execute(
            text("SELECT id, stall_share, iso_area_speedup, iso_area FROM runs ORDER BY id")
        ).all()
    assert [tuple(row) for row in stored] == [
        (1, 0.25, None, None), (2, None, None, None), (3, None, None, None),
    ]  # fmt: skip
    migrate.downgrade(url, "0017")
    with engine.connect() as connection:
        columns = {c["name"] for c in inspect(connection).get_columns("runs")}
    assert not columns & {"stall_share", "iso_area_speedup", "iso_area_energy_ratio", "iso_area"}
    engine.dispose()


def test_0015_backfills_the_group_key(database_url: str) -> None:
    url = database_url
    migrate.upgrade(url, "0013")
    engine = create_engine(url)
    runs = _runs_table(sa.column("baseline_hardware"))
    accelerator = PRESETS["edge"].model_dump()
    techniques = [{"name": "mercury", "signature_bits": 16}]
    configs = [
        ({"model": "mlp", "seed": 0}, "dense"),
        ({"model": "mlp", "seed": 1}, "dense"),
        ({"model": "mlp", "seed": 0}, "same"),
        ({"model": "cnn", "seed": 0}, "dense"),
    ]
    with engine.begin() as connection:
        _insert_experiment(connection)
        for i, (config, hardware) in enumerate(configs, 1):
            connection.execute(
                runs.insert().values(
                    id=i, experiment_id=1, is_baseline=False, technique="mercury", model="mlp",
                    dataset="digits", accelerator_name="edge", seed=config["seed"],
                    status="done", progress=1.0, technique_params=techniques,
                    training_config=config, accelerator_config=accelerator, params={},
                    baseline_hardware=hardware,
                )
            )  # fmt: skip
    migrate.upgrade(url)
    with engine.connect() as connection:
        keys = list(connection.scalars(text("SELECT group_key FROM runs ORDER BY id")))
    assert keys == [group_key(c, techniques, accelerator, hw) for c, hw in configs]
    assert keys[0] == keys[1] and len(set(keys)) == 3  # only the seed differs between 1 and 2
    migrate.downgrade(url, "0013")
    with engine.connect() as connection:
        assert "group_key" not in {c["name"] for c in inspect(connection).get_columns("runs")}
    engine.dispose()
