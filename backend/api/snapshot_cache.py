"""Answers of read-only endpoints, cached per database snapshot (PostgreSQL).

A PostgreSQL snapshot (xmin, xmax and the ids of transactions in progress) fixes which
transactions' writes a statement sees, so two statements under equal snapshots see identical
data. A read endpoint's answer is a function of its request, its user and that data: it is
cached under (request, user, snapshot) when the snapshots taken just before and just after
computing it are equal, that is when no transaction ended in between and every statement saw
the same data. Any commit, anywhere in the cluster, changes the snapshot, so a cached answer is
never stale: it is reused only until the next write. SQLite has no such snapshot; there every
answer is computed.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from sqlalchemy import text
from sqlalchemy.orm import Session

_SNAPSHOT = text("SELECT pg_current_snapshot()::text")
T = TypeVar("T")
_MISSING = object()


class SnapshotCache:
    """A bounded LRU of answers keyed by (request key, database snapshot). Answers are shared
    between threads: cache only immutable values (encoded bytes, numbers)."""

    def __init__(self, entries: int) -> None:
        self.entries = entries
        self._answers: OrderedDict[tuple[Hashable, str], Any] = OrderedDict()
        self._lock = threading.Lock()  # sync endpoints run on a thread pool
        self.hits = 0

    def answer(self, db: Session, key: Hashable, compute: Callable[[], T]) -> T:
        """The cached answer for `key` under the current snapshot, else `compute()`."""
        if self.entries <= 0 or db.get_bind().dialect.name != "postgresql":
            return compute()
        before = db.scalar(_SNAPSHOT)
        with self._lock:
            cached = self._answers.get((key, before), _MISSING)
            if cached is not _MISSING:
                self._answers.move_to_end((key, before))
                self.hits += 1
                return cached
        value = compute()
        if db.scalar(_SNAPSHOT) == before:
            with self._lock:
                self._answers[(key, before)] = value
                while len(self._answers) > self.entries:
                    self._answers.popitem(last=False)
        return value
