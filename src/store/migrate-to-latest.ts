import type { Kysely } from "kysely";
import { Migrator } from "kysely/migration";
import type { Database } from "./database.ts";
import { migrations } from "./migrations/migrations.ts";

/**
 * Brings the schema up to the newest migration (creating it in an empty database). Migrations
 * run in one transaction each, under kysely's migration lock, so two processes starting on
 * the same store do not both apply them.
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
