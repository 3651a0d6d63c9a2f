import type { Kysely } from "kysely";
import type { Migration } from "kysely/migration";

/**
 * An index of usage rows by (created_at, id): the order the ledger is read in. Without it a page
 * of the whole ledger (`GET /admin/usage` without an account, key or model) sorted every row to
 * find the next thousand, and each page cost as much as the whole ledger.
 */
export const usageByTime: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createIndex("usage_created_at_id_index")
      .on("usage")
      .columns(["created_at", "id"])
      .execute();
  },
  async down(db: Kysely<unknown>): Promise<void> {
    await db.schema.dropIndex("usage_created_at_id_index").execute();
  },
};
