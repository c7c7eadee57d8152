"""A cheap marker of what changed in this database, for caches of read answers (PostgreSQL).

Every table but `change_log` itself carries a trigger that, in the writing transaction,
inserts the row (topic, transaction id) into `change_log`, once per transaction and topic.
The number of such rows a statement sees per topic (their summed `weight`) is then the number
of writing transactions committed before it began: it only grows, and it grows with each
commit, never before. So an answer computed between two readings of the marker that
agree saw exactly the data every later statement sees while the marker keeps that value
(api/read_cache.py). Unlike the cluster's snapshot, the marker ignores other databases of the
cluster and writers that only hold a transaction open, and it takes no lock: writers insert
distinct rows, never update a shared counter, so they never wait for each other here.

Topics let a read ignore writes it never shows. A write's topic is the table it writes: a
cached read names the tables it reads (its route declares them, api/cached_reads.py), and a
test checks each against the statements it runs. Some columns change often and are shown by
few reads: a training's progress (about once a second per training, on the trainings and runs
tables) and lease and worker heartbeats. `VOLATILE` names them with their topic (`PROGRESS`,
`LIVENESS`); on those tables a row-level trigger on UPDATE logs the topic of each such column
that changed, and the table's own topic only when any other column changed. Writers say
nothing: every process writing the database is covered the same way, and no service code knows
the log exists.

The log is folded (`COMPACT`) once it holds `COMPACT_ABOVE` rows: in one statement, the rows
committed so far are replaced by one row per topic carrying their summed weight, so every
reader's count stays as it was. An advisory lock keeps two folds from racing.

Open choices: a trigger per statement rather than per row where no column is volatile (a
statement that matched no row still counts as a write: a needless recomputation, never a stale
answer); on the tables with volatile columns, a trigger per updated row, comparing the row's
other columns as one JSON value, so a column added later counts as data without a list to keep
(the safe side: a volatile column not yet named in `VOLATILE` only costs recomputations).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.orm import Session

PROGRESS = "progress"
LIVENESS = "liveness"
# The columns whose updates are logged under a topic of their own, per table.
VOLATILE: dict[str, dict[str, str]] = {
    "trainings": {"progress": PROGRESS, "heartbeat_at": LIVENESS},
    "runs": {"progress": PROGRESS},
    "search_chunks": {"heartbeat_at": LIVENESS},
    "worker_heartbeats": {"beat_at": LIVENESS},
}
TRIGGER_FUNCTION = "orrery_note_change"
UPDATE_TRIGGER_FUNCTION = "orrery_note_update"
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
    VALUES (TG_TABLE_NAME, pg_current_xact_id()::text::bigint, 1)
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$
"""
# Its arguments: column, topic, column, topic, ... (a table's VOLATILE columns).
UPDATE_FUNCTION_DDL = f"""
CREATE OR REPLACE FUNCTION {UPDATE_TRIGGER_FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    old_rest jsonb := to_jsonb(OLD);
    new_rest jsonb := to_jsonb(NEW);
    writer bigint := pg_current_xact_id()::text::bigint;
    i integer := 0;
BEGIN
    WHILE i < TG_NARGS LOOP
        IF old_rest -> TG_ARGV[i] IS DISTINCT FROM new_rest -> TG_ARGV[i] THEN
            INSERT INTO change_log (topic, xid, weight) VALUES (TG_ARGV[i + 1], writer, 1)
            ON CONFLICT DO NOTHING;
        END IF;
        old_rest := old_rest - TG_ARGV[i];
        new_rest := new_rest - TG_ARGV[i];
        i := i + 2;
    END LOOP;
    IF old_rest IS DISTINCT FROM new_rest THEN
        INSERT INTO change_log (topic, xid, weight) VALUES (TG_TABLE_NAME, writer, 1)
        ON CONFLICT DO NOTHING;
    END IF;
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


def watch(table: str) -> str:
    """DDL: log every write to `table` (FUNCTION_DDL must exist)."""
    return (
        f"CREATE TRIGGER note_change AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {table} "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {TRIGGER_FUNCTION}()"
    )


def unwatch(table: str) -> str:
    return f"DROP TRIGGER IF EXISTS note_change ON {table}"


def watch_volatile(table: str) -> list[str]:
    """DDL: log `table`'s updates by the columns they change (its `VOLATILE` entry), its other
    writes as `watch` does (UPDATE_FUNCTION_DDL must exist)."""
    arguments = ", ".join(f"'{name}'" for pair in VOLATILE[table].items() for name in pair)
    return [
        unwatch(table),
        f"CREATE TRIGGER note_change AFTER INSERT OR DELETE OR TRUNCATE ON {table} "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {TRIGGER_FUNCTION}()",
        f"CREATE TRIGGER note_update AFTER UPDATE ON {table} "
        f"FOR EACH ROW WHEN (OLD.* IS DISTINCT FROM NEW.*) "
        f"EXECUTE FUNCTION {UPDATE_TRIGGER_FUNCTION}({arguments})",
    ]


def unwatch_volatile(table: str) -> list[str]:
    """DDL: back to `watch(table)`."""
    return [f"DROP TRIGGER IF EXISTS note_update ON {table}", unwatch(table), watch(table)]
