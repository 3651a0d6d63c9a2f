import { type Kysely, sql } from "kysely";
import type { Database } from "../database.ts";
import type { CreatedTable } from "../kysely-store.ts";
import { MAX_WRITER_AGE_MS } from "./usage-stamps.ts";

/**
 * The first key of the advisory lock that a transaction creating an account or a key holds
 * ("TGcr"); the second is the table's oid, so each table (of each schema) has a lock of its own.
 */
export const CREATION_LOCK_CLASS = 0x54_47_63_72;

/**
 * Announces a creation to paged listings of `table` (see {@link readCreationHorizon}): the first
 * statement of the transaction that inserts the row, which its next statement stamps with its own
 * start (`STATEMENT_TIME_TEXT`), so later than the lock is held. Shared: creations never wait for
 * each other, and nothing takes it exclusively.
 */
export async function announceCreation(transaction: Kysely<Database>, table: CreatedTable): Promise<void> {
  await sql`select pg_advisory_xact_lock_shared(${CREATION_LOCK_CLASS}::int4, ${table}::regclass::oid::int4)`.execute(
    transaction,
  );
}

/**
 * The time before which every account (or key, by `table`) of a server's PostgreSQL store is
 * committed and visible, or never will be: a paged listing (and so `next_after`) goes no further.
 *
 * Rows are stamped with the database's time, by a statement that starts after its transaction
 * took the lock of {@link announceCreation}. A creation holding it when this reads `pg_locks`
 * began its transaction no earlier than the horizon, and stamps later still; one that takes it
 * afterwards stamps later than this statement's start. So a row stamped before the horizon is
 * committed once this statement ends (a lock is let go after the commit is visible), and the
 * listing, read in a statement after this one, sees it. Without it (and without the stamps: each
 * replica stamped with its own clock) a follower of `next_after` missed accounts and keys made on a
 * replica whose clock ran behind (301 of 600 accounts, 75 of 600 keys, with a clock 2 s slow), and
 * rows of creations committing in an order other than their stamps'.
 *
 * Unlike the usage listing's horizon (usage-stamps.ts) it needs no margin: the lock is held
 * before the stamp is taken, not only once the row is being written. A transaction older than
 * {@link MAX_WRITER_AGE_MS} (a connection stalled in the middle of one) no longer holds listings
 * back: past the statement timeout twice over, it is not a creation that will still commit. A
 * creation by another database role, whose transaction start PostgreSQL does not show this one
 * (without `pg_read_all_stats`), holds listings back by that limit as long as it runs: it was
 * not seen at all, and a CLI connecting as another role than the servers could be passed.
 */
export async function readCreationHorizon(
  db: Kysely<Database>,
  table: CreatedTable,
  maxWriterAgeMs: number = MAX_WRITER_AGE_MS,
): Promise<string> {
  const { rows } = await sql<{ horizon: string }>`
    select to_char(least(
      statement_timestamp(),
      (select min(coalesce(activity.xact_start, statement_timestamp() - make_interval(secs => ${maxWriterAgeMs / 1000})))
        from pg_locks as locks
        join pg_stat_activity as activity on activity.pid = locks.pid
        where locks.locktype = 'advisory'
          and locks.database = (select oid from pg_database where datname = current_database())
          and locks.classid = ${CREATION_LOCK_CLASS}::int4::oid
          and locks.objid = ${table}::regclass::oid
          and locks.objsubid = 2
          and (activity.xact_start is null
            or activity.xact_start > statement_timestamp() - make_interval(secs => ${maxWriterAgeMs / 1000})))
    ) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as horizon`.execute(db);
  const horizon = rows[0]?.horizon;
  if (horizon === undefined) throw new Error(`PostgreSQL did not tell the ${table} listing's horizon.`);
  return horizon;
}

/**
 * The first key of the advisory lock that a transaction creating an account holds on its name
 * folded to lower case ("TGnm"); the second is the name's hash.
 */
const ACCOUNT_NAME_LOCK_CLASS = 0x54_47_6e_6d;

/**
 * Makes transactions that create accounts named the same but for case take turns (an exclusive
 * advisory lock on the folded name, until the transaction ends): the second then reads the
 * first's row and refuses its name, where both had found none and both inserted. Names whose
 * hashes collide wait for each other needlessly, and only as long as one creation takes.
 */
export async function lockAccountName(transaction: Kysely<Database>, foldedName: string): Promise<void> {
  await sql`select pg_advisory_xact_lock(${ACCOUNT_NAME_LOCK_CLASS}::int4, hashtext(${foldedName}))`.execute(
    transaction,
  );
}
