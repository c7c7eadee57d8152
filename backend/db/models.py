"""The database schema: who submitted what, what ran, and what it measured.

An experiment expands into runs (one design point each). Runs that share a model, data set,
training config, technique set and seed share one *training*: the network is trained once and
its stored workload is re-simulated for every accelerator config of the sweep.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from backend.specs.figures import LAYER_MEASURES, RUN_MEASURES, Measure

# JSONB on PostgreSQL (indexable, comparable), plain JSON text elsewhere.
JsonType = JSON().with_variant(JSONB(), "postgresql")

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: ClassVar[dict[Any, Any]] = {dict[str, Any]: JsonType, list[Any]: JsonType}


def _measure_columns(name: str, measures: tuple[Measure, ...], nullable: bool) -> type:
    """A mixin with one column per measure (backend/specs/figures.py), named by its key."""
    types = {int: BigInteger, float: Float}
    return type(
        name,
        (),
        {m.key: mapped_column(types[m.kind], nullable=nullable) for m in measures},
    )


# A run's measures are None until it is done; a layer-pass row exists only with its figures.
RunMeasureColumns = _measure_columns("RunMeasureColumns", RUN_MEASURES, nullable=True)
LayerMeasureColumns = _measure_columns("LayerMeasureColumns", LAYER_MEASURES, nullable=False)


def _now_column() -> Mapped[datetime]:
    return mapped_column(DateTime(timezone=True), server_default=func.now())


class User(Base):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(String(254), unique=True)
    display_name: Mapped[str] = mapped_column(String(120))
    password_hash: Mapped[str | None] = mapped_column(String(255))
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False)
    is_active: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = _now_column()
    # What the user chose in the dashboard (e.g. the run table's columns), kept on the server so
    # it follows them from browser to browser.
    preferences: Mapped[dict[str, Any]] = mapped_column(default=dict, server_default="{}")

    memberships: Mapped[list[TeamMembership]] = relationship(back_populates="user")


class Team(Base):
    """A team's name is unique among the teams its creator made, not globally: creating a team
    must not tell anyone which names other people chose."""

    __tablename__ = "teams"
    __table_args__ = (UniqueConstraint("created_by", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(120))
    created_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = _now_column()

    memberships: Mapped[list[TeamMembership]] = relationship(
        back_populates="team", cascade="all, delete-orphan"
    )


class TeamMembership(Base):
    __tablename__ = "team_memberships"
    __table_args__ = (UniqueConstraint("team_id", "user_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    role: Mapped[str] = mapped_column(String(16))  # owner | member | viewer
    created_at: Mapped[datetime] = _now_column()

    team: Mapped[Team] = relationship(back_populates="memberships")
    user: Mapped[User] = relationship(back_populates="memberships")


class ApiToken(Base):
    """A personal API token; only its SHA-256 is stored, the token is shown once."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(120))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = _now_column()
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Experiment(Base):
    __tablename__ = "experiments"
    __table_args__ = (
        Index("ix_experiments_owner_created", "owner_id", "created_at"),
        Index("ix_experiments_team_created", "team_id", "created_at"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    owner_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    team_id: Mapped[int | None] = mapped_column(ForeignKey("teams.id", ondelete="SET NULL"))
    name: Mapped[str] = mapped_column(String(200))
    spec: Mapped[dict[str, Any]]
    status: Mapped[str] = mapped_column(String(16), default="queued")
    created_at: Mapped[datetime] = _now_column()
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), onupdate=func.now()
    )
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    tags: Mapped[list[Any]] = mapped_column(default=list, server_default="[]")
    notes: Mapped[str] = mapped_column(Text, default="", server_default="")

    runs: Mapped[list[Run]] = relationship(back_populates="experiment")


