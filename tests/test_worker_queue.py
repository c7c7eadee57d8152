"""The Celery wiring: long-job settings, and a real worker consuming from Redis by task name."""

import multiprocessing
import os
import sqlite3
from pathlib import Path
from typing import Any

from backend.delivery.queue import QUEUE, TaskName, declare_queue, make_celery
from backend.settings import Settings
from tests.conftest import orrery_env, start_worker, stop_process


def test_long_job_settings(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, broker_url="redis://127.0.0.1:6379/0")
    conf = make_celery(settings).conf
    assert conf.task_acks_late is True
    assert conf.task_reject_on_worker_lost is True
    assert conf.worker_prefetch_multiplier == 1
    assert conf.accept_content == ["json"]
    assert conf.task_serializer == "json"
    assert conf.broker_transport_options["visibility_timeout"] > conf.task_time_limit


def test_api_side_never_imports_torch_or_the_worker(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = (
        "import sys; from backend.api.app import create_app; create_app(); "
        "bad = [m for m in sys.modules if m == 'torch' or m.split('.')[0] == 'worker']; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=orrery_env(ORRERY_DATA_DIR=str(tmp_path)),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _start_pinged(redis_db_url: str, tmp_path: Path, **extra: str) -> tuple[Any, dict]:
    """A real worker with this environment, and its answer to a ping sent by task name."""
    env = orrery_env(
        ORRERY_DATA_DIR=str(tmp_path),
        ORRERY_BROKER_URL=redis_db_url,
        ORRERY_RESULT_BACKEND=redis_db_url,
        **extra,
    )
    worker = start_worker(env, cwd=tmp_path)
    client = make_celery(
        Settings(data_dir=tmp_path, broker_url=redis_db_url, result_backend=redis_db_url)
    )
    try:
        return worker, client.send_task(TaskName.PING).get(timeout=60)
    except BaseException:
        stop_process(worker)
        raise


def test_real_worker_runs_a_task_sent_by_name(redis_db_url: str, tmp_path: Path) -> None:
    worker, answer = _start_pinged(redis_db_url, tmp_path)
    output = stop_process(worker)
    assert answer["pid"] != 0 and answer["host"], output
    assert worker.pid != answer["pid"]  # a pool process ran it, not the test


def _niceness(pid: int) -> int:
    """A process's niceness: field 19 of /proc/PID/stat, the 17th after the command's ')'."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])


def test_the_worker_yields_the_cpu_to_the_api(redis_db_url: str, tmp_path: Path) -> None:
    """The training processes run at ORRERY_WORKER_NICE (10 unless set), never below the
    niceness they were started with; 0 leaves them as started."""
    own = os.getpriority(os.PRIO_PROCESS, 0)
    seen = {}
    for setting in ("", "0"):
        extra = {"ORRERY_WORKER_NICE": setting} if setting else {}
        worker, answer = _start_pinged(redis_db_url, tmp_path, **extra)
        try:
            seen[setting or "default"] = (_niceness(worker.pid), _niceness(answer["pid"]))
        finally:
            stop_process(worker)
    assert seen == {"default": (max(own, 10),) * 2, "0": (own, own)}


def test_yielding_the_cpu_never_lowers_the_niceness_a_process_was_given() -> None:
    import subprocess
    import sys

    code = (
        "import os; from worker.cpu_priority import yield_cpu; "
        "print(yield_cpu(5), yield_cpu(3), os.getpriority(os.PRIO_PROCESS, 0))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=orrery_env(), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    own = os.getpriority(os.PRIO_PROCESS, 0)
    assert done.stdout.split() == [str(max(own, 5))] * 3


def _publish_at_once(broker_urls: list[str], start: Any, outcomes: Any) -> None:
    """One of several processes: for each broker, wait for the others, then publish."""
    from kombu import Connection

    for broker_url in broker_urls:
        start.wait()
        try:
            with Connection(broker_url) as connection:
                connection.SimpleQueue(QUEUE).put({"n": 1})
            outcomes.put("ok")
        except Exception as exc:  # the outcome is what the test looks at
            outcomes.put(f"{type(exc).__name__}: {exc}")


def test_processes_using_a_declared_sqlite_queue_for_the_first_time_at_once_all_succeed(
    tmp_path: Path,
) -> None:
    """The embedded broker's queue is declared before the API and the worker start: kombu's SQL
    transport creates a queue on first use under a lock that holds only within one process,
    and without the declaration 8 of 120 such first publishes failed (IntegrityError on the
    queue's name, OperationalError), one of them a user's first submission. (Spawned, not
    forked: a fork of the multi-threaded test process can deadlock.)"""
    databases = [tmp_path / f"broker{attempt}.db" for attempt in range(8)]
    broker_urls = [f"sqla+sqlite:///{database}" for database in databases]
    for broker_url in broker_urls:
        declare_queue(broker_url)
    context = multiprocessing.get_context("spawn")
    start, outcomes = context.Barrier(4, timeout=120), context.Queue()
    processes = [
        context.Process(target=_publish_at_once, args=(broker_urls, start, outcomes))
        for _ in range(4)
    ]
    for process in processes:
        process.start()
    try:
        results = [outcomes.get(timeout=180) for _ in range(4 * len(broker_urls))]
    finally:
        for process in processes:
            process.join(30)
            if process.is_alive():
                process.kill()
    assert results == ["ok"] * len(results)
    for database in databases:
        with sqlite3.connect(database) as db:
            queues = db.execute("SELECT name FROM kombu_queue").fetchall()
            (messages,) = db.execute("SELECT count(*) FROM kombu_message").fetchone()
        assert queues == [(QUEUE,)] and messages == 4
