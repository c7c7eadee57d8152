"""A cheap marker of what changed in this database, for caches of read answers (PostgreSQL).

Every table but `change_log` itself carries a statement-level trigger that, in the writing
transaction, inserts the row (topic, transaction id) into `change_log`, once per transaction
and topic. The number of such rows a statement sees per topic (their summed `weight`) is then
the number of writing transactions committed before it began: it only grows, and it grows
with each commit, never before. So an answer computed between two readings of the marker that
agree saw exactly the data every later statement sees while the marker keeps that value
(api/read_cache.py). Unlike the cluster's snapshot, the marker ignores other databases of the
cluster and writers that only hold a transaction open, and it takes no lock: writers insert
distinct rows, never update a shared counter, so they never wait for each other here.

Topics let a read ignore writes it never shows. An untagged write's topic is the table it
writes: a cached read names the tables it reads (api/app.py, `CACHED_READS`), and a test
checks each against the statements it runs. A transaction may instead say what it writes with
`note_changes_as`, before writing: a training's progress reports (`PROGRESS`, about once a
second per training, on the trainings and runs tables) and lease and worker heartbeats
(`LIVENESS`); only reads that show them depend on those topics.

The log is folded (`COMPACT`) once it holds `COMPACT_ABOVE` rows: in one statement, the rows
committed so far are replaced by one row per topic carrying their summed weight, so every
reader's count stays as it was. An advisory lock keeps two folds from racing.

Open choices: a trigger per statement rather than per row (a statement that matched no row
still counts as a write: a needless recomputation, never a stale answer); topics by table, and
the frequent writes tagged by the writer, rather than derived from the columns written (a
column list in the trigger would go stale as columns are added).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.orm import Session

PROGRESS = "progress"
LIVENESS = "liveness"
TOPIC_SETTING = "orrery.change_topic"  # a transaction's topic, set by note_changes_as
TRIGGER_FUNCTION = "orrery_note_change"
COMPACT_ABOVE = 500  # rows
COMPACT_LOCK = 0x6F72_7265_7279  # the advisory lock key of a fold

MARKER_QUERY = text("SELECT topic, sum(weight)::bigint, count(*) FROM change_log GROUP BY topic")
COMPACT = text(
    f"""
    WITH turn AS (SELECT pg_try_advisory_xact_lock({COMPACT_LOCK}) AS mine),
    gone AS (
        DELETE FROM change_log USING turn WHERE turn.mine
        RETURNING change_log.topic, change_log.weight
    )
    INSERT INTO change_log (topic, xid, weight)
    SELECT topic, pg_current_xact_id()::text::bigint, sum(weight) FROM gone GROUP BY topic
    """
)
FUNCTION_DDL = f"""
CREATE OR REPLACE FUNCTION {TRIGGER_FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO change_log (topic, xid, weight)
    VALUES (coalesce(nullif(current_setting('{TOPIC_SETTING}', true), ''), TG_TABLE_NAME),
            pg_current_xact_id()::text::bigint, 1)
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$
"""


@dataclass(frozen=True)
class Marker:
    """Per topic, the writing transactions committed (as one statement saw them)."""

    counts: tuple[tuple[str, int], ...]
    rows: int  # rows in the log: when to fold it

    @classmethod
    def from_rows(cls, rows: Iterable[tuple[str, int, int]]) -> Marker:
        rows = sorted(rows)
        return cls(tuple((topic, total) for topic, total, _ in rows), sum(n for *_, n in rows))

    def of(self, topics: Iterable[str]) -> tuple[int, ...]:
        """The counts of `topics`: equal for two markers when none of them changed between."""
        counts = dict(self.counts)
        return tuple(counts.get(topic, 0) for topic in topics)


def read_marker(db: Session) -> Marker:
    return Marker.from_rows(db.execute(MARKER_QUERY))


def note_changes_as(db: Session, topic: str) -> None:
    """Log this transaction's further writes under `topic` (PostgreSQL; elsewhere nothing is
    logged)."""
    if db.get_bind().dialect.name == "postgresql":
        db.execute(text("SELECT set_config(:name, :topic, true)"), {"name": TOPIC_SETTING,
                                                                   "topic": topic})  # fmt: skip


def watch(table: str) -> str:
    """DDL: log every write to `table` (FUNCTION_DDL must exist)."""
    return (
        f"CREATE TRIGGER note_change AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {table} "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {TRIGGER_FUNCTION}()"
    )


def unwatch(table: str) -> str:
    return f"DROP TRIGGER IF EXISTS note_change ON {table}"