class Training(Base):
    """One real training; its workload is simulated once per accelerator config."""

    __tablename__ = "trainings"
    __table_args__ = (
        UniqueConstraint("experiment_id", "key"),
        Index("ix_trainings_status", "status"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiments.id", ondelete="CASCADE"))
    key: Mapped[str] = mapped_column(String(64))  # hash of the training-defining spec fields
    technique: Mapped[str] = mapped_column(String(64))
    technique_params: Mapped[list[Any]]
    training_config: Mapped[dict[str, Any]]
    status: Mapped[str] = mapped_column(String(16), default="queued")
    progress: Mapped[float] = mapped_column(Float, default=0.0)
    error: Mapped[str | None] = mapped_column(Text)
    task_id: Mapped[str | None] = mapped_column(String(64))
    # When the training's last message was accepted by the broker, and how many were sent since
    # it last became queued: what the reconciler reads to re-send an overdue one
    # (backend/delivery/send.py, backend/delivery/reconcile.py).
    sent_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    sends: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # The fencing token: deliveries claimed so far, plus one per retry (a retry supersedes any
    # delivery still holding an old token). The current holder's writes must present it.
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    # `attempts` when the training was last retried: the delivery limit counts claims after it.
    attempts_at_retry: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    leased_by: Mapped[str | None] = mapped_column(String(255))  # "host:pid" of the last claim
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    workload: Mapped[dict[str, Any] | None]
    test_accuracy: Mapped[float | None] = mapped_column(Float)
    test_loss: Mapped[float | None] = mapped_column(Float)
    chance_accuracy: Mapped[float | None] = mapped_column(Float)  # 1 / classes of the data set
    environment: Mapped[dict[str, Any] | None]  # backend/training/engine.py: training_environment
    wall_seconds: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[datetime] = _now_column()
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    epochs: Mapped[list[EpochMetric]] = relationship(
        back_populates="training", order_by="EpochMetric.epoch", cascade="all, delete-orphan"
    )


class WorkerHeartbeat(Base):
    """A worker process's latest sign of life: what the API shows as worker liveness."""

    __tablename__ = "worker_heartbeats"

    name: Mapped[str] = mapped_column(String(200), primary_key=True)  # Celery's node name
    hostname: Mapped[str] = mapped_column(String(200))
    pid: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    beat_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)


class ChangeLog(Base):
    """Which transactions wrote, by topic: one row per (topic, writing transaction), kept by
    PostgreSQL triggers on every other table (backend/db/change_log.py says how and why);
    periodically folded into one row per topic whose weight counts the rows it replaced."""

    __tablename__ = "change_log"

    topic: Mapped[str] = mapped_column(String(40), primary_key=True)
    xid: Mapped[int] = mapped_column(BigInteger, primary_key=True)  # the writer's transaction
    weight: Mapped[int] = mapped_column(BigInteger, default=1)


def _inserted_group_key(context: Any) -> str:
    """The group key of a run inserted without one, from the configs of the insert."""
    from backend.analysis.groups import group_key

    row = context.get_current_parameters()
    return group_key(
        row["training_config"],
        row["technique_params"],
        row["accelerator_config"],
        row.get("baseline_hardware") or "dense",
    )


class Run(RunMeasureColumns, Base):
    """One design point: a training simulated on one accelerator config. Its measures
    (accuracy, cycles, energy, MACs, speedup, ...) are columns from `RunMeasureColumns`."""

    __tablename__ = "runs"
    __table_args__ = (
        Index("ix_runs_experiment_status", "experiment_id", "status"),
        Index("ix_runs_technique", "technique"),
        Index("ix_runs_model_dataset", "model", "dataset"),
        Index("ix_runs_status_created", "status", "created_at"),
        Index("ix_runs_speedup", "speedup"),
        Index("ix_runs_accuracy", "accuracy"),
        Index("ix_runs_energy_pj", "energy_pj"),
        Index("ix_runs_total_cycles", "total_cycles"),
        Index("ix_runs_training", "training_id"),
        Index("ix_runs_group_key", "group_key"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiments.id", ondelete="CASCADE"))
    training_id: Mapped[int | None] = mapped_column(ForeignKey("trainings.id", ondelete="SET NULL"))
    baseline_run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id", ondelete="SET NULL"))
    is_baseline: Mapped[bool] = mapped_column(Boolean, default=False)
    technique: Mapped[str] = mapped_column(String(64))
    technique_params: Mapped[list[Any]]
    model: Mapped[str] = mapped_column(String(32))
    dataset: Mapped[str] = mapped_column(String(32))
    training_config: Mapped[dict[str, Any]]
    accelerator_name: Mapped[str] = mapped_column(String(64))
    accelerator_config: Mapped[dict[str, Any]]
    params: Mapped[dict[str, Any]]  # the swept values that make this run, flat, for filtering
    seed: Mapped[int] = mapped_column(Integer, default=0)
    # A technique run: the baseline it is compared with ('dense' or 'same', see ExperimentSpec).
    # A baseline run: the hardware it models.
    baseline_hardware: Mapped[str] = mapped_column(
        String(8), default="dense", server_default="dense"
    )
    # Runs equal but for the seed share it (backend.analysis.groups.group_key of the configs):
    # computed at expansion, or from the inserted configs when an insert leaves it out.
    group_key: Mapped[str] = mapped_column(String(32), default=_inserted_group_key)
    status: Mapped[str] = mapped_column(String(16), default="queued")
    progress: Mapped[float] = mapped_column(Float, default=0.0)
    error: Mapped[str | None] = mapped_column(Text)
    task_id: Mapped[str | None] = mapped_column(String(64))
    # 1 for the first attempt, one more for each retry; earlier ones are in `RunAttempt`.
    attempt: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    created_at: Mapped[datetime] = _now_column()
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    tags: Mapped[list[Any]] = mapped_column(default=list, server_default="[]")
    notes: Mapped[str] = mapped_column(Text, default="", server_default="")

    # test accuracy below chance + the did-not-learn margin (a setting); None until trained
    did_not_learn: Mapped[bool | None] = mapped_column(Boolean)
    summary: Mapped[dict[str, Any] | None]  # the simulator's totals, whole
    # The dense designs behind the iso-area measures (backend.sim.iso_area.IsoArea.to_dict()).
    iso_area: Mapped[dict[str, Any] | None]

    experiment: Mapped[Experiment] = relationship(back_populates="runs")
    layers: Mapped[list[LayerResult]] = relationship(
        back_populates="run", cascade="all, delete-orphan", order_by="LayerResult.position"
    )

    @classmethod
    def for_training(cls, training: Training, **fields: Any) -> Run:
        """A queued run of the training: its experiment, technique and training config (model,
        data set, seed) taken from the training; `fields` give the rest (the accelerator, the
        swept params, whether it is a baseline, ...)."""
        config = training.training_config
        return cls(
            experiment_id=training.experiment_id,
            training_id=training.id,
            technique=training.technique,
            technique_params=training.technique_params,
            model=config["model"],
            dataset=config["dataset"],
            training_config=config,
            seed=config["seed"],
            status="queued",
            **fields,
        )


class RunAttempt(Base):
    """A finished attempt of a run that was retried: how it ended, kept when the run re-ran."""

    __tablename__ = "run_attempts"
    __table_args__ = (UniqueConstraint("run_id", "attempt"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    attempt: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16))  # failed | cancelled
    error: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    worker: Mapped[str | None] = mapped_column(String(255))  # "host:pid" of its training's claim
    retried_at: Mapped[datetime] = _now_column()
    retried_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))

    @classmethod
    def ending(cls, run: Run, worker: str | None, retried_by: int | None) -> RunAttempt:
        """The record of the run's current attempt as it ended (its status, reason and times),
        taken when `retried_by` retries it; `worker` is its training's last claim."""
        return cls(
            run_id=run.id,
            attempt=run.attempt,
            status=run.status,
            error=run.error,
            started_at=run.started_at,
            finished_at=run.finished_at,
            worker=worker,
            retried_by=retried_by,
        )


class LayerResult(LayerMeasureColumns, Base):
    """The simulator's figures for one layer and one training pass of a run: its measures are
    columns from `LayerMeasureColumns`, the rest (per operand and level) is in `details`."""

    __tablename__ = "layer_results"
    __table_args__ = (UniqueConstraint("run_id", "position"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)  # order within the workload
    layer: Mapped[str] = mapped_column(String(120))
    training_pass: Mapped[str] = mapped_column(String(16))  # fwd | bwd_data | bwd_weight
    role: Mapped[str] = mapped_column(String(16))  # compute | overhead
    details: Mapped[dict[str, Any]]  # SRAM/DRAM per operand, energy breakdown

    run: Mapped[Run] = relationship(back_populates="layers")


class EpochMetric(Base):
    """What one epoch of a training measured: losses and accuracies, and its figures (as
    declared in `backend.specs.techniques.EPOCH_FIGURES`) in one JSON object. Stored as soon as
    the epoch is measured, under the training's lease (`worker.storage.store_epoch`), and
    stored again, the same, with the training's results."""

    __tablename__ = "epoch_metrics"
    __table_args__ = (UniqueConstraint("training_id", "epoch"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    training_id: Mapped[int] = mapped_column(ForeignKey("trainings.id", ondelete="CASCADE"))
    epoch: Mapped[int] = mapped_column(Integer)
    train_loss: Mapped[float | None] = mapped_column(Float)
    train_accuracy: Mapped[float | None] = mapped_column(Float)
    test_loss: Mapped[float | None] = mapped_column(Float)
    test_accuracy: Mapped[float | None] = mapped_column(Float)
    seconds: Mapped[float | None] = mapped_column(Float)  # the training batches
    wall_seconds: Mapped[float | None] = mapped_column(Float)  # the whole epoch, evaluation too
    figures: Mapped[dict[str, Any]] = mapped_column(default=dict, server_default="{}")
    per_layer: Mapped[dict[str, Any]]

    training: Mapped[Training] = relationship(back_populates="epochs")


class Dashboard(Base):
    __tablename__ = "dashboards"
    __table_args__ = (
        Index("ix_dashboards_owner", "owner_id"),
        Index("ix_dashboards_team", "team_id"),
    )

    id: Mapped[str] = mapped_column(String(16), primary_key=True)  # short random id
    owner_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    team_id: Mapped[int | None] = mapped_column(ForeignKey("teams.id", ondelete="SET NULL"))
    name: Mapped[str] = mapped_column(String(200))
    config: Mapped[dict[str, Any]]  # selected runs, filters and charts
    # Who last set the config: a share link shows only what this user may see too.
    config_set_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = _now_column()
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), onupdate=func.now()
    )


class ShareLink(Base):
    """A read-only link to one dashboard; only the token's SHA-256 is stored."""

    __tablename__ = "share_links"

    id: Mapped[int] = mapped_column(primary_key=True)
    dashboard_id: Mapped[str] = mapped_column(
        ForeignKey("dashboards.id", ondelete="CASCADE"), index=True
    )
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = _now_column()
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class UserSession(Base):
    """A browser login; the cookie holds a random secret, only its SHA-256 is stored."""

    __tablename__ = "user_sessions"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = _now_column()
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class LoginThrottle(Base):
    """Login attempts of one (account, client address) pair, for the login limit's growing
    delays; the key is a digest of the pair, so typed emails are not kept in clear."""

    __tablename__ = "login_throttles"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    failures: Mapped[int] = mapped_column(Integer, default=0)
    last_attempt_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    blocked_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class TeamInvitation(Base):
    """A pending invitation to a team, addressed to an email; the invitee accepts or declines.

    It exists whether or not an account has that email, so inviting tells nothing about who
    has an account."""

    __tablename__ = "team_invitations"
    __table_args__ = (UniqueConstraint("team_id", "email"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"))
    email: Mapped[str] = mapped_column(String(254), index=True)  # normalised, lower case
    role: Mapped[str] = mapped_column(String(16))  # owner | member | viewer
    invited_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = _now_column()

    team: Mapped[Team] = relationship()


class DesignSearchRow(Base):
    """A hardware design search over the stored workloads of an experiment's trainings
    (backend/specs/design_search.py says what is searched; backend/searches/ how it runs).

    `waiting` until every training of the experiment has ended, then `running` while its
    chunks are evaluated, then `done`; or `failed` / `cancelled`. `result` is the merge of the
    chunks stored so far (backend.sim.design_search.SearchResult's JSON: per technique label the
    counts, the exact front and the bounded sample), so it is the final answer once done and the
    answer so far before. Progress is read from the chunk rows.
    """

    __tablename__ = "design_searches"
    __table_args__ = (
        Index("ix_design_searches_experiment", "experiment_id"),
        Index("ix_design_searches_status", "status"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiments.id", ondelete="CASCADE"))
    created_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    spec: Mapped[dict[str, Any]]  # the DesignSearch, as submitted (model_dump, JSON mode)
    status: Mapped[str] = mapped_column(String(16), default="waiting")
    error: Mapped[str | None] = mapped_column(Text)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    designs: Mapped[int | None] = mapped_column(BigInteger)  # known once it started
    # The trainings whose stored workloads it evaluates, by technique label (chosen at start).
    trainings: Mapped[dict[str, Any] | None]
    result: Mapped[dict[str, Any] | None]
    # The searched fields of every design in `result`'s fronts and samples, columnar:
    # {"index": [...], "fields": {path: [...]}}, rows in the order of "index".
    design_fields: Mapped[dict[str, Any] | None]
    # Full accelerator configs of the designs on the fronts, by design index (as text): what a
    # front design becomes when it is turned into runs or saved as an accelerator.
    front_designs: Mapped[dict[str, Any] | None]
    created_at: Mapped[datetime] = _now_column()
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    experiment: Mapped[Experiment] = relationship()
    chunks: Mapped[list[SearchChunk]] = relationship(
        back_populates="search", cascade="all, delete-orphan", order_by="SearchChunk.position"
    )


class SearchChunk(Base):
    """Designs [start, stop) of a search, evaluated by one Celery task, leased like a training:
    a delivery claims it (`attempts` + 1 is its fencing token), beats while it evaluates, and
    merges its result into the search only while it still holds the lease
    (backend/searches/chunks.py)."""

    __tablename__ = "search_chunks"
    __table_args__ = (
        UniqueConstraint("search_id", "position"),
        Index("ix_search_chunks_status", "status"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    search_id: Mapped[int] = mapped_column(ForeignKey("design_searches.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)  # 0, 1, ...: the chunk's place in the search
    start: Mapped[int] = mapped_column(BigInteger)
    stop: Mapped[int] = mapped_column(BigInteger)
    status: Mapped[str] = mapped_column(String(16), default="queued")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    task_id: Mapped[str | None] = mapped_column(String(64))
    sent_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    sends: Mapped[int] = mapped_column(Integer, default=0)
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    leased_by: Mapped[str | None] = mapped_column(String(255))
    seconds: Mapped[float | None] = mapped_column(Float)  # evaluation time of the merged delivery
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    search: Mapped[DesignSearchRow] = relationship(back_populates="chunks")


class SavedAccelerator(Base):
    """A user's own accelerator preset: a full AcceleratorConfig under a name, e.g. a design
    saved from a search's front. Private to its owner; used in a spec as a full config."""

    __tablename__ = "saved_accelerators"
    __table_args__ = (UniqueConstraint("owner_id", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    owner_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(64))
    config: Mapped[dict[str, Any]]
    # Where it came from, if from a search: which search and which design of it.
    search_id: Mapped[int | None] = mapped_column(
        ForeignKey("design_searches.id", ondelete="SET NULL")
    )
    design_index: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = _now_column()
