import { type Kysely, sql } from "kysely";
import type { Migration } from "kysely/migration";

/**
 * `accounts.spent_nano`: what the account has been charged, kept on its row beside the balance
 * (every settle changes both in the same update), so that showing an account reads one row. It
 * summed the account's usage rows, which grows with the ledger: 0.1 s of a blocked event loop per
 * million rows on SQLite, for every account shown. Existing accounts get the sum of their usage.
 */
export const accountSpent: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .alterTable("accounts")
      .addColumn("spent_nano", "bigint", (column) => column.notNull().defaultTo(0))
      .execute();
    await sql`
      update accounts set spent_nano = coalesce(
        (select sum(usage.cost_nano) from usage where usage.account_id = accounts.id), 0)
    `.execute(db);
  },
  async down(db: Kysely<unknown>): Promise<void> {
    await db.schema.alterTable("accounts").dropColumn("spent_nano").execute();
  },
};
