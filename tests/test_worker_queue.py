"""The Celery wiring: long-job settings, and a real worker consuming from Redis by task name."""

from pathlib import Path

from backend.queue import TaskName, make_celery
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


def test_real_worker_runs_a_task_sent_by_name(redis_db_url: str, tmp_path: Path) -> None:
    env = orrery_env(
        ORRERY_DATA_DIR=str(tmp_path),
        ORRERY_BROKER_URL=redis_db_url,
        ORRERY_RESULT_BACKEND=redis_db_url,
    )
    worker = start_worker(env, cwd=tmp_path)
    client = make_celery(
        Settings(data_dir=tmp_path, broker_url=redis_db_url, result_backend=redis_db_url)
    )
    try:
        answer = client.send_task(TaskName.PING).get(timeout=60)
    finally:
        output = stop_process(worker)
    assert answer["pid"] != 0 and answer["host"], output
    assert worker.pid != answer["pid"]  # a pool process ran it, not the test
