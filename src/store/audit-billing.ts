import type { Kysely } from "kysely";
import type { AuditProblem } from "./audit-problem.ts";
import { toReservation } from "./billing-rows.ts";
import { MAX_BIGINT_COLUMN, readBigInt } from "./column-values.ts";
import type { Database } from "./database.ts";
import { exactSumOf, toExactSums } from "./exact-money-sum.ts";

/** {@link Store.audit} on kysely: recomputes every account's money from its ledgers. */
export async function auditBilling(db: Kysely<Database>): Promise<AuditProblem[]> {
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
        // Spending stops at the largest value the column holds (see addToSpent in
        // reserve-settle-shared.ts).
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
}
