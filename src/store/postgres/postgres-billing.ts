import { CompiledQuery, type Insertable, type Kysely } from "kysely";
import { capUsageCost, toReservationRow, toUsageRow } from "../billing-rows.ts";
import { MAX_BIGINT_COLUMN, readBigInt } from "../column-values.ts";
import type { Database, ReservationsTable, UsageTable } from "../database.ts";
import { refuseBeyondAnyBalance } from "../reserve-settle-shared.ts";
import type { Reservation, ReserveResult, Store, UsageRecord } from "../store.ts";
import { createBatcher } from "./postgres-group-commit.ts";
import { STATEMENT_TIME_TEXT } from "./usage-stamps.ts";

/**
 * Reserve and settle on PostgreSQL, group-committed: the reserves (and the settles) of an account
 * that a replica receives while its previous batch for the account is in flight go out together
 * as one statement (data-modifying CTEs over arrays) in its own implicit transaction, so the
 * account's row is locked and committed once per batch. A lone operation is one statement too.
 * Before, every request paid nine round trips (reserve: begin, update, insert, commit; settle:
 * begin, insert, delete, update, commit), each costing the server tens of microseconds of CPU
 * (mostly the loopback write that wakes the database), and held its account's row across several
 * of them plus a commit: the requests of one account queued behind each other's commits, about a
 * thousand a second at most on this machine however many replicas served them.
 *
 * What they do (the store conformance tests, which SQLite's batch passes too, run here):
 * - reserve: the conditional update re-checks `balance - reserved >= amount` on the row's latest
 *   version once it holds the row (READ COMMITTED), so concurrent reserves never overspend; the
 *   reservation row is inserted only when the update took the money. A duplicate id fails the
 *   whole statement. A batch takes each account's total when it fits (then each reservation fits,
 *   in any order); the reservations of an account whose total does not fit are tried one at a
 *   time, in order, as they would have been alone.
 * - settle: nothing happens when a usage row with the id exists (the answer is then the charge it
 *   records), or when the reservation belongs to another account (which then throws). The reservation row is locked first, then the account
 *   row (the order of `releaseReservations` too, so they never deadlock), the charge capped at
 *   what the account has beside its other reservations, and the usage row written with what was
 *   charged. A second settle of the same id racing the first fails on the usage row's primary
 *   key, which undoes its whole statement: it charges nothing. A batch charges in full the
 *   accounts whose balance, less their other reservations, covers its costs less what its
 *   reservations give back (a serial order in which the releases come first); the rest settle one
 *   at a time.
 */
