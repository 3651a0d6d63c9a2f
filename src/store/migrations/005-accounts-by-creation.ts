import type { Kysely } from "kysely";
import type { Migration } from "kysely/migration";

/**
 * An index of accounts by (created_at, name): the order they are listed in. Without it a page of
 * `GET /admin/accounts` sorted every account to find the next thousand.
 */
export const accountsByCreation: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createIndex("accounts_created_at_name_index")
      .on("accounts")
      .columns(["created_at", "name"])
      .execute();
  },
  async down(db: Kysely<unknown>): Promise<void> {
    await db.schema.dropIndex("accounts_created_at_name_index").execute();
  },
};
