import { type Kysely, sql } from "kysely";
import { DEFAULT_MIGRATION_TABLE, Migrator } from "kysely/migration";
import type { Database } from "./database.ts";
import { migrations } from "./migrations/migrations.ts";
import { SqliteFileError } from "./sqlite/explain-sqlite-error.ts";

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
 *
 * Its error's message is the one line a user sees: a damaged or unwritable SQLite file throws
 * the {@link SqliteFileError} that names the file and the fix, and a database that a newer
 * Tollgate migrated says so, with the migrations this version does not know and the way out.
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
  if (error === undefined) return;
  // Already names the file and the fix (and keeps what tells a locked file from a bug).
  if (error instanceof SqliteFileError) throw error;
  const unknown = await readUnknownMigrations(db, options.migrationTableSchema);
  // Without its cause: kysely calls this "corrupted migrations", which it is not.
  if (unknown.length > 0) throw new Error(describeNewerSchema(unknown));
  const failed = results?.find((result) => result.status === "Error");
  const where = failed === undefined ? "" : ` (migration ${failed.migrationName})`;
  throw new Error(`Could not migrate the store to the latest schema${where}.`, { cause: error });
}

/**
 * The migrations the database records as applied that this code does not have: a newer Tollgate
 * applied them. Empty when the table cannot be read; the migration's own error then says more.
 */
async function readUnknownMigrations(db: Kysely<Database>, schema: string | undefined): Promise<string[]> {
  const table =
    schema === undefined ? sql.id(DEFAULT_MIGRATION_TABLE) : sql.id(schema, DEFAULT_MIGRATION_TABLE);
  try {
    const { rows } = await sql<{ name: string }>`select name from ${table} order by name`.execute(db);
    return rows.map((row) => row.name).filter((name) => !Object.hasOwn(migrations, name));
  } catch {
    return [];
  }
}

function describeNewerSchema(unknown: string[]): string {
  const names = `${unknown.length === 1 ? "migration" : "migrations"} ${unknown.join(", ")}`;
  const newest = Object.keys(migrations).at(-1);
  return `The database was migrated by a newer version of Tollgate: it has ${names}, which this version does not know (its newest is ${newest}). Run that version of Tollgate or a newer one on it, or restore the backup made before the upgrade.`;
}
