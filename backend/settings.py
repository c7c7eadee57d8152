"""One typed settings object for the API, the worker and the CLI.

Every value can be set by an environment variable prefixed ``ORRERY_`` (``ORRERY_DATABASE_URL``,
``ORRERY_BROKER_URL``, ...). With nothing set, Orrery runs on embedded defaults that need no
server: a SQLite database and a SQLite-backed Celery broker, both files under the data dir.

Why the SQLAlchemy transport for the embedded broker rather than kombu's filesystem transport:
it stores messages in one transactional SQLite file that several worker processes can share
safely, and it needs no extra directory layout or polling of many small files.
"""

from __future__ import annotations

import ipaddress
import secrets
from functools import lru_cache
from pathlib import Path
from typing import Annotated

from pydantic import Field, computed_field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from sqlalchemy.engine import make_url

# Each request at work holds at most two pooled database connections (db/session.py pools 40)
# and one worker thread at a time (the thread pool has 40).
MAX_API_CONCURRENCY = 20


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ORRERY_", env_file=".env", extra="ignore")

    data_dir: Path = Field(Path(".orrery"), description="where embedded files live")
    data_root: Path | None = Field(
        None,
        description="the only folder a training's dataset_path may point into (default: data_dir)",
    )
    fashion_mnist_dir: Path | None = Field(
        None,
        description="the folder of Fashion-MNIST's idx files the worker reads (default: where "
        "the dataset-fashion-mnist package installs them)",
    )
    database_url: str | None = Field(None, description="SQLAlchemy URL of the main database")
    broker_url: str | None = Field(None, description="Celery broker URL")
    result_backend: str | None = Field(None, description="Celery result store URL")
    secret_key: str | None = Field(None, description="signs session cookies")

    api_host: str = "127.0.0.1"
    api_port: int = 8000
    task_time_limit: int = Field(6 * 3600, ge=60, description="hard limit of one task, seconds")
    max_runs_per_experiment: int = Field(5000, ge=1)
    worker_concurrency: int = Field(1, ge=1, description="training processes per worker")
    worker_nice: int = Field(
        10,
        ge=0,
        le=19,
        description="CPU niceness of the worker's processes: on a host shared with the API, "
        "trainings yield the cores to requests (0: share them equally)",
    )
    single_user: bool | None = Field(
        None,
        description="no login, every request acts as the local user (default: on when embedded)",
    )

    session_days: int = Field(14, ge=1, description="a browser session lasts this many days")
    cookie_secure: bool = Field(
        True, description="session cookie over HTTPS only (browsers count localhost as HTTPS)"
    )
    login_max_failures: int = Field(
        5, ge=1, description="failed logins per (email, client address) before delays start"
    )
    login_delay_seconds: float = Field(
        30, gt=0, description="the first delay after the free failures; each further one doubles"
    )
    login_window_seconds: int = Field(
        900, ge=1, description="longest login delay; a pair quiet this long starts afresh"
    )
    trusted_proxies: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="addresses or networks (comma-separated, e.g. 10.0.0.5,10.1.0.0/16) of the "
        "reverse proxies whose X-Forwarded-For is believed; empty: every request's client is "
        "its socket peer (backend/api/client_address.py)",
    )
    max_body_bytes: int = Field(1_048_576, ge=1024, description="largest request body accepted")
    read_cache_entries: int = Field(
        256,
        ge=0,
        description="answers of the read-only endpoints declared cacheable (the run list and "
        "its aggregates and exports, dashboards' chart data, search samples) kept per API "
        "process, each until the next write it could show (PostgreSQL only; 0 turns the "
        "cache off)",
    )
    read_cache_megabytes: int = Field(
        64, ge=1, description="the most those answers weigh per API process, bodies summed"
    )
    api_concurrency: int = Field(
        16,
        ge=1,
        le=MAX_API_CONCURRENCY,
        description="requests one API process works on at once; more wait their turn "
        "(event streams and cached answers do not count)",
    )
    api_heavy_concurrency: int = Field(
        2,
        ge=1,
        le=MAX_API_CONCURRENCY,
        description="of those, heavy reads (seed groups, summaries, Pareto fronts, exports, "
        "chart data, search samples) one API process works on at once; more wait without "
        "taking a turn from cheap requests",
    )
    max_active_runs_per_user: int = Field(
        10_000, ge=1, description="queued plus running runs one user may have at a time"
    )
    max_queued_trainings_per_user: int = Field(
        500,
        ge=1,
        description="queued trainings (waiting, not yet running) one user may have at a time; a "
        "submission over it is refused with 429 (backend/experiments/quota.py)",
    )
    max_active_searches_per_user: int = Field(
        4,
        ge=1,
        description="waiting plus running design searches one user may have started at a time; "
        "one more is refused with 429 (backend/experiments/quota.py)",
    )
    dispatch_ahead: int = Field(
        8,
        ge=1,
        description="messages (trainings and design search chunks) sent to the broker and not "
        "yet claimed, at most; the rest wait in the database and are sent fairly between users, "
        "fewest in flight first (backend/delivery/dispatch.py); about twice the worker "
        "processes of all workers",
    )
    reconcile_interval: float = Field(
        60, ge=0, description="seconds between the API's reconciler passes (0 turns it off)"
    )
    did_not_learn_margin: float = Field(
        0.10,
        ge=0,
        le=1,
        description="a run whose test accuracy is below chance (1 / classes) plus this margin "
        "is flagged 'did not learn'",
    )
    reconcile_grace_seconds: float = Field(
        300,
        ge=0,
        description="a queued training whose last message went out this long ago is sent "
        "again by the reconciler (the message may be lost); the wait doubles with each re-send "
        "of the same wait in the queue, up to reconcile_grace_max_seconds",
    )
    reconcile_grace_max_seconds: float = Field(
        3600,
        ge=0,
        description="the longest wait between two re-sends of one queued training",
    )
    lease_seconds: float = Field(
        120,
        gt=0,
        description="a claimed training whose worker has not beaten for this long is taken back "
        "(re-delivered, or failed after max_attempts); workers beat every third of it",
    )
    max_attempts: int = Field(
        3, ge=1, description="deliveries of one training before it is failed with the reason"
    )
    broker_connect_timeout: float = Field(
        0.2,
        gt=0,
        le=5,
        description="seconds the API waits for the broker to accept a connection, per try "
        "(three tries): a submission with the broker away is refused within about a second",
    )

    @field_validator("trusted_proxies", mode="before")
    @classmethod
    def _proxies_from_text(cls, value: object) -> object:
        """ORRERY_TRUSTED_PROXIES is a comma-separated list."""
        if isinstance(value, str):
            return [item.strip() for item in value.split(",") if item.strip()]
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _proxies_are_addresses(cls, value: list[str]) -> list[str]:
        for item in value:
            try:
                ipaddress.ip_network(item, strict=False)
            except ValueError as exc:
                raise ValueError(f"not an IP address or network: {item!r}") from exc
        return value

    @field_validator("fashion_mnist_dir", mode="before")
    @classmethod
    def _empty_folder_is_the_default(cls, value: object) -> object:
        """ORRERY_FASHION_MNIST_DIR= (set but empty) means the default folder, not '.'."""
        return value or None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def effective_database_url(self) -> str:
        return self.database_url or f"sqlite:///{self.data_dir.resolve() / 'orrery.db'}"

    @property
    def worker_database_url(self) -> str:
        """The database URL workers use. On PostgreSQL it ends any transaction a worker leaves
        idle for a lease (idle_in_transaction_session_timeout): a worker stopped (SIGSTOP, a
        paused VM) between a write and its commit would otherwise hold the training's row lock,
        and the reconciler taking its lease back would wait for it for as long as it stays
        stopped. Such a worker has lost its lease by then anyway."""
        url = make_url(self.effective_database_url)
        if not url.drivername.startswith("postgresql"):
            return self.effective_database_url
        timeout_ms = int(self.lease_seconds * 1000)
        options = f"-c idle_in_transaction_session_timeout={timeout_ms}"
        return url.update_query_dict({"options": options}).render_as_string(hide_password=False)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def effective_broker_url(self) -> str:
        return self.broker_url or f"sqla+sqlite:///{self.data_dir.resolve() / 'broker.db'}"

    @computed_field  # type: ignore[prop-decorator]
    @property
    def effective_result_backend(self) -> str:
        return self.result_backend or f"db+sqlite:///{self.data_dir.resolve() / 'results.db'}"

    @property
    def effective_data_root(self) -> Path:
        return (self.data_root or self.data_dir).resolve()

    @property
    def is_embedded(self) -> bool:
        return self.effective_database_url.startswith("sqlite")

    @property
    def single_user_mode(self) -> bool:
        return self.is_embedded if self.single_user is None else self.single_user

    def effective_secret_key(self) -> str:
        """The configured key, or one generated once and kept in the data dir."""
        if self.secret_key:
            return self.secret_key
        key_file = self.data_dir / "secret_key"
        if not key_file.exists():
            self.ensure_data_dir()
            key_file.write_text(secrets.token_urlsafe(48))
            key_file.chmod(0o600)
        return key_file.read_text().strip()

    def ensure_data_dir(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)


@lru_cache
def get_settings() -> Settings:
    settings = Settings()
    settings.ensure_data_dir()
    return settings
