import { type Kysely, sql } from "kysely";
import type { Migration } from "kysely/migration";

/**
 * Billing: what an account holds, has been given, has set aside and has spent.
 *
 * - `accounts.reserved_nano`: the sum of the account's open reservations, kept on the account row
 *   so that a reservation is one conditional update of that row (`balance_nano - reserved_nano >=
 *   amount`), which PostgreSQL serialises with the row lock.
 * - `credits`: every amount ever added to an account, the opening balance included.
 * - `reservations`: money set aside for a running request, with the replica that holds it and
 *   that replica's lease. Its id is made by the server; `request_id` (the `x-request-id`, which a
 *   client may repeat) is not unique.
 * - `usage`: one row per settled (or refused) request; its id is the id of the reservation it
 *   settles, so a reservation is never charged twice.
 *
 * Ledger invariant (checked by `Store.audit`): for every account, `balance_nano` = sum of its
 * credits − sum of its usage costs, and `reserved_nano` = sum of its open reservations.
 *
 * Accounts made before this migration with a non-zero balance get an opening credit of that
 * balance (id = the account's id, as `Store.insertAccount` does), so the invariant holds from the
 * start.
 *
 * Indexes are few on purpose: every one is written by each reserve or settle. Reservations are
 * found by replica and by lease (release, renewal); usage by account, key or model over time. Column types follow `database.ts`; `estimated` is a `bigint` 0 or 1 (the same in both
 * dialects). Everything here is plain SQL that SQLite and PostgreSQL share.
 */
export const billing: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .alterTable("accounts")
      .addColumn("reserved_nano", "bigint", (column) => column.notNull().defaultTo(0))
      .execute();

    await db.schema
      .createTable("credits")
      .addColumn("id", "text", (column) => column.primaryKey())
      .addColumn("account_id", "text", (column) => column.notNull().references("accounts.id"))
      .addColumn("amount_nano", "bigint", (column) => column.notNull())
      .addColumn("note", "text")
      .addColumn("created_at", "text", (column) => column.notNull())
      .execute();
    await db.schema
      .createIndex("credits_account_id_created_at_index")
      .on("credits")
      .columns(["account_id", "created_at"])
      .execute();

    await db.schema
      .createTable("reservations")
      .addColumn("id", "text", (column) => column.primaryKey())
      .addColumn("request_id", "text", (column) => column.notNull())
      .addColumn("account_id", "text", (column) => column.notNull().references("accounts.id"))
      .addColumn("key_public_id", "text", (column) => column.notNull())
      .addColumn("model", "text", (column) => column.notNull())
      .addColumn("amount_nano", "bigint", (column) => column.notNull())
      .addColumn("replica_id", "text", (column) => column.notNull())
      .addColumn("lease_expires_at", "text", (column) => column.notNull())
      .addColumn("created_at", "text", (column) => column.notNull())
      .execute();
    await db.schema
      .createIndex("reservations_replica_id_index")
      .on("reservations")
      .column("replica_id")
      .execute();
    await db.schema
      .createIndex("reservations_lease_expires_at_index")
      .on("reservations")
      .column("lease_expires_at")
      .execute();

    await db.schema
      .createTable("usage")
      .addColumn("id", "text", (column) => column.primaryKey())
      .addColumn("request_id", "text", (column) => column.notNull())
      .addColumn("account_id", "text", (column) => column.notNull().references("accounts.id"))
      .addColumn("key_public_id", "text", (column) => column.notNull())
      .addColumn("model", "text", (column) => column.notNull())
      .addColumn("prompt_tokens", "bigint", (column) => column.notNull())
      .addColumn("completion_tokens", "bigint", (column) => column.notNull())
      .addColumn("cost_nano", "bigint", (column) => column.notNull())
      .addColumn("finish_reason", "text")
      .addColumn("error_code", "text")
      .addColumn("user", "text")
      .addColumn("queue_ms", "bigint")
      .addColumn("first_token_ms", "bigint")
      .addColumn("total_ms", "bigint", (column) => column.notNull())
      .addColumn("estimated", "bigint", (column) => column.notNull().defaultTo(0))
      .addColumn("created_at", "text", (column) => column.notNull())
      .addCheckConstraint("usage_estimated_check", sql`estimated in (0, 1)`)
      .execute();
    await db.schema
      .createIndex("usage_account_id_created_at_index")
      .on("usage")
      .columns(["account_id", "created_at"])
      .execute();
    await db.schema
      .createIndex("usage_key_public_id_created_at_index")
      .on("usage")
      .columns(["key_public_id", "created_at"])
      .execute();
    await db.schema
      .createIndex("usage_model_created_at_index")
      .on("usage")
      .columns(["model", "created_at"])
      .execute();

    await sql`
      insert into credits (id, account_id, amount_nano, note, created_at)
      select id, id, balance_nano, 'opening balance', created_at
      from accounts
      where balance_nano <> 0
    `.execute(db);
  },

  async down(db: Kysely<unknown>): Promise<void> {
    await db.schema.dropTable("usage").execute();
    await db.schema.dropTable("reservations").execute();
    await db.schema.dropTable("credits").execute();
    await db.schema.alterTable("accounts").dropColumn("reserved_nano").execute();
  },
};
