import { setImmediate } from "node:timers/promises";
import {
  type ExpressionBuilder,
  type Insertable,
  type Kysely,
  type RawBuilder,
  type SelectQueryBuilder,
  sql,
} from "kysely";
import { toCreditRecord, toCreditRow, toReservation, toUsageRecord, toUsageRow } from "./billing-rows.ts";
import { MAX_BIGINT_COLUMN, readBigInt, requirePageLimit, toTimestampText } from "./column-values.ts";
import { createQueryTemplate, type TemplateParameter } from "./create-query-template.ts";
import type { Database, ReservationsTable, UsageTable } from "./database.ts";
import type {
  AccountBalance,
  AccountMoney,
  AuditProblem,
  CreditRecord,
  CreditResult,
  Reservation,
  ReserveResult,
  Store,
  UsageFilter,
  UsageGrouping,
  UsagePage,
  UsageRecord,
  UsageTotals,
} from "./store.ts";
import { groupExpression, SUM_WINDOW_ROWS, type UsageCursorRow, whereInWindow } from "./usage-sum-window.ts";

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
 * The billing half of the {@link Store} that both databases share. Reserving and settling are
 * each database's own: PostgreSQL's in `postgres/postgres-billing.ts` (a row lock per account,
 * batched), SQLite's in `sqlite/sqlite-billing-batch.ts` (held in memory, group-committed).
 */
export type BillingStore = Pick<
  Store,
  | "insertUsage"
  | "renewLeases"
  | "releaseReservations"
  | "listReservations"
  | "credit"
  | "listCredits"
  | "getCredit"
  | "getAccountMoney"
  | "getAccountBalance"
  | "listUsage"
  | "sumUsage"
  | "audit"
>;

/** How {@link createKyselyBilling} runs on its dialect. */
export interface KyselyBillingOptions {
  /** Whether reads that decide a write lock their rows (`for no key update`): PostgreSQL's. */
  lockRows: boolean;
  /** Usage rows summed per query by `sumUsage`. Default {@link SUM_WINDOW_ROWS}, SQLite's. */
  sumWindowRows?: number;
}

/**
 * Billing over any kysely dialect, but for reserving and settling (see {@link BillingStore}).
 *
 * The money of an account lives on its row: `balance_nano` (credits minus settled charges) and
 * `reserved_nano` (open reservations). Every change of either happens in the same transaction as
 * the ledger row that explains it (credit, reservation, usage), so `audit` can recompute both.
 */
