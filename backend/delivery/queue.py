"""Celery configuration shared by the worker and the API's client.

The API only *sends* tasks, by name, through a client app built from the same configuration; it
never imports the worker package (and so never imports torch).
"""

from __future__ import annotations

from typing import Any

from celery import Celery
from kombu import Connection, Exchange, Queue

from backend.settings import Settings

QUEUE = "orrery"


class TaskName:
    """Names of the worker's tasks: the only thing the API knows about them."""

    PING = "orrery.ping"
    TRAIN = "orrery.train"
    SEARCH_CHUNK = "orrery.search.chunk"  # evaluate one chunk of a design search


def celery_config(settings: Settings) -> dict[str, Any]:
    # Training jobs run for minutes to hours, so a message is acknowledged only after the task
    # finished (acks_late) and goes back to the queue if the worker process dies
    # (reject_on_worker_lost). The broker must not hand an unacknowledged message to another
    # worker while the first is still busy with it: Redis's visibility timeout is therefore
    # longer than the hard time limit of any task.
    visibility_timeout = settings.task_time_limit + 3600
    redis_options = {"visibility_timeout": visibility_timeout}
    broker_is_redis = settings.effective_broker_url.startswith(("redis://", "rediss://"))
    backend_is_redis = settings.effective_result_backend.startswith(("redis://", "rediss://"))
    return {
        "broker_url": settings.effective_broker_url,
        "result_backend": settings.effective_result_backend,
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "result_accept_content": ["json"],
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "task_time_limit": settings.task_time_limit,
        "task_soft_time_limit": settings.task_time_limit - 30,
        "task_track_started": True,
        "task_default_queue": QUEUE,
        # Only Redis has a visibility timeout; other transports pass options to their driver.
        "broker_transport_options": redis_options if broker_is_redis else {},
        "result_backend_transport_options": redis_options if backend_is_redis else {},
        "broker_connection_retry_on_startup": True,
        "result_expires": 7 * 24 * 3600,
        "worker_hijack_root_logger": False,
        "worker_max_tasks_per_child": 50,
    }


def make_celery(settings: Settings, name: str = "orrery", sender: bool = False) -> Celery:
    """The Celery app; a `sender` (the API) gives up on an unreachable Redis broker quickly."""
    app = Celery(name)
    config = celery_config(settings)
    if sender and config["broker_transport_options"]:
        config["broker_transport_options"] = {
            **config["broker_transport_options"],
            "socket_connect_timeout": settings.broker_connect_timeout,
        }
    app.conf.update(config)
    return app


def declare_queue(broker_url: str) -> None:
    """Create the task queue on a SQL broker (the embedded defaults' SQLite) before the API and
    the worker first use it. kombu's SQL transport creates a queue's row on first use, guarded
    by a lock that only works within one process: an API and a worker using the queue for the
    first time at once could both insert it, and one failed (a UNIQUE constraint error, seen as
    a first submission refused with "the task queue is unreachable"). Other brokers need
    nothing here."""
    if not broker_url.startswith("sqla+"):
        return
    with Connection(broker_url) as connection:
        Queue(QUEUE, Exchange(QUEUE), routing_key=QUEUE)(connection.default_channel).declare()
