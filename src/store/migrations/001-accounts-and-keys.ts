import { type Kysely, sql } from "kysely";
import type { Migration } from "kysely/migration";

/**
 * Accounts and API keys. Billing (credits, reservations, usage) arrives in a later migration.
 * Column types follow the conventions in `database.ts`: text ids and timestamps, `bigint`
 * integers, JSON text lists, so the same migration runs on SQLite and PostgreSQL.
 */
export const accountsAndKeys: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable("accounts")
      .addColumn("id", "text", (column) => column.primaryKey())
      .addColumn("name", "text", (column) => column.notNull().unique())
      .addColumn("balance_nano", "bigint", (column) => column.notNull().defaultTo(0))
      .addColumn("created_at", "text", (column) => column.notNull())
      .execute();

    await db.schema
      .createTable("api_keys")
      .addColumn("id", "text", (column) => column.primaryKey())
      .addColumn("public_id", "text", (column) => column.notNull().unique())
      .addColumn("account_id", "text", (column) => column.references("accounts.id"))
      .addColumn("role", "text", (column) => column.notNull())
      .addColumn("name", "text", (column) => column.notNull())
      .addColumn("secret_hash", "text", (column) => column.notNull())
      .addColumn("allowed_models", "text")
      .addColumn("rpm", "bigint")
      .addColumn("tpm", "bigint")
      .addColumn("expires_at", "text")
      .addColumn("revoked_at", "text")
      .addColumn("created_at", "text", (column) => column.notNull())
      .addCheckConstraint("api_keys_role_check", sql`role in ('user', 'admin')`)
      .addCheckConstraint("api_keys_user_has_account_check", sql`role = 'admin' or account_id is not null`)
      .execute();

    await db.schema.createIndex("api_keys_account_id_index").on("api_keys").column("account_id").execute();
  },

  async down(db: Kysely<unknown>): Promise<void> {
    await db.schema.dropTable("api_keys").execute();
    await db.schema.dropTable("accounts").execute();
  },
};
