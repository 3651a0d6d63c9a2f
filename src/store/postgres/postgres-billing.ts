import { CompiledQuery, type Kysely } from "kysely";
import { toReservationRow, toUsageRow } from "../billing-rows.ts";
import { readBigInt } from "../column-values.ts";
import type { Database } from "../database.ts";
import type { Reservation, ReserveResult, Store, UsageRecord } from "../store.ts";

/**
 * Reserve and settle on PostgreSQL, each one statement (data-modifying CTEs) in its own implicit
 * transaction: one round trip instead of four (reserve: begin, update, insert, commit) and five
 * (settle). Every request pays both, and with a round trip costing the server tens of
 * microseconds of CPU (mostly the loopback write that wakes the database) they were most of a
 * request's cost; the account row's lock is now also held for one statement instead of several
 * round trips, so the requests of one account, which all update its row, queue less.
 *
 * Same behaviour as the generic path (`kysely-billing.ts`, whose conformance tests run here too):
 * - reserve: the conditional update re-checks `balance - reserved >= amount` on the row's latest
 *   version once it holds the row (READ COMMITTED), so concurrent reserves never overspend; the
 *   reservation row is inserted only when the update took the money. A duplicate id fails the
 *   whole statement.
 * - settle: nothing happens when a usage row with the id exists (or the reservation belongs to
 *   another account, which then throws). The reservation is deleted first, then the account row
 *   locked (the same order as `releaseReservations`, so the two never deadlock), the charge
 *   capped at what the account has beside its other reservations, and the usage row written with
 *   what was charged. A second settle of the same id racing the first fails on the usage row's
 *   primary key, which undoes its whole statement: it charges nothing.
 */
export function createPostgresBilling(db: Kysely<Database>): Pick<Store, "reserve" | "settle"> {
  return {
    async reserve(reservation: Reservation): Promise<ReserveResult> {
      if (reservation.amountNano < 0n) throw new RangeError("A reservation's amount must be zero or more.");
      const row = toReservationRow(reservation);
      const result = await db.executeQuery<{ reserved: boolean; found: boolean }>(
        CompiledQuery.raw(RESERVE, [
          row.account_id,
          row.amount_nano,
          row.id,
          row.request_id,
          row.key_public_id,
          row.model,
          row.replica_id,
          row.lease_expires_at,
          row.created_at,
        ]),
      );
      const outcome = result.rows[0];
      if (outcome?.reserved === true) return "reserved";
      return outcome?.found === true ? "insufficient_balance" : "account_not_found";
    },

    async settle(usage: UsageRecord): Promise<bigint> {
      if (usage.costNano < 0n) throw new RangeError("A usage row's cost must be zero or more.");
      const row = toUsageRow(usage);
      let outcome: SettleOutcome | undefined;
      try {
        const result = await db.executeQuery<SettleOutcome>(
          CompiledQuery.raw(SETTLE, [
            row.id,
            row.account_id,
            row.cost_nano,
            row.request_id,
            row.key_public_id,
            row.model,
            row.prompt_tokens,
            row.completion_tokens,
            row.finish_reason,
            row.error_code,
            row.user,
            row.queue_ms,
            row.first_token_ms,
            row.total_ms,
            row.estimated,
            row.created_at,
          ]),
        );
        outcome = result.rows[0];
      } catch (error) {
        // A settle of the same id committed while this one ran: it is the one that counts.
        if (isUniqueViolation(error, "usage_pkey")) return 0n;
        throw error;
      }
      if (outcome === undefined || outcome.settled_before) return 0n;
      if (outcome.foreign_owner) {
        throw new Error(
          `Reservation ${usage.id} belongs to another account than its usage row; nothing was settled.`,
        );
      }
      if (outcome.charged === null) {
        throw new Error(`No account has the id ${usage.accountId}; nothing was settled.`);
      }
      return readBigInt(outcome.charged);
    },
  };
}

interface SettleOutcome {
  settled_before: boolean;
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

/** $1 account, $2 amount, $3 id, $4 request id, $5 key, $6 model, $7 replica, $8 lease, $9 created. */
const RESERVE = `
with set_aside as (
  update accounts set reserved_nano = reserved_nano + $2::bigint
  where id = $1::text and balance_nano - reserved_nano >= $2::bigint
  returning id
), inserted as (
  insert into reservations
    (id, request_id, account_id, key_public_id, model, amount_nano, replica_id, lease_expires_at, created_at)
  select $3::text, $4::text, $1::text, $5::text, $6::text, $2::bigint, $7::text, $8::text, $9::text
  from set_aside
  returning id
)
select exists (select 1 from inserted) as reserved, exists (select 1 from accounts where id = $1::text) as found`;

/**
 * $1 id, $2 account, $3 cost, then the usage row's other columns: $4 request id, $5 key, $6 model,
 * $7 prompt tokens, $8 completion tokens, $9 finish reason, $10 error code, $11 user, $12 queue ms,
 * $13 first token ms, $14 total ms, $15 estimated, $16 created.
 *
 * `account` depends on `released` so that the reservation row is locked (deleted) before the
 * account row. The charge is `least(cost, available)`, where available is the balance less the
 * other reservations: a cost within its reservation always fits, a dearer one is capped.
 */
const SETTLE = `
with settled_before as (
  select 1 from usage where id = $1::text
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
  set balance_nano = balance_nano - settlement.charge, reserved_nano = reserved_nano - settlement.released
  from settlement
  where accounts.id = $2::text
  returning settlement.charge
), inserted as (
  insert into usage
    (id, request_id, account_id, key_public_id, model, prompt_tokens, completion_tokens, cost_nano,
     finish_reason, error_code, "user", queue_ms, first_token_ms, total_ms, estimated, created_at)
  select $1::text, $4::text, $2::text, $5::text, $6::text, $7::bigint, $8::bigint, charged.charge,
    $9::text, $10::text, $11::text, $12::bigint, $13::bigint, $14::bigint, $15::bigint, $16::text
  from charged
  returning id
)
select
  exists (select 1 from settled_before) as settled_before,
  exists (select 1 from foreign_owner) as foreign_owner,
  (select charge from charged where exists (select 1 from inserted)) as charged`;