export function createKyselyBilling(
  db: Kysely<Database>,
  options: KyselyBillingOptions = { lockRows: false },
): BillingStore {
  const queries = compileHotQueries(db);
  const { lockRows } = options;
  const sumWindowRows = options.sumWindowRows ?? SUM_WINDOW_ROWS;

  return {
    async insertUsage(usage: UsageRecord): Promise<void> {
      if (usage.costNano !== 0n) {
        throw new RangeError("insertUsage records refused requests, which cost 0; settle charges.");
      }
      await db.executeQuery(queries.insertUsage(toUsageRow(usage)));
    },

    async renewLeases(
      replicaId: string,
      leaseExpiresAt: Date,
      reservationIds?: readonly string[],
    ): Promise<void> {
      // In slices, within the bound parameters a statement may have (SQLite: 32,766).
      const slices =
        reservationIds === undefined
          ? [undefined]
          : Array.from({ length: Math.ceil(reservationIds.length / RENEWED_PER_STATEMENT) }, (_, index) =>
              reservationIds.slice(index * RENEWED_PER_STATEMENT, (index + 1) * RENEWED_PER_STATEMENT),
            );
      for (const ids of slices) {
        let query = db
          .updateTable("reservations")
          .set({ lease_expires_at: toTimestampText(leaseExpiresAt) })
          .where("replica_id", "=", replicaId);
        if (ids !== undefined) query = query.where("id", "in", ids);
        if (lockRows) {
          query = query.where("id", "in", (eb) => {
            let locked = eb.selectFrom("reservations").select("id").where("replica_id", "=", replicaId);
            if (ids !== undefined) locked = locked.where("id", "in", ids);
            return lockedInIdOrder(locked);
          });
        }
        await query.execute();
      }
    },

    async releaseReservations(options: { replicaId?: string; expiredBefore?: Date }): Promise<number> {
      const { replicaId, expiredBefore } = options;
      if (replicaId === undefined && expiredBefore === undefined) return 0;
      return await db.transaction().execute(async (transaction) => {
        const toRelease =
          replicaId === "*"
            ? undefined
            : (eb: ExpressionBuilder<Database, "reservations">) => {
                const expired =
                  expiredBefore === undefined
                    ? undefined
                    : eb("lease_expires_at", "<", toTimestampText(expiredBefore));
                const mine = replicaId === undefined ? undefined : eb("replica_id", "=", replicaId);
                return mine !== undefined && expired !== undefined
                  ? eb.or([mine, expired])
                  : (mine ?? expired)!;
              };
        let query = transaction.deleteFrom("reservations");
        if (toRelease !== undefined) query = query.where(toRelease);
        if (lockRows) {
          query = query.where("id", "in", (eb) => {
            const rows = eb.selectFrom("reservations").select("id");
            return lockedInIdOrder(toRelease === undefined ? rows : rows.where(toRelease));
          });
        }
        const released = await query.returning(["account_id", "amount_nano"]).execute();
        const releasedByAccount = new Map<string, bigint>();
        for (const row of released) {
          const amount = readBigInt(row.amount_nano);
          releasedByAccount.set(row.account_id, (releasedByAccount.get(row.account_id) ?? 0n) + amount);
        }
        // In id order, so two concurrent releases lock the account rows in the same order.
        const accountIds = [...releasedByAccount.keys()].sort();
        for (const accountId of accountIds) {
          const amount = releasedByAccount.get(accountId) ?? 0n;
          await transaction
            .updateTable("accounts")
            .set((eb) => ({ reserved_nano: eb("reserved_nano", "-", amount) }))
            .where("id", "=", accountId)
            .execute();
        }
        return released.length;
      });
    },

    async listReservations(): Promise<Reservation[]> {
      const rows = await db
        .selectFrom("reservations")
        .selectAll()
        .orderBy("created_at")
        .orderBy("id")
        .execute();
      return rows.map(toReservation);
    },

    async credit(credit: CreditRecord): Promise<CreditResult> {
      const amount = credit.amountNano;
      if (amount <= 0n) throw new RangeError("A credit's amount must be more than zero.");
      const exists = async (executor: Kysely<Database>) =>
        (await executor.selectFrom("credits").select("id").where("id", "=", credit.id).executeTakeFirst()) !==
        undefined;
      /** The outcome with the account's money, read by `executor` (in the transaction, if any). */
      const withMoney = async (
        executor: Kysely<Database>,
        outcome: "credited" | "already_credited",
      ): Promise<CreditResult> => {
        const money = await readAccountMoney(executor, credit.accountId);
        return money === undefined ? { outcome: "account_not_found" } : { outcome, money };
      };
      try {
        return await db.transaction().execute(async (transaction) => {
          // A credit's id is its identity: one that exists is a retry, which changes nothing.
          if (await exists(transaction)) return await withMoney(transaction, "already_credited");
          // SQLite would turn an overflowing sum into a floating-point number: refuse it instead.
          const updated = await transaction
            .updateTable("accounts")
            .set((eb) => ({ balance_nano: eb("balance_nano", "+", amount) }))
            .where("id", "=", credit.accountId)
            .where("balance_nano", "<=", MAX_BIGINT_COLUMN - amount)
            .executeTakeFirst();
          if (updated.numUpdatedRows === 0n) {
            return {
              outcome: (await accountExists(transaction, credit.accountId))
                ? "balance_too_large"
                : "account_not_found",
            };
          }
          await transaction.insertInto("credits").values(toCreditRow(credit)).execute();
          return await withMoney(transaction, "credited");
        });
      } catch (error) {
        // Two retries at once: the second's insert meets the first's row once that commits (and
        // its transaction, balance update included, is rolled back).
        if (await exists(db).catch(() => false)) return await withMoney(db, "already_credited");
        throw error;
      }
    },

    async listCredits(accountId: string): Promise<CreditRecord[]> {
      const rows = await db
        .selectFrom("credits")
        .selectAll()
        .where("account_id", "=", accountId)
        .orderBy("created_at")
        .orderBy("id")
        .execute();
      return rows.map(toCreditRecord);
    },

    async getCredit(id: string): Promise<CreditRecord | undefined> {
      const row = await db.selectFrom("credits").selectAll().where("id", "=", id).executeTakeFirst();
      return row === undefined ? undefined : toCreditRecord(row);
    },

    getAccountMoney: (accountId: string) => readAccountMoney(db, accountId),

    getAccountBalance: (accountId: string) => readAccountBalance(db, accountId),

    async listUsage(filter: UsageFilter = {}, page?: UsagePage): Promise<UsageRecord[]> {
      let query = whereUsageMatches(db.selectFrom("usage").selectAll(), filter);
      if (page !== undefined) {
        const limit = requirePageLimit(page.limit, "row");
        const after = page.after;
        query = whereAfter(
          query,
          after === undefined ? undefined : { created_at: toTimestampText(after.createdAt), id: after.id },
        ).limit(limit);
      }
      const rows = await query.orderBy("created_at").orderBy("id").execute();
      return rows.map(toUsageRecord);
    },

    async sumUsage(filter: UsageFilter = {}, grouping?: UsageGrouping): Promise<UsageTotals[]> {
      // In windows of rows along the (created_at, id) index, yielding between them: see
      // usage-sum-window.ts, which also says how each window's query is kept to its own rows.
      const group = grouping === undefined ? sql<string>`''` : groupExpression(grouping);
      const sums = new Map<string, UsageTotals>();
      let after: UsageCursorRow | undefined;
      for (;;) {
        const end = await whereAfter(
          whereUsageMatches(db.selectFrom("usage").select(["created_at", "id"]), filter),
          after,
        )
          .orderBy("created_at")
          .orderBy("id")
          .offset(sumWindowRows - 1)
          .limit(1)
          .executeTakeFirst();
        let query = whereInWindow(
          whereUsageMatches(
            db.selectFrom("usage").select([
              group.as("usage_group"),
              // A key spends from one account: any of its rows names it.
              sql<string | null>`min(account_id)`.as("account_id"),
              sql<bigint>`count(*)`.as("requests"),
              sumOf("prompt_tokens").as("prompt_tokens"),
              sumOf("completion_tokens").as("completion_tokens"),
              ...exactSumOf("cost_nano"),
            ]),
            filter,
          ),
          { after, end },
        );
        if (grouping !== undefined) query = query.groupBy(group);
        for (const row of await query.execute()) {
          const requests = Number(readBigInt(row.requests));
          if (requests === 0) continue;
          let totals = sums.get(row.usage_group);
          if (totals === undefined) {
            const accountId = grouping === "key" && row.account_id !== null ? row.account_id : undefined;
            totals = noUsage(row.usage_group, accountId);
            sums.set(row.usage_group, totals);
          }
          totals.requests += requests;
          totals.promptTokens += Number(readBigInt(row.prompt_tokens));
          totals.completionTokens += Number(readBigInt(row.completion_tokens));
          totals.costNano += readExactSum(row);
        }
        if (end === undefined) break;
        after = end;
        await setImmediate();
      }
      if (grouping === undefined && sums.size === 0) return [noUsage("", undefined)];
      return [...sums.values()];
    },

    async audit(): Promise<AuditProblem[]> {
      // One snapshot: the sums and the open reservations describe the same instant. (SQLite's
      // transactions always see one; PostgreSQL's default, read committed, takes one per statement.)
      return await db
        .transaction()
        .setIsolationLevel("repeatable read")
        .setAccessMode("read only")
        .execute(async (transaction) => {
          const accounts = await transaction
            .selectFrom("accounts")
            .select(["id", "balance_nano", "reserved_nano", "spent_nano"])
            .orderBy("created_at")
            .orderBy("name")
            .execute();
          // Per account in one pass over each ledger. Credits alone can add up past what an
          // integer column holds (a balance kept near 2^63 - 1 by credits that replace charges).
          const credited = toExactSums(
            await transaction
              .selectFrom("credits")
              .select(["account_id", ...exactSumOf("amount_nano")])
              .groupBy("account_id")
              .execute(),
          );
          const charged = toExactSums(
            await transaction
              .selectFrom("usage")
              .select(["account_id", ...exactSumOf("cost_nano")])
              .groupBy("account_id")
              .execute(),
          );
          const open = toExactSums(
            await transaction
              .selectFrom("reservations")
              .select(["account_id", ...exactSumOf("amount_nano")])
              .groupBy("account_id")
              .execute(),
          );
          const reservations = await transaction
            .selectFrom("reservations")
            .selectAll()
            .orderBy("created_at")
            .orderBy("id")
            .execute();

          const problems: AuditProblem[] = [];
          for (const account of accounts) {
            const balanceNano = readBigInt(account.balance_nano);
            const chargedNano = charged.get(account.id) ?? 0n;
            const expectedBalance = (credited.get(account.id) ?? 0n) - chargedNano;
            if (balanceNano !== expectedBalance) {
              problems.push({
                kind: "balance_mismatch",
                accountId: account.id,
                balanceNano,
                expectedNano: expectedBalance,
              });
            }
            const spentNano = readBigInt(account.spent_nano);
            // Spending stops at the largest value the column holds (see addToSpent).
            const saturated = spentNano === MAX_BIGINT_COLUMN && chargedNano >= MAX_BIGINT_COLUMN;
            if (spentNano !== chargedNano && !saturated) {
              problems.push({
                kind: "spent_mismatch",
                accountId: account.id,
                spentNano,
                expectedNano: chargedNano,
              });
            }
            const reservedNano = readBigInt(account.reserved_nano);
            const expectedReserved = open.get(account.id) ?? 0n;
            if (reservedNano !== expectedReserved) {
              problems.push({
                kind: "reserved_mismatch",
                accountId: account.id,
                reservedNano,
                expectedNano: expectedReserved,
              });
            }
          }
          for (const row of reservations) {
            problems.push({ kind: "open_reservation", reservation: toReservation(row) });
          }
          return problems;
        });
    },
  };
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

/** Whether the account exists: what tells a refusal's two causes apart. */
async function accountExists(db: Kysely<Database>, accountId: string): Promise<boolean> {
  return (
    (await db.selectFrom("accounts").select("id").where("id", "=", accountId).executeTakeFirst()) !==
    undefined
  );
}

export function noAccountError(accountId: string): Error {
  return new Error(`No account has the id ${accountId}; nothing was settled.`);
}

/**
 * The queries of reserve and settle, compiled once (see `createQueryTemplate`): on these paths
 * building a query with kysely would cost more than running it. SQLite runs the same SQL without
 * kysely, batched (`sqlite/sqlite-billing-batch.ts`).
 */
/** An account's balance and reserved money, as the file (or database) has them. */
export async function readAccountBalance(
  db: Kysely<Database>,
  accountId: string,
): Promise<AccountBalance | undefined> {
  const row = await db
    .selectFrom("accounts")
    .select(["balance_nano", "reserved_nano"])
    .where("id", "=", accountId)
    .executeTakeFirst();
  if (row === undefined) return undefined;
  return { balanceNano: readBigInt(row.balance_nano), reservedNano: readBigInt(row.reserved_nano) };
}

/** An account's balance, reserved and spent money, as the file (or database) has them. */
export async function readAccountMoney(
  db: Kysely<Database>,
  accountId: string,
): Promise<AccountMoney | undefined> {
  const row = await db
    .selectFrom("accounts")
    .select(["balance_nano", "reserved_nano", "spent_nano"])
    .where("id", "=", accountId)
    .executeTakeFirst();
  if (row === undefined) return undefined;
  return {
    balanceNano: readBigInt(row.balance_nano),
    reservedNano: readBigInt(row.reserved_nano),
    spentNano: readBigInt(row.spent_nano),
  };
}

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

/** Narrows a query of usage rows to those that match the filter. */
function whereUsageMatches<Output>(
  query: SelectQueryBuilder<Database, "usage", Output>,
  filter: UsageFilter,
): SelectQueryBuilder<Database, "usage", Output> {
  let narrowed = query;
  if (filter.accountId !== undefined) narrowed = narrowed.where("account_id", "=", filter.accountId);
  if (filter.keyPublicId !== undefined) narrowed = narrowed.where("key_public_id", "=", filter.keyPublicId);
  if (filter.model !== undefined) narrowed = narrowed.where("model", "=", filter.model);
  if (filter.since !== undefined)
    narrowed = narrowed.where("created_at", ">=", toTimestampText(filter.since));
  if (filter.until !== undefined) narrowed = narrowed.where("created_at", "<", toTimestampText(filter.until));
  return narrowed;
}

function noUsage(group: string, accountId: string | undefined): UsageTotals {
  return { group, accountId, requests: 0, promptTokens: 0, completionTokens: 0, costNano: 0n };
}

/**
 * Locks the rows a query selects in id order (PostgreSQL): statements that lock several rows of a
 * table must take them in one order, or two of them can each hold a row the other waits for (a
 * batch of settles locks its reservations in id order).
 */
/** Reservation ids per lease-renewing statement (each may appear twice in it). */
const RENEWED_PER_STATEMENT = 1000;

function lockedInIdOrder<Output>(query: SelectQueryBuilder<Database, "reservations", Output>) {
  return query.orderBy("id").forUpdate();
}

/**
 * Narrows a query of usage rows to those after a position in (created_at, id) order: a row
 * value, so that both databases walk the (created_at, id) index from there.
 */
function whereAfter<Output>(
  query: SelectQueryBuilder<Database, "usage", Output>,
  after: UsageCursorRow | undefined,
): SelectQueryBuilder<Database, "usage", Output> {
  if (after === undefined) return query;
  return query.where((eb) => eb(eb.refTuple("created_at", "id"), ">", eb.tuple(after.created_at, after.id)));
}

/**
 * `sum(column)` as a `bigint` that is 0 over no rows, for counts far from 2^63 (tokens). The cast
 * matters on PostgreSQL, where the sum of a `bigint` column is a `numeric` (and overflow then
 * fails loudly, as SQLite's `sum` does). Money goes through {@link exactSumOf}.
 */
function sumOf(column: string) {
  return sql<bigint>`cast(coalesce(sum(${sql.ref(column)}), 0) as bigint)`;
}

/** 2^32: where {@link exactSumOf} splits each value. */
const SUM_SPLIT = 4_294_967_296n;

/**
 * The exact sum of an integer column of nano-units, which may exceed 2^63 - 1 (the usage of
 * several accounts, or the credits of one that spent and was credited again), as two sums that
 * never overflow: of `value / 2^32` (less than 2^31 in size each) and of `value % 2^32` (less
 * than 2^32), fine up to 2^31 rows. Both databases divide integers truncating toward zero, with
 * a remainder of the dividend's sign, so `high * 2^32 + low` is the sum for negative values too.
 * SQLite's `total()` would be a floating-point number, and PostgreSQL's `numeric` sum is not
 * SQLite's; this reads the same on both. Join the halves with {@link readExactSum}.
 */
export function exactSumOf(column: string) {
  const value = sql.ref(column);
  const split = sql.lit(Number(SUM_SPLIT));
  return [
    sql<bigint>`cast(coalesce(sum(${value} / ${split}), 0) as bigint)`.as("sum_high"),
    sql<bigint>`cast(coalesce(sum(${value} % ${split}), 0) as bigint)`.as("sum_low"),
  ] as const;
}

/** The sum that {@link exactSumOf} selected. */
export function readExactSum(row: { sum_high: unknown; sum_low: unknown }): bigint {
  return readBigInt(row.sum_high) * SUM_SPLIT + readBigInt(row.sum_low);
}

/** Rows of {@link exactSumOf} grouped by account, as each account's sum. */
function toExactSums(rows: readonly { account_id: string; sum_high: unknown; sum_low: unknown }[]) {
  return new Map(rows.map((row) => [row.account_id, readExactSum(row)]));
}
