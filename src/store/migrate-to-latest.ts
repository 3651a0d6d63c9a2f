import type { Kysely } from "kysely";
import { Migrator } from "kysely/migration";
import type { Database } from "./database.ts";
import { migrations } from "./migrations/migrations.ts";

/**
 * Brings the schema up to the newest migration (creating it in an empty database). Where the
 * dialect has transactional DDL (PostgreSQL), kysely runs each migration in a transaction under
 * its migration lock; on SQLite it does neither, so `openSqliteStore` runs this whole call in one
 * write transaction instead. Either way two processes starting on the same store do not both
 * apply a migration.
 */
export async function migrateToLatest(db: Kysely<Database>): Promise<void> {
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => ({ ...migrations }) },
  });
  const { error, results } = await migrator.migrateToLatest();
  if (error !== undefined) {
    const failed = results?.find((result) => result.status === "Error");
    const where = failed === undefined ? "" : ` (migration ${failed.migrationName})`;
    throw new Error(`Could not migrate the store to the latest schema${where}.`, { cause: error });
  }
}
