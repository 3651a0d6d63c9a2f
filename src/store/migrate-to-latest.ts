import type { Kysely } from "kysely";
import { Migrator } from "kysely/migration";
import type { Database } from "./database.ts";
import { migrations } from "./migrations/migrations.ts";

/** Options of {@link migrateToLatest}. */
export interface MigrateToLatestOptions {
  /**
   * The schema that holds kysely's own tables (`kysely_migration`, `kysely_migration_lock`);
   * `undefined` (SQLite) leaves them unqualified. PostgreSQL stores name the schema they migrate:
   * without it kysely takes the tables for existing when any schema of the database has them.
   */
  migrationTableSchema?: string;
}

/**
 * Brings the schema up to the newest migration (creating it in an empty database). Where the
 * dialect has transactional DDL (PostgreSQL), kysely runs the pending migrations in one
 * transaction under its migration lock, and `openPostgresStore` holds an advisory lock of its
 * own around the whole call; on SQLite kysely does neither, so `openSqliteStore` runs this whole
 * call in one write transaction instead. Either way two processes starting on the same store do
 * not both apply a migration.
 */
export async function migrateToLatest(
  db: Kysely<Database>,
  options: MigrateToLatestOptions = {},
): Promise<void> {
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => ({ ...migrations }) },
    migrationTableSchema: options.migrationTableSchema,
  });
  const { error, results } = await migrator.migrateToLatest();
  if (error !== undefined) {
    const failed = results?.find((result) => result.status === "Error");
    const where = failed === undefined ? "" : ` (migration ${failed.migrationName})`;
    throw new Error(`Could not migrate the store to the latest schema${where}.`, { cause: error });
  }
}
