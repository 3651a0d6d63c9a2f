import { type Kysely, sql } from "kysely";
import type { Database } from "../database.ts";

/**
 * The time of the statement that writes a usage row, as the row stores its time: ISO 8601 UTC
 * text with milliseconds, as `Date.toISOString()` writes it (both cut the microseconds off).
 */
export const STATEMENT_TIME_TEXT = `to_char(statement_timestamp() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/**
 * How far behind the database's clock a usage listing stays: the moment between a writing
 * statement's start (its rows' time) and its lock on the usage table (which the horizon looks
 * for), with room to spare.
 */
export const LISTING_MARGIN_MS = 1_000;

/**
 * Oldest write to the usage table that holds a listing back: twice the store's statement timeout
 * (30 s), past which no settle of Tollgate's is still running. An older one is someone else's (an
 * operator's psql session left open in a transaction that wrote to the table): waiting for it
 * would stop every poller, without a sign, for as long as it stays open.
 */
export const MAX_WRITER_AGE_MS = 60_000;

/**
 * The time before which every usage row is written and visible, on PostgreSQL: a paged listing
 * (and so `next_after`) goes no further (see `openPostgresStore`'s `stampUsageOnWrite`).
 *
 * Rows stamped with {@link STATEMENT_TIME_TEXT} carry the time their statement started. A
 * statement still writing the usage table holds a lock on it and shows its start in
 * `pg_stat_activity`; one that starts later stamps a later time. So every row stamped before the
 * earliest start of a writer under way (younger than {@link MAX_WRITER_AGE_MS}), and before the
 * database's clock less {@link LISTING_MARGIN_MS}, is committed, or never will be. Read in a statement before the
 * listing's own, whose snapshot is then taken after any such writer ended. Without it, settles
 * of different accounts committing in their own batches let a row commit just after a later one
 * was read, behind a poller's cursor (an admin review's poller missed up to 1 % of rows). A writer
 * of another database role, whose start `pg_stat_activity` hides (without `pg_read_all_stats`),
 * holds the listing back by the age limit while it writes: passed over, its rows could be missed.
 */
export async function readUsageListingHorizon(
  db: Kysely<Database>,
  maxWriterAgeMs: number = MAX_WRITER_AGE_MS,
): Promise<string> {
  const { rows } = await sql<{ horizon: string }>`
    select to_char(least(
      statement_timestamp() - make_interval(secs => ${LISTING_MARGIN_MS / 1000}),
      (select min(coalesce(activity.xact_start, statement_timestamp() - make_interval(secs => ${maxWriterAgeMs / 1000})))
        from pg_locks as locks
        join pg_stat_activity as activity on activity.pid = locks.pid
        where locks.relation = 'usage'::regclass and locks.mode = 'RowExclusiveLock'
          and locks.pid <> pg_backend_pid()
          and (activity.xact_start is null
            or activity.xact_start > statement_timestamp() - make_interval(secs => ${maxWriterAgeMs / 1000})))
    ) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as horizon`.execute(db);
  const horizon = rows[0]?.horizon;
  if (horizon === undefined) throw new Error("PostgreSQL did not tell the usage listing's horizon.");
  return horizon;
}
