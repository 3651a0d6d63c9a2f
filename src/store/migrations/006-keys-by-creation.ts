import type { Kysely } from "kysely";
import type { Migration } from "kysely/migration";

/**
 * An index of API keys by (created_at, public_id): the order they are listed in. Without it a page
 * of `GET /admin/keys` sorted every key to find the next thousand.
 */
export const keysByCreation: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createIndex("api_keys_created_at_public_id_index")
      .on("api_keys")
      .columns(["created_at", "public_id"])
      .execute();
  },
  async down(db: Kysely<unknown>): Promise<void> {
    await db.schema.dropIndex("api_keys_created_at_public_id_index").execute();
  },
};
