"""Answers of read-only requests, cached per change marker (PostgreSQL).

A read's answer is a function of its request, its caller and the data it reads. The database's
change marker (db/change_log.py) counts, per topic, the writing transactions committed so far:
an answer is kept under (request, caller, the counts of the topics it depends on) when the
marker read just before and just after computing it agree on them, that is when no transaction
writing those topics committed in between and every statement saw the same data. Any such
write changes the counts, so a cached answer is never stale: it is reused only until the next
write it could show. SQLite keeps no change log; there every answer is computed.

Some answers never change once they exist (a finished design search's sample): `lasting`
keeps them under their key alone, with no marker to read. The key must name what makes the
answer final (the search and when it finished), so every API process computes the same answer
under it and none can hold an older one.

The cache is bounded in answers and in bytes (an export can be megabytes); an answer larger
than an eighth of the byte budget is not kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar

from sqlalchemy.orm import Session

from backend.db.change_log import read_marker

T = TypeVar("T")
MISSING: Any = object()
FINAL = "final"  # the version of a lasting answer


def answer_size(answer: Any) -> int:
    """What an answer weighs against the byte budget: its body, if it has one."""
    body = answer if isinstance(answer, bytes | bytearray) else getattr(answer, "body", None)
    return len(body) if isinstance(body, bytes | bytearray) else 0


class ReadCache:
    """A bounded LRU of answers keyed by (key, version): the version is the change marker's
    counts of the topics the answer depends on. Answers are shared between threads and
    requests: cache only immutable values (encoded bytes, numbers)."""

    def __init__(self, entries: int, max_bytes: int = 64 * 2**20) -> None:
        self.entries = entries
        self.max_bytes = max_bytes
        self._answers: OrderedDict[tuple[Hashable, Hashable], Any] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()  # sync endpoints run on a thread pool
        self.hits = 0

    @property
    def enabled(self) -> bool:
        return self.entries > 0

    def get(self, key: Hashable, version: Hashable) -> Any:
        """The answer stored for `key` under `version`, else MISSING."""
        with self._lock:
            answer = self._answers.get((key, version), MISSING)
            if answer is not MISSING:
                self._answers.move_to_end((key, version))
                self.hits += 1
            return answer

    def put(self, key: Hashable, before: Hashable, after: Hashable | None, answer: Any) -> bool:
        """Keep `answer`, computed between the versions `before` and `after` (None: unread),
        if they match and it fits; whether it was kept."""
        size = answer_size(answer)
        if before != after or not self.enabled or size > self.max_bytes // 8:
            return False
        with self._lock:
            old = self._answers.pop((key, before), MISSING)
            self._bytes += size - (0 if old is MISSING else answer_size(old))
            self._answers[(key, before)] = answer
            while len(self._answers) > self.entries or self._bytes > self.max_bytes:
                _, evicted = self._answers.popitem(last=False)
                self._bytes -= answer_size(evicted)
        return True

    def answer(
        self,
        db: Session,
        key: Hashable,
        compute: Callable[[], T],
        topics: Sequence[str],
    ) -> T:
        """For code on a session: the cached answer under the current marker's counts of
        `topics` (the tables it reads, db/change_log.py), else `compute()`."""
        if not self.enabled or db.get_bind().dialect.name != "postgresql":
            return compute()
        before = read_marker(db).of(topics)
        cached = self.get(key, before)
        if cached is not MISSING:
            return cached
        value = compute()
        self.put(key, before, read_marker(db).of(topics), value)
        return value

    def lasting(self, key: Hashable, compute: Callable[[], T]) -> T:
        """The answer under `key`, which never changes once computed, else `compute()`."""
        cached = self.get(key, FINAL)
        if cached is not MISSING:
            return cached
        value = compute()
        self.put(key, FINAL, FINAL, value)
        return value
