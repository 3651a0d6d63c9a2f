import { type ExpressionBuilder, type Kysely, type SelectQueryBuilder, sql } from "kysely";
import { auditBilling } from "./audit-billing.ts";
import { toCreditRecord, toCreditRow, toReservation, toUsageRow } from "./billing-rows.ts";
import { MAX_BIGINT_COLUMN, readBigInt, toTimestampText } from "./column-values.ts";
import type { Database } from "./database.ts";
import { listUsage, sumUsage } from "./list-and-sum-usage.ts";
import { accountExists, readAccountBalance, readAccountMoney } from "./read-account-money.ts";
import { compileHotQueries } from "./reserve-settle-shared.ts";
import type { CreditRecord, CreditResult, Reservation, Store, UsageRecord } from "./store.ts";
import type { UsageFilter, UsageGrouping, UsagePage } from "./usage-query.ts";
import { SUM_WINDOW_ROWS } from "./usage-sum-window.ts";

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
  /**
   * SQL giving a refused request's usage row the time of the statement that writes it, instead of
   * the record's `createdAt` (PostgreSQL's, postgres/usage-stamps.ts); settles do likewise.
   */
  usageTimeSql?: string | undefined;
  /**
   * The time a paged usage listing stays before: PostgreSQL's (postgres/usage-stamps.ts), and
   * SQLite's (open-sqlite-store.ts: now, once the batches of rows stamped before it committed).
   */
  readListingHorizon?: (() => Promise<string>) | undefined;
  /**
   * How a credit whose COMMIT went unanswered learns whether it committed (PostgreSQL's,
   * postgres/postgres-commit-check.ts). Without it (SQLite, in the process: a commit's outcome is
   * never lost), a credit that failed never committed.
   */
  commitCheck?: CommitCheck | undefined;
}

/**
 * Whether a transaction committed, asked after the answer to its COMMIT was lost (the connection
 * cut as it came back): the row it wrote is then there, and only this tells it from a row another
 * transaction wrote with the same id.
 */
export interface CommitCheck {
  /** The running transaction's id, read in it (`transaction`). */
  readTransactionId(transaction: Kysely<Database>): Promise<string>;
  /** Whether the transaction with this id committed: not while it runs, nor once rolled back. */
  hasCommitted(db: Kysely<Database>, transactionId: string): Promise<boolean>;
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
      const row = toUsageRow(usage);
      if (options.usageTimeSql === undefined) await db.executeQuery(queries.insertUsage(row));
      else
        await db
          .insertInto("usage")
          .values({ ...row, created_at: sql<string>`${sql.raw(options.usageTimeSql)}` })
          .onConflict((conflict) => conflict.column("id").doNothing())
          .execute();
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
      /** This attempt's transaction, once it wrote the credit (see CommitCheck). */
      let transactionId: string | undefined;
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
          transactionId = await options.commitCheck?.readTransactionId(transaction);
          return await withMoney(transaction, "credited");
        });
      } catch (error) {
        if (!(await exists(db).catch(() => false))) throw error;
        // The row is this attempt's own when its COMMIT went through but the answer was lost (the
        // connection cut as it came back): a credit made now, not a replay (one without an
        // Idempotency-Key was answered as a replay). Otherwise it is another request's with the
        // same id: two retries at once, this one's insert meeting the other's row once that
        // committed (this transaction, balance update included, rolled back). An attempt whose
        // insert went through held the id until it ended, so where the check itself fails the
        // row is taken for its own.
        const own =
          transactionId !== undefined &&
          options.commitCheck !== undefined &&
          (await options.commitCheck.hasCommitted(db, transactionId).catch(() => true));
        return await withMoney(db, own ? "credited" : "already_credited");
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

    listUsage: async (filter?: UsageFilter, page?: UsagePage) =>
      listUsage(
        db,
        filter,
        page,
        page === undefined || options.readListingHorizon === undefined
          ? undefined
          : await options.readListingHorizon(),
      ),

    sumUsage: (filter?: UsageFilter, grouping?: UsageGrouping) =>
      sumUsage(db, sumWindowRows, filter, grouping),

    audit: () => auditBilling(db),
  };
}

/** Reservation ids per lease-renewing statement (each may appear twice in it). */
const RENEWED_PER_STATEMENT = 1000;

/**
 * Locks the rows a query selects in id order (PostgreSQL): statements that lock several rows of a
 * table must take them in one order, or two of them can each hold a row the other waits for (a
 * batch of settles locks its reservations in id order).
 */
function lockedInIdOrder<Output>(query: SelectQueryBuilder<Database, "reservations", Output>) {
  return query.orderBy("id").forUpdate();
}