export function createPostgresBilling(
  db: Kysely<Database>,
  options: {
    /**
     * Usage rows take the time of the statement that writes them (usage-stamps.ts), not the
     * record's `createdAt`: what makes a paged listing's horizon hold.
     */
    stampOnWrite?: boolean;
  } = {},
): Pick<Store, "reserve" | "settle"> {
  const stampOnWrite = options.stampOnWrite === true;
  /** A usage row's value for a parameter of SETTLE; no time when the statement stamps the row (its coalesce). */
  const settleValue = (row: Insertable<UsageTable>, column: (typeof SETTLE_COLUMNS)[number]) =>
    stampOnWrite && column === "created_at" ? null : (row[column] ?? null);
  async function reserveOne(row: Insertable<ReservationsTable>): Promise<ReserveResult> {
    const result = await db.executeQuery<{ reserved: boolean; found: boolean }>(
      CompiledQuery.raw(
        RESERVE,
        RESERVATION_COLUMNS.map((column) => row[column]),
      ),
    );
    const outcome = result.rows[0];
    if (outcome?.reserved === true) return "reserved";
    return outcome?.found === true ? "insufficient_balance" : "account_not_found";
  }

  async function settleOne(usage: UsageRecord, row: Insertable<UsageTable>): Promise<bigint> {
    let outcome: SettleOutcome | undefined;
    try {
      const result = await db.executeQuery<SettleOutcome>(
        CompiledQuery.raw(
          SETTLE,
          SETTLE_COLUMNS.map((column) => settleValue(row, column)),
        ),
      );
      outcome = result.rows[0];
    } catch (error) {
      // A settle of the same id committed while this one ran: it is the one that counts.
      if (!isUniqueViolation(error, "usage_pkey")) throw error;
      const recorded = await db
        .selectFrom("usage")
        .select("cost_nano")
        .where("id", "=", usage.id)
        .executeTakeFirst();
      return recorded === undefined ? 0n : readBigInt(recorded.cost_nano);
    }
    if (outcome === undefined) return 0n;
    // Settled before: what that settle charged (a retry after a lost answer reports it).
    if (outcome.settled_before) return outcome.recorded === null ? 0n : readBigInt(outcome.recorded);
    if (outcome.foreign_owner) {
      throw new Error(
        `Reservation ${usage.id} belongs to another account than its usage row; nothing was settled.`,
      );
    }
    if (outcome.charged === null) {
      throw new Error(`No account has the id ${usage.accountId}; nothing was settled.`);
    }
    return readBigInt(outcome.charged);
  }

  const reserves = createBatcher<Insertable<ReservationsTable>, ReserveResult>({
    one: reserveOne,
    async many(rows) {
      const result = await db.executeQuery<{ id: string }>(
        CompiledQuery.raw(
          RESERVE_MANY,
          RESERVATION_COLUMNS.map((column) => rows.map((row) => row[column])),
        ),
      );
      const reserved = new Set(result.rows.map((row) => row.id));
      return rows.map((row) => (reserved.has(row.id) ? "reserved" : undefined));
    },
  });

  const settles = createBatcher<{ usage: UsageRecord; row: Insertable<UsageTable> }, bigint>({
    one: ({ usage, row }) => settleOne(usage, row),
    async many(items) {
      const rows = items.map((item) => item.row);
      const columns = SETTLE_COLUMNS.map((column) => rows.map((row) => settleValue(row, column)));
      const result = await db.executeQuery<{ id: string }>(CompiledQuery.raw(SETTLE_MANY, columns));
      const settled = new Set(result.rows.map((row) => row.id));
      return items.map(({ usage }) => (settled.has(usage.id) ? usage.costNano : undefined));
    },
  });

  return {
    async reserve(reservation: Reservation): Promise<ReserveResult> {
      if (reservation.amountNano < 0n) throw new RangeError("A reservation's amount must be zero or more.");
      // Beyond what a bigint parameter holds: refused without failing the statement (or its batch).
      if (reservation.amountNano > MAX_BIGINT_COLUMN)
        return await refuseBeyondAnyBalance(db, reservation.accountId);
      const row = toReservationRow(reservation);
      return await reserves.run(row.account_id, row.id, row);
    },

    async settle(record: UsageRecord): Promise<bigint> {
      if (record.costNano < 0n) throw new RangeError("A usage row's cost must be zero or more.");
      const usage = capUsageCost(record);
      return await settles.run(usage.accountId, usage.id, { usage, row: toUsageRow(usage) });
    },
  };
}

/** The reservation columns in the order of the parameters of {@link RESERVE} and {@link RESERVE_MANY}. */
const RESERVATION_COLUMNS = [
  "id",
  "request_id",
  "account_id",
  "key_public_id",
  "model",
  "amount_nano",
  "replica_id",
  "lease_expires_at",
  "created_at",
] as const satisfies readonly (keyof ReservationsTable)[];

/** The usage columns in the order of the parameters of {@link SETTLE} and {@link SETTLE_MANY}. */
const SETTLE_COLUMNS = [
  "id",
  "account_id",
  "cost_nano",
  "request_id",
  "key_public_id",
  "model",
  "prompt_tokens",
  "completion_tokens",
  "finish_reason",
  "error_code",
  "user",
  "queue_ms",
  "first_token_ms",
  "total_ms",
  "estimated",
  "created_at",
] as const satisfies readonly (keyof UsageTable)[];

