"""Helpers of the chaos suite: real Celery workers this test started (signalled only by their
own pids), an API with a fast reconciler, and the final state of every run."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from sqlalchemy import func, select

from backend.cli.launcher import worker_command
from backend.db.models import EpochMetric, LayerResult, Run, Training
from backend.db.session import session_scope
from backend.settings import Settings
from tests.conftest import orrery_env

LEASE_SECONDS = 3.0
T = TypeVar("T")


def poll(condition: Callable[[], T], timeout: float, what: str) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def child_pids(parent: int) -> list[int]:
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == parent:
                children.append(int(entry.name))
    return children


def chaos_settings(database_url: str, broker_url: str, data_dir: Path) -> Settings:
    return Settings(
        data_dir=data_dir,
        database_url=database_url,
        broker_url=broker_url,
        result_backend=broker_url,
        single_user=True,
        reconcile_interval=0.5,
        reconcile_grace_seconds=2,
        lease_seconds=LEASE_SECONDS,
        max_attempts=3,
    )


@dataclass
class Worker:
    """`orrery worker`'s Celery command (prefork, one pool process), logging to a file."""

    process: subprocess.Popen[bytes]
    log: Path

    @classmethod
    def start(cls, settings: Settings, name: str) -> Worker:
        log = settings.data_dir / f"{name}.log"
        env = orrery_env(
            ORRERY_DATA_DIR=str(settings.data_dir),
            ORRERY_DATABASE_URL=settings.effective_database_url,
            ORRERY_BROKER_URL=settings.effective_broker_url,
            ORRERY_RESULT_BACKEND=settings.effective_result_backend,
            ORRERY_LEASE_SECONDS=str(settings.lease_seconds),
            ORRERY_MAX_ATTEMPTS=str(settings.max_attempts),
        )
        # No mingle or gossip: nothing here depends on workers knowing each other, and it
        # saves each start a second of waiting for neighbours.
        command = [
            *worker_command(concurrency=1, loglevel="INFO"),
            *("-n", f"{name}@%h", "--without-mingle", "--without-gossip"),
        ]
        with log.open("wb") as out:
            process = subprocess.Popen(
                command, cwd=settings.data_dir, env=env, stdout=out, stderr=subprocess.STDOUT
            )
        return cls(process, log)

    def pids(self) -> list[int]:
        """The worker's main process and its pool process(es)."""
        return [self.process.pid, *child_pids(self.process.pid)]

    def signal(self, number: int) -> None:
        for pid in self.pids():
            os.kill(pid, number)

    def kill(self) -> None:
        """SIGKILL the whole worker: its pool process and its main process."""
        pool = child_pids(self.process.pid)
        assert pool, "the worker has no pool process"
        for pid in [*pool, self.process.pid]:
            os.kill(pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> str:
        if self.process.poll() is None:
            self.signal(signal.SIGCONT)  # a stopped worker cannot handle SIGTERM
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                for pid in self.pids():
                    os.kill(pid, signal.SIGKILL)
                self.process.wait()
        return self.log.read_text(errors="replace")


def training_under_way(url: str) -> Training | None:
    with session_scope(url) as db:
        return db.scalar(
            select(Training).where(Training.status == "running", Training.progress > 0.05)
        )


def all_runs_finished(url: str) -> bool:
    with session_scope(url) as db:
        statuses = set(db.scalars(select(Run.status)))
    return bool(statuses) and statuses <= {"done", "failed", "cancelled"}


@dataclass
class FinalState:
    run_statuses: dict[int, str]
    attempts: dict[int, int]  # per training
    epoch_rows: dict[int, int]  # per training
    layer_rows: dict[int, int]  # per run
    ops: dict[int, int]  # per run: the layers its training's workload has
    metrics_missing: list[int]  # done runs without accuracy or cycles


def final_state(url: str) -> FinalState:
    with session_scope(url) as db:
        runs = list(db.scalars(select(Run).order_by(Run.id)))
        trainings = {t.id: t for t in db.scalars(select(Training))}
        epochs = dict(
            db.execute(
                select(EpochMetric.training_id, func.count()).group_by(EpochMetric.training_id)
            ).all()
        )
        layers = dict(
            db.execute(select(LayerResult.run_id, func.count()).group_by(LayerResult.run_id)).all()
        )
        return FinalState(
            run_statuses={r.id: r.status for r in runs},
            attempts={t.id: t.attempts for t in trainings.values()},
            epoch_rows={t: epochs.get(t, 0) for t in trainings},
            layer_rows={r.id: layers.get(r.id, 0) for r in runs},
            ops={
                r.id: len((trainings[r.training_id].workload or {}).get("ops", []))
                for r in runs
                if r.training_id is not None
            },
            metrics_missing=[
                r.id
                for r in runs
                if r.status == "done" and (r.accuracy is None or r.total_cycles is None)
            ],
        )


def assert_one_result_set_each(state: FinalState, epochs: int) -> None:
    """Every run done with its metrics, exactly one result set per training and per run."""
    assert set(state.run_statuses.values()) == {"done"}, state.run_statuses
    assert state.metrics_missing == []
    assert set(state.epoch_rows.values()) == {epochs}, state.epoch_rows
    for run_id, layers in state.layer_rows.items():
        assert layers == state.ops[run_id] > 0, (run_id, layers, state.ops[run_id])
