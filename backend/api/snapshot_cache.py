"""Answers of read-only requests, cached per database snapshot (PostgreSQL).

A PostgreSQL snapshot (xmin, xmax and the ids of transactions in progress) fixes which
transactions' writes a statement sees, so two statements under equal snapshots see identical
data. A read's answer is a function of its request, its caller and that data: it is cached
under (request, caller, snapshot) when the snapshots taken just before and just after computing
it are equal, that is when no transaction began writing or ended in between and every statement
saw the same data. Any write, anywhere in the cluster, changes the snapshot, so a cached answer
is never stale: it is reused only until the next write. SQLite has no such snapshot; there every
answer is computed.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from sqlalchemy import text
from sqlalchemy.orm import Session

SNAPSHOT_QUERY = text("SELECT pg_current_snapshot()::text")
T = TypeVar("T")
MISSING: Any = object()


class SnapshotCache:
    """A bounded LRU of answers keyed by (key, database snapshot). Answers are shared between
    threads and requests: cache only immutable values (encoded bytes, numbers)."""

    def __init__(self, entries: int) -> None:
        self.entries = entries
        self._answers: OrderedDict[tuple[Hashable, str], Any] = OrderedDict()
        self._lock = threading.Lock()  # sync endpoints run on a thread pool
        self.hits = 0

    @property
    def enabled(self) -> bool:
        return self.entries > 0

    def get(self, key: Hashable, snapshot: str) -> Any:
        """The answer stored for `key` under `snapshot`, else MISSING."""
        with self._lock:
            answer = self._answers.get((key, snapshot), MISSING)
            if answer is not MISSING:
                self._answers.move_to_end((key, snapshot))
                self.hits += 1
            return answer

    def put(self, key: Hashable, before: str, after: str | None, answer: Any) -> bool:
        """Keep `answer`, computed between the snapshots `before` and `after` (None: unread),
        if they match; whether it was kept."""
        if before != after or not self.enabled:
            return False
        with self._lock:
            self._answers[(key, before)] = answer
            while len(self._answers) > self.entries:
                self._answers.popitem(last=False)
        return True

    def answer(self, db: Session, key: Hashable, compute: Callable[[], T]) -> T:
        """For code on a session: the cached answer under the current snapshot, else
        `compute()`."""
        if not self.enabled or db.get_bind().dialect.name != "postgresql":
            return compute()
        before = db.scalar(SNAPSHOT_QUERY)
        cached = self.get(key, before)
        if cached is not MISSING:
            return cached
        value = compute()
        self.put(key, before, db.scalar(SNAPSHOT_QUERY), value)
        return value