interface SettleOutcome {
  settled_before: boolean;
  /** What the settle before charged (its usage row's cost), when there was one. */
  recorded: bigint | string | null;
  foreign_owner: boolean;
  /** What was charged; `null` when nothing was (no such account, or nothing to do). */
  charged: bigint | string | null;
}

function isUniqueViolation(error: unknown, constraint: string): boolean {
  return (
    error instanceof Error &&
    "code" in error &&
    error.code === "23505" &&
    "constraint" in error &&
    error.constraint === constraint
  );
}

/** Parameters in the order of {@link RESERVATION_COLUMNS}: $1 id ... $6 amount ... $9 created. */
const RESERVE = `
with set_aside as (
  update accounts set reserved_nano = reserved_nano + $6::bigint
  where id = $3::text and balance_nano - reserved_nano >= $6::bigint
  returning id
), inserted as (
  insert into reservations
    (id, request_id, account_id, key_public_id, model, amount_nano, replica_id, lease_expires_at, created_at)
  select $1::text, $2::text, $3::text, $4::text, $5::text, $6::bigint, $7::text, $8::text, $9::text
  from set_aside
  returning id
)
select exists (select 1 from inserted) as reserved, exists (select 1 from accounts where id = $3::text) as found`;

/**
 * Parameters in the order of {@link SETTLE_COLUMNS}: $1 id, $2 account, $3 cost, then the usage
 * row's other columns.
 *
 * `account` depends on `released` so that the reservation row is locked (deleted) before the
 * account row. The charge is `least(cost, available)`, where available is the balance less the
 * other reservations: a cost within its reservation always fits, a dearer one is capped.
 */
const SETTLE = `
with settled_before as (
  select cost_nano from usage where id = $1::text
), foreign_owner as (
  select 1 from reservations where id = $1::text and account_id <> $2::text
), released as (
  delete from reservations
  where id = $1::text and account_id = $2::text
    and not exists (select 1 from settled_before) and not exists (select 1 from foreign_owner)
  returning amount_nano
), released_total as (
  select coalesce(sum(amount_nano), 0)::bigint as amount from released
), account as (
  select balance_nano, reserved_nano from accounts
  where id = $2::text and (select amount from released_total) >= 0
    and not exists (select 1 from settled_before) and not exists (select 1 from foreign_owner)
  for no key update
), settlement as (
  select
    least($3::bigint, greatest(0::bigint, account.balance_nano - account.reserved_nano + released_total.amount)) as charge,
    released_total.amount as released
  from account, released_total
), charged as (
  update accounts
  set balance_nano = balance_nano - settlement.charge, reserved_nano = reserved_nano - settlement.released,
    spent_nano = case when spent_nano > 9223372036854775807 - settlement.charge then 9223372036854775807
      else spent_nano + settlement.charge end
  from settlement
  where accounts.id = $2::text
  returning settlement.charge
), inserted as (
  insert into usage
    (id, request_id, account_id, key_public_id, model, prompt_tokens, completion_tokens, cost_nano,
     finish_reason, error_code, "user", queue_ms, first_token_ms, total_ms, estimated, created_at)
  select $1::text, $4::text, $2::text, $5::text, $6::text, $7::bigint, $8::bigint, charged.charge,
    $9::text, $10::text, $11::text, $12::bigint, $13::bigint, $14::bigint, $15::bigint,
    coalesce($16::text, ${STATEMENT_TIME_TEXT})
  from charged
  returning id
)
select
  exists (select 1 from settled_before) as settled_before,
  (select cost_nano from settled_before) as recorded,
  exists (select 1 from foreign_owner) as foreign_owner,
  (select charge from charged where exists (select 1 from inserted)) as charged`;

