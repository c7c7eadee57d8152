"""docker-compose.yml cannot run here (no Docker engine), so check what it says."""

from pathlib import Path

import yaml

COMPOSE = yaml.safe_load((Path(__file__).resolve().parents[1] / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]


def test_names_every_service() -> None:
    assert set(SERVICES) == {"postgres", "redis", "api", "worker", "flower"}


def test_api_and_worker_are_wired_to_postgres_and_redis() -> None:
    for name in ("api", "worker"):
        env = SERVICES[name]["environment"]
        assert "@postgres:5432/" in env["ORRERY_DATABASE_URL"]
        assert env["ORRERY_DATABASE_URL"].startswith("postgresql+psycopg://")
        assert env["ORRERY_BROKER_URL"].startswith("redis://redis:6379")
        assert env["ORRERY_RESULT_BACKEND"].startswith("redis://redis:6379")
        assert "ORRERY_SECRET_KEY" in env


def test_api_migrates_before_serving_and_waits_for_healthy_services() -> None:
    api = SERVICES["api"]
    command = " ".join(api["command"])
    # `orrery serve` migrates before it starts uvicorn; the workers train in their own service.
    assert "orrery serve --no-with-worker" in command
    assert "--host 0.0.0.0 --port 8000" in command
    assert api["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert api["depends_on"]["redis"]["condition"] == "service_healthy"
    assert "/api/v1/health" in " ".join(api["healthcheck"]["test"])


def test_api_runs_several_processes() -> None:
    # On PostgreSQL the API serves from several processes, so a heavy read (an export, the
    # seed groups) takes one core and not every request's turn; the count is a variable.
    command = SERVICES["api"]["command"]
    workers = command[command.index("--workers") + 1]
    # compose fills in ${ORRERY_API_WORKERS:-4}: the variable, or 4
    assert workers.startswith("${ORRERY_API_WORKERS:-") and int(workers[22:-1]) > 1


def test_every_service_has_a_healthcheck() -> None:
    for name, service in SERVICES.items():
        assert service.get("healthcheck", {}).get("test"), name


def test_worker_can_be_scaled() -> None:
    worker = SERVICES["worker"]
    # A fixed container name or a published port would make `--scale worker=4` fail.
    assert "container_name" not in worker
    assert "ports" not in worker
    assert worker["command"][:2] == ["orrery", "worker"]


def test_flower_is_behind_basic_auth() -> None:
    flower = SERVICES["flower"]
    assert ":" in flower["environment"]["FLOWER_BASIC_AUTH"]
    assert flower["environment"]["CELERY_BROKER_URL"].startswith("redis://redis:6379")
