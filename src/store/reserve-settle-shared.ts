import { type Insertable, type Kysely, type RawBuilder, sql } from "kysely";
import { MAX_BIGINT_COLUMN } from "./column-values.ts";
import { createQueryTemplate, type TemplateParameter } from "./create-query-template.ts";
import type { Database, ReservationsTable, UsageTable } from "./database.ts";
import { accountExists } from "./read-account-money.ts";
import type { ReserveResult } from "./store.ts";

/**
 * `spent_nano` plus `cost`, stopping at the largest value the column holds. Spending only ever
 * adds (credits can refill a balance without end, so a lifetime's spending can pass 2^63 - 1
 * nano-units: 9.2 billion units, within reach of currencies with small units). Past it, SQLite
 * turned the column into a float the store cannot read back, and PostgreSQL refused every settle
 * with "bigint out of range": charges were lost. The audit takes a saturated value as agreeing
 * with any larger sum of charges.
 */
function addToSpent(cost: RawBuilder<bigint>): RawBuilder<bigint> {
  return sql<bigint>`case when spent_nano > ${sql.raw(String(MAX_BIGINT_COLUMN))} - ${cost} then ${sql.raw(String(MAX_BIGINT_COLUMN))} else spent_nano + ${cost} end`;
}

/**
 * What a settle charges when the cost is above the request's reservation: the cost, but never
 * more than the account has available beside its other reservations (`reservedNano`, `heldNano`
 * the ones held in memory), so a balance is never overspent. The estimate a reservation rests
 * on (an upstream model's prompt tokens) can fall short of the real count; the account is then
 * charged what it can pay, and the usage row records that charge beside the real token counts.
 */
export function capCharge(
  costNano: bigint,
  account: { balanceNano: bigint; reservedNano: bigint; heldNano?: bigint },
): bigint {
  const available = account.balanceNano - account.reservedNano - (account.heldNano ?? 0n);
  if (available <= 0n) return 0n;
  return costNano < available ? costNano : available;
}

/**
 * The answer to a reservation above the largest amount a column holds (2^63 − 1 nano-units): no
 * balance is that large, so it never fits, and it is refused like any other that does not,
 * without binding an amount the database cannot hold.
 */
export async function refuseBeyondAnyBalance(
  db: Kysely<Database>,
  accountId: string,
): Promise<ReserveResult> {
  return (await accountExists(db, accountId)) ? "insufficient_balance" : "account_not_found";
}

export function noAccountError(accountId: string): Error {
  return new Error(`No account has the id ${accountId}; nothing was settled.`);
}

/**
 * The queries of reserve and settle, compiled once (see `createQueryTemplate`): on these paths
 * building a query with kysely would cost more than running it. SQLite runs the same SQL without
 * kysely, batched (`sqlite/sqlite-billing-batch.ts`).
 */
export function compileHotQueries(db: Kysely<Database>) {
  return {
    insertReservation: createQueryTemplate((parameter: TemplateParameter<Insertable<ReservationsTable>>) =>
      db.insertInto("reservations").values({
        id: parameter("id"),
        request_id: parameter("request_id"),
        account_id: parameter("account_id"),
        key_public_id: parameter("key_public_id"),
        model: parameter("model"),
        amount_nano: parameter("amount_nano"),
        replica_id: parameter("replica_id"),
        lease_expires_at: parameter("lease_expires_at"),
        created_at: parameter("created_at"),
      }),
    ),
    /** Writes a usage row unless one with its id exists (then affects no row). */
    insertUsage: createQueryTemplate((parameter: TemplateParameter<Insertable<UsageTable>>) =>
      db
        .insertInto("usage")
        .values({
          id: parameter("id"),
          request_id: parameter("request_id"),
          account_id: parameter("account_id"),
          key_public_id: parameter("key_public_id"),
          model: parameter("model"),
          prompt_tokens: parameter("prompt_tokens"),
          completion_tokens: parameter("completion_tokens"),
          cost_nano: parameter("cost_nano"),
          finish_reason: parameter("finish_reason"),
          error_code: parameter("error_code"),
          user: parameter("user"),
          queue_ms: parameter("queue_ms"),
          first_token_ms: parameter("first_token_ms"),
          total_ms: parameter("total_ms"),
          estimated: parameter("estimated"),
          created_at: parameter("created_at"),
        })
        .onConflict((conflict) => conflict.column("id").doNothing()),
    ),
    deleteReservation: createQueryTemplate((parameter: TemplateParameter<{ id: string }>) =>
      db
        .deleteFrom("reservations")
        .where("id", "=", parameter("id"))
        .returning(["account_id", "amount_nano"]),
    ),
    /** Charges `cost` to the balance and gives back `released` reserved money. */
    charge: createQueryTemplate(
      (parameter: TemplateParameter<{ accountId: string; cost: bigint; released: bigint }>) =>
        db
          .updateTable("accounts")
          .set((eb) => ({
            balance_nano: eb("balance_nano", "-", parameter("cost")),
            reserved_nano: eb("reserved_nano", "-", parameter("released")),
            spent_nano: addToSpent(parameter("cost")),
          }))
          .where("id", "=", parameter("accountId")),
    ),
    /**
     * Charges `cost` and gives back `released` only if the account can pay it beside its other
     * reservations (and `held`, the money of reservations held in memory); else affects no row.
     */
    chargeWithin: createQueryTemplate(
      (parameter: TemplateParameter<{ accountId: string; cost: bigint; released: bigint; held: bigint }>) =>
        db
          .updateTable("accounts")
          .set((eb) => ({
            balance_nano: eb("balance_nano", "-", parameter("cost")),
            reserved_nano: eb("reserved_nano", "-", parameter("released")),
            spent_nano: addToSpent(parameter("cost")),
          }))
          .where("id", "=", parameter("accountId"))
          .where((eb) =>
            eb(
              eb(
                eb(eb("balance_nano", "-", eb.ref("reserved_nano")), "+", parameter("released")),
                "-",
                parameter("held"),
              ),
              ">=",
              parameter("cost"),
            ),
          ),
    ),
    /** The cost a usage row records (what its settle charged). */
    readUsageCost: createQueryTemplate((parameter: TemplateParameter<{ id: string }>) =>
      db.selectFrom("usage").select("cost_nano").where("id", "=", parameter("id")),
    ),
    /** Corrects a usage row's cost to what was charged (a capped charge). */
    setUsageCost: createQueryTemplate((parameter: TemplateParameter<{ id: string; cost: bigint }>) =>
      db
        .updateTable("usage")
        .set({ cost_nano: parameter("cost") })
        .where("id", "=", parameter("id")),
    ),
  };
}