/** {@link RESERVE} for many reservations: arrays of the same columns, in the same order. */
const RESERVE_MANY = `
with input as (
  select * from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::text[], $8::text[], $9::text[])
    as input (id, request_id, account_id, key_public_id, model, amount_nano, replica_id, lease_expires_at, created_at)
), totals as (
  select account_id, sum(amount_nano)::bigint as amount from input group by account_id
), locked as (
  select accounts.id from accounts join totals on totals.account_id = accounts.id
  order by accounts.id
  for no key update of accounts
), set_aside as (
  update accounts set reserved_nano = reserved_nano + totals.amount
  from totals
  where accounts.id = totals.account_id
    and accounts.balance_nano - accounts.reserved_nano >= totals.amount
    and (select count(*) from locked) >= 0
  returning accounts.id
), inserted as (
  insert into reservations
    (id, request_id, account_id, key_public_id, model, amount_nano, replica_id, lease_expires_at, created_at)
  select id, request_id, account_id, key_public_id, model, amount_nano, replica_id, lease_expires_at, created_at
  from input
  where account_id in (select id from set_aside)
  returning id
)
select id from inserted`;

/**
 * {@link SETTLE} for many usage rows (arrays of the same columns, in the same order), charging in full the accounts whose total fits: their balance less their
 * other reservations covers the batch's costs less what its reservations give back. Rows of other
 * accounts, rows settled before and reservations of another account are left alone. Reservation
 * rows are locked before account rows, each in id order, so that batches of other replicas (and
 * `releaseReservations`) never deadlock with it.
 */
const SETTLE_MANY = `
with input as (
  select * from unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::bigint[],
      $8::bigint[], $9::text[], $10::text[], $11::text[], $12::bigint[], $13::bigint[], $14::bigint[],
      $15::bigint[], $16::text[])
    as input (id, account_id, cost_nano, request_id, key_public_id, model, prompt_tokens, completion_tokens,
      finish_reason, error_code, "user", queue_ms, first_token_ms, total_ms, estimated, created_at)
), todo as (
  select input.* from input
  where not exists (select 1 from usage where usage.id = input.id)
    and not exists (
      select 1 from reservations where reservations.id = input.id and reservations.account_id <> input.account_id
    )
), held as (
  select reservations.id, reservations.amount_nano from reservations
  join todo on todo.id = reservations.id and todo.account_id = reservations.account_id
  order by reservations.id
  for update of reservations
), per_account as (
  select todo.account_id, sum(todo.cost_nano)::bigint as cost, coalesce(sum(held.amount_nano), 0)::bigint as released
  from todo left join held on held.id = todo.id
  group by todo.account_id
), locked as (
  select accounts.id, accounts.balance_nano, accounts.reserved_nano from accounts
  join per_account on per_account.account_id = accounts.id
  order by accounts.id
  for no key update of accounts
), fits as (
  select per_account.* from per_account join locked on locked.id = per_account.account_id
  where locked.balance_nano - locked.reserved_nano + per_account.released >= per_account.cost
), charged as (
  update accounts
  set balance_nano = balance_nano - fits.cost, reserved_nano = reserved_nano - fits.released,
    spent_nano = case when spent_nano > 9223372036854775807 - fits.cost then 9223372036854775807
      else spent_nano + fits.cost end
  from fits
  where accounts.id = fits.account_id and (select count(*) from locked) >= 0
  returning accounts.id
), released as (
  delete from reservations using held, todo
  where reservations.id = held.id and todo.id = held.id and todo.account_id in (select id from charged)
  returning reservations.id
), inserted as (
  insert into usage
    (id, request_id, account_id, key_public_id, model, prompt_tokens, completion_tokens, cost_nano,
     finish_reason, error_code, "user", queue_ms, first_token_ms, total_ms, estimated, created_at)
  select id, request_id, account_id, key_public_id, model, prompt_tokens, completion_tokens, cost_nano,
    finish_reason, error_code, "user", queue_ms, first_token_ms, total_ms, estimated,
    coalesce(created_at, ${STATEMENT_TIME_TEXT})
  from todo
  where account_id in (select id from charged)
  returning id
)
select id from inserted where (select count(*) from released) >= 0`;
