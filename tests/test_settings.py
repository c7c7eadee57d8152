from pathlib import Path

import pytest

from backend.settings import Settings


def test_embedded_defaults_need_no_server(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    assert settings.effective_database_url == f"sqlite:///{tmp_path.resolve()}/orrery.db"
    assert settings.effective_broker_url.startswith("sqla+sqlite:///")
    assert settings.effective_result_backend.startswith("db+sqlite:///")
    assert settings.is_embedded


def test_environment_variables_override_with_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORRERY_DATABASE_URL", "postgresql+psycopg://u@db:5432/o")
    monkeypatch.setenv("ORRERY_BROKER_URL", "redis://cache:6379/0")
    monkeypatch.setenv("ORRERY_MAX_RUNS_PER_EXPERIMENT", "12")
    monkeypatch.setenv("ORRERY_FASHION_MNIST_DIR", "/data/fashion")
    settings = Settings()
    assert settings.fashion_mnist_dir == Path("/data/fashion")
    monkeypatch.setenv("ORRERY_FASHION_MNIST_DIR", "")
    assert Settings().fashion_mnist_dir is None  # the default folder, as before
    assert settings.effective_database_url == "postgresql+psycopg://u@db:5432/o"
    assert settings.effective_broker_url == "redis://cache:6379/0"
    assert settings.max_runs_per_experiment == 12
    assert not settings.is_embedded


def test_generated_secret_key_is_kept_across_restarts(tmp_path: Path) -> None:
    first = Settings(data_dir=tmp_path).effective_secret_key()
    second = Settings(data_dir=tmp_path).effective_secret_key()
    assert first == second
    assert len(first) >= 32
    assert (tmp_path / "secret_key").stat().st_mode & 0o077 == 0


def test_invalid_value_names_the_field(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORRERY_TASK_TIME_LIMIT", "5")
    with pytest.raises(ValueError, match="task_time_limit"):
        Settings()


def test_a_worker_transaction_left_idle_past_the_lease_releases_its_locks(
    postgres_url: str,
) -> None:
    """A worker stopped between a write and its commit must not hold the row the reconciler
    takes its lease back on: PostgreSQL ends the worker's idle transaction after a lease."""
    import time

    from sqlalchemy import create_engine, text

    worker_url = Settings(database_url=postgres_url, lease_seconds=1).worker_database_url
    worker, other = create_engine(worker_url), create_engine(postgres_url)
    try:
        with other.begin() as db:
            db.execute(text("CREATE TABLE lease_row (id int PRIMARY KEY, beat int)"))
            db.execute(text("INSERT INTO lease_row VALUES (1, 0)"))
        stopped = worker.connect()
        stopped.begin()
        stopped.execute(text("UPDATE lease_row SET beat = 1 WHERE id = 1"))  # then no commit
        time.sleep(1.5)
        with other.begin() as db:  # would wait for the row lock for as long as it is held
            db.execute(text("SET LOCAL lock_timeout = '5s'"))
            assert db.execute(text("UPDATE lease_row SET beat = 2 WHERE id = 1")).rowcount == 1
        with other.connect() as db:
            assert db.execute(text("SELECT beat FROM lease_row")).scalar() == 2
    finally:
        worker.dispose()
        other.dispose()


def test_a_forked_process_opens_its_own_database_connections(postgres_url: str) -> None:
    """A Celery pool process is forked from a worker whose heartbeat already holds pooled
    connections on the same URL: the child must not talk on the parent's connections (two
    processes on one PostgreSQL connection corrupt its protocol)."""
    import os
    import time

    from sqlalchemy import text

    from backend.db.session import engine_for

    engine = engine_for(postgres_url)
    with engine.connect() as db:  # returned to the pool, open
        parent_backend = db.execute(text("SELECT pg_backend_pid()")).scalar()
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        code = 1
        try:
            with engine.connect() as db:
                backend = db.execute(text("SELECT pg_backend_pid()")).scalar()
            os.write(write_end, str(backend).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    deadline = time.monotonic() + 60
    while os.waitpid(child, os.WNOHANG) == (0, 0):
        if time.monotonic() > deadline:
            os.kill(child, 9)
            raise AssertionError("the forked child did not finish")
        time.sleep(0.05)
    child_backend = int(os.read(read_end, 32) or b"0")
    os.close(read_end)
    assert child_backend not in (0, parent_backend)
    with engine.connect() as db:  # the parent's pooled connection still works
        assert db.execute(text("SELECT pg_backend_pid()")).scalar() == parent_backend
