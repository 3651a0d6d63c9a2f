import type { Kysely } from "kysely";
import type { AuditProblem, SpentRepair } from "./audit-problem.ts";
import { MAX_BIGINT_COLUMN, readBigInt } from "./column-values.ts";
import type { Database } from "./database.ts";
import { exactSumOf, readExactSum } from "./exact-money-sum.ts";

/**
 * {@link Store.repairSpent} on kysely: for each account the audit found off, one transaction
 * that first locks the account's row (a write that changes nothing: PostgreSQL's row lock, or
 * SQLite's write lock), then sums the account's charges, which every settle committed before the
 * lock includes and every later one waits for, and sets the spent amount to it.
 */
export async function repairSpent(
  db: Kysely<Database>,
  audit: () => Promise<AuditProblem[]>,
): Promise<SpentRepair[]> {
  const repairs: SpentRepair[] = [];
  for (const problem of await audit()) {
    if (problem.kind !== "spent_mismatch") continue;
    const repair = await db.transaction().execute(async (transaction) => {
      const locked = await transaction
        .updateTable("accounts")
        .set((eb) => ({ spent_nano: eb.ref("spent_nano") }))
        .where("id", "=", problem.accountId)
        .returning("spent_nano")
        .executeTakeFirst();
      if (locked === undefined) return undefined;
      const charged = await transaction
        .selectFrom("usage")
        .select(exactSumOf("cost_nano"))
        .where("account_id", "=", problem.accountId)
        .executeTakeFirstOrThrow();
      const fromNano = readBigInt(locked.spent_nano);
      // Spending stops at the largest value the column holds, as settling does.
      let toNano = readExactSum(charged);
      if (toNano > MAX_BIGINT_COLUMN) toNano = MAX_BIGINT_COLUMN;
      if (toNano === fromNano) return undefined;
      await transaction
        .updateTable("accounts")
        .set({ spent_nano: toNano })
        .where("id", "=", problem.accountId)
        .execute();
      return { accountId: problem.accountId, fromNano, toNano };
    });
    if (repair !== undefined) repairs.push(repair);
  }
  return repairs;
}
